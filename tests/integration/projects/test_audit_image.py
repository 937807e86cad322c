"""``hpcenv audit IMAGE``: a container image's Python packages judged like a venv's.

The images are made here from this machine's CPU torch wheel (real uv installs it into the
image's ``/usr/local``, as the python images have it): a rootfs directory, and the same
tree imported into podman's store (Debian's podman) and audited as ``podman:NAME``
through ``podman image mount``. On an A100 node (tests/data/facts) both are the CPU-only
build, exit 3, with resolve's fix.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from hpcenv.cli import main
from hpcenv.project.audit import read
from support import require

OPT_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
FACTS = Path(__file__).parents[2] / "data" / "facts" / "a100-standin.json"


def _rootfs(tmp_path: Path) -> Path:
    uv = shutil.which("uv")
    require("uv", uv is not None, "uv not on PATH")
    require("torch-wheel", OPT_WHEEL.is_file(), f"{OPT_WHEEL} missing")
    assert uv is not None
    root = tmp_path / "rootfs"
    for d in ("etc", "usr/local", "usr/lib/python3/dist-packages/six-1.16.0.dist-info"):
        (root / d).mkdir(parents=True)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    (root / "usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n"
    )
    python = shutil.which("python3.11") or shutil.which("python3")
    assert python is not None
    subprocess.run(
        [uv, "pip", "install", "-q", "--no-deps", "--offline", "--python", python,
         "--prefix", str(root / "usr" / "local"), str(OPT_WHEEL)],
        check=True, timeout=300,
    )  # fmt: skip
    return root


def test_a_rootfs_directory_is_judged_like_a_venv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _rootfs(tmp_path)
    # a symlink out of the image is never followed: this torch is not the image's
    outside = tmp_path / "outside" / "lib" / "python3.11" / "site-packages"
    (outside / "torch-9.9.9+cu999.dist-info").mkdir(parents=True)
    (root / "opt" / "venv" / "lib" / "python3.11").mkdir(parents=True)
    (root / "opt" / "venv" / "lib" / "python3.11" / "site-packages").symlink_to(outside)
    # nor a dist-info linked out of it, inside the installation that is read
    linked = tmp_path / "outside" / "numpy-9.9.9.dist-info"
    linked.mkdir()
    (linked / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 9.9.9\n")
    (root / "usr/local/lib/python3.11/site-packages/numpy-9.9.9.dist-info").symlink_to(linked)
    assert main(["audit", str(root), "--facts", str(FACTS), "--json"]) == 3
    out = capsys.readouterr().out
    assert '"torch": "2.13.0+cpu"' in out and "CPU-only" in out
    assert "the image's Python packages: /usr/local" in out
    assert "also in the image, not judged: /usr/lib/python3/dist-packages" in out
    assert "9.9.9" not in out
    assert sorted(read(root).versions) == ["torch"]  # neither the linked numpy nor torch 9.9.9


def test_a_podman_image_is_mounted_judged_and_unmounted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    podman = shutil.which("podman")
    require("podman", podman is not None, "apt-get install podman")
    assert podman is not None
    root = _rootfs(tmp_path)
    site = root / "usr/local/lib/python3.11/site-packages"
    for d in site.iterdir():  # the image keeps torch's metadata; its 700 MB of code stay out
        if not d.name.endswith(".dist-info"):
            shutil.rmtree(d)
    tar = tmp_path / "rootfs.tar"
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    name = f"localhost/hpcenv-audit-test-{secrets.token_hex(4)}:1"
    subprocess.run([podman, "import", "-q", str(tar), name], check=True, timeout=120,
                   capture_output=True)  # fmt: skip
    try:
        assert main(["audit", f"podman:{name}", "--facts", str(FACTS)]) == 3
        out, err = capsys.readouterr()
        assert "2.13.0+cpu" in out and "CPU-only" in err
        mounts = subprocess.run([podman, "image", "mount"], capture_output=True, text=True)
        assert name.split(":", maxsplit=1)[0] not in mounts.stdout  # unmounted after the audit
        assert main(["audit", "podman:localhost/no-such-image-hpcenv", "--facts", str(FACTS)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "podman image mount failed" in err, err
    finally:
        subprocess.run([podman, "rmi", "-f", name], capture_output=True, timeout=120)


def test_a_sif_names_the_step_that_unpacks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sif = tmp_path / "train.sif"
    sif.write_bytes(b"#!/usr/bin/env run-singularity\n")
    assert main(["audit", str(sif), "--facts", str(FACTS)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "apptainer build --sandbox DIR" in err, err


def _cuda_torch_image(root: Path, site: str) -> Path:
    """A rootfs whose ``site`` holds a CUDA torch's metadata (no code: nothing to scan)."""
    info = root / site / "torch-2.5.1+cu121.dist-info"
    info.mkdir(parents=True)
    (root / "etc").mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cu121\n")
    return root


def test_the_gpu_code_scan_of_an_image_stays_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a GPU node a CUDA torch's libraries are scanned (binaries/archs.check_venv): only
    in the image's package directory, never a site-packages or dist-info linked out of it;
    a distribution's torch in ``usr/lib/python3/dist-packages`` is scanned there too."""
    root = _cuda_torch_image(tmp_path / "rootfs", "usr/local/lib/python3.11/site-packages")
    outside = tmp_path / "outside"
    (outside / "site-packages").mkdir(parents=True)
    (outside / "site-packages" / "libhost.so").write_text("the host's, not the image's\n")
    (root / "usr/local/lib/python3.12").mkdir()
    (root / "usr/local/lib/python3.12/site-packages").symlink_to(outside / "site-packages")
    linked = outside / "host-1.0.dist-info"
    linked.mkdir()
    (linked / "METADATA").write_text("Metadata-Version: 2.1\nName: host\nVersion: 1.0\n")
    (linked / "RECORD").write_text("libhost.so,,\n")
    site = root / "usr/local/lib/python3.11/site-packages"
    (site / "host-1.0.dist-info").symlink_to(linked)
    read_text = Path.read_text
    opened: list[Path] = []

    def recorded(self: Path, *args: Any, **kwargs: Any) -> str:
        opened.append(self.resolve())
        return read_text(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_text", recorded)  # what the audit reads, recorded
        assert main(["audit", str(root), "--facts", str(FACTS), "--json"]) == 0
    out = capsys.readouterr().out
    assert "2.5.1+cu121" in out and str(outside) not in out and "libhost" not in out
    assert not [p for p in opened if p.is_relative_to(outside)]

    debian = _cuda_torch_image(tmp_path / "debian", "usr/lib/python3/dist-packages")
    assert main(["audit", str(debian), "--facts", str(FACTS), "--json"]) == 0
    assert "2.5.1+cu121" in capsys.readouterr().out


def test_a_merged_usr_image_is_read_as_an_image_not_as_a_venv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rocky/Fedora-like images link /lib to usr/lib, where the distribution's Python keeps
    /usr/lib/python3.9/site-packages: the root then looks like a venv (lib/python*/
    site-packages), and a pyvenv.cfg at the root may be there too. The image's rules hold
    all the same: the installation holding torch, nothing linked out of it."""
    root = _cuda_torch_image(tmp_path / "rocky", "usr/local/lib/python3.9/site-packages")
    distro = root / "usr/lib/python3.9/site-packages"
    (distro / "six-1.16.0.dist-info").mkdir(parents=True)
    (distro / "six-1.16.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n"
    )
    (root / "lib").symlink_to("usr/lib")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    linked = tmp_path / "outside" / "numpy-9.9.9.dist-info"
    linked.mkdir(parents=True)
    (linked / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 9.9.9\n")
    (distro / "numpy-9.9.9.dist-info").symlink_to(linked)
    assert main(["audit", str(root), "--facts", str(FACTS), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"torch": "2.5.1+cu121"' in out and "9.9.9" not in out
    assert "the image's Python packages: /usr/local" in out


def test_torch_in_lib64_of_an_rhel_image_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip on Rocky/RHEL puts a package with compiled code (torch) in /usr/local/lib64/
    python3.9/site-packages (its platlib), beside lib/ for pure ones."""
    root = _cuda_torch_image(tmp_path / "rocky", "usr/local/lib64/python3.9/site-packages")
    pure = root / "usr/local/lib/python3.9/site-packages/six-1.16.0.dist-info"
    pure.mkdir(parents=True)
    (pure / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")
    assert main(["audit", str(root), "--facts", str(FACTS), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"torch": "2.5.1+cu121"' in out and "the image's Python packages: /usr/local" in out
    assert sorted(read(root).versions) == ["six", "torch"]
