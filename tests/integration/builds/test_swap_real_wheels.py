"""``cudalibs.check`` against real wheels: torch 2.13.0 from PyPI (a CUDA 13 build) and the
exact NVIDIA wheels it resolves to (``uv pip compile``, linux x86_64, CPython 3.11).

What is real: torch's ``libc10_cuda.so`` and ``libcaffe2_nvrtc.so`` (their DT_NEEDED and
DT_RUNPATH), and every NVIDIA wheel's ``RECORD`` (which distribution installs which file
where), all read from PyPI by HTTP range requests (``hpcenv.knowledge.remote``) and
cached once under ``~/.cache/hpcenv-tests/swap-real``. The libraries' own bytes are not
needed for the check, so the site-packages is laid out from the RECORDs with empty
files. This found that an unsuffixed CUDA 13 wheel's version is its library's, not
CUDA's (``nvidia-cusparse 12.6.3.3`` ships with CUDA 13): a wheel's major is its
``-cuNN`` suffix or its ``nvidia/cuNN/`` directory. The cu12 and cu13 NCCL wheels'
RECORDs show the shared path of issue 12.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcenv.binaries import cudalibs
from hpcenv.knowledge import remote
from hpcenv.tools import uv
from support import cuda_artifacts, require
from support.buildkit import require_uv
from support.standin_cuda import compile_so

TORCH = "2.13.0"
TORCH_TAG = "cp311-cp311-manylinux_2_28_x86_64"
TORCH_LIBS = ("torch/lib/libc10_cuda.so", "torch/lib/libcaffe2_nvrtc.so")
CACHE = cuda_artifacts.CACHE / "swap-real"


def _members(project: str, version: str, tags: tuple[str, ...], want: object) -> dict[str, bytes]:
    """Members of a PyPI wheel chosen by ``want(name) -> bool``, by range requests."""
    last: Exception | None = None
    for tag in tags:
        try:
            url, _sha, _name = cuda_artifacts.release_file(project, version, tag)
        except cuda_artifacts.Unavailable as exc:
            last = exc
            continue
        with remote.open_wheel(url) as whl:
            return {n: whl.zip.read(n) for n in whl.zip.namelist() if want(n)}  # type: ignore[operator]
    raise cuda_artifacts.Unavailable(f"{project} {version}: {last}")


def _pins() -> dict[str, str]:
    """The NVIDIA wheels torch 2.13.0 resolves to on linux x86_64 (uv pip compile, PyPI)."""
    req = CACHE / "requirements.in"
    req.write_text(f"torch=={TORCH}\n")
    out = subprocess.run(
        [*uv.uv_argv(), "pip", "compile", str(req), "--python-platform", "x86_64-manylinux_2_28",
         "--python-version", "3.11", "--index-url", "https://pypi.org/simple", "--no-header",
         "--no-annotate", "--quiet"],
        capture_output=True, text=True, timeout=300, check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("UV_INDEX", "UV_DEFAULT"))},
    )  # fmt: skip
    pins = {}
    for line in out.stdout.splitlines():
        name, _, version = line.partition("==")
        if name.startswith("nvidia-") and version:  # cuda-toolkit & co. carry no libraries
            pins[name.strip()] = version.strip()
    return pins


def real_artifacts() -> Path:
    """``CACHE/artifacts.json`` and the files it names, fetched once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    done = CACHE / "artifacts.json"
    with cuda_artifacts.locked("swap-real"):
        if not done.exists():
            libs = _members("torch", TORCH, (TORCH_TAG,), lambda n: n in TORCH_LIBS)
            for name, data in libs.items():
                (CACHE / name).parent.mkdir(parents=True, exist_ok=True)
                (CACHE / name).write_bytes(data)
            records = {}
            pins = _pins()
            pins.setdefault("nvidia-nccl-cu12", "2.27.5")  # torch 2.9.1's, for the collision
            for project, version in sorted(pins.items()):
                got = _members(
                    project, version, ("manylinux_2_27_x86_64", "x86_64", "py3-none-any"),
                    lambda n: n.endswith(".dist-info/RECORD"),
                )  # fmt: skip
                for name, data in got.items():
                    (CACHE / name).parent.mkdir(parents=True, exist_ok=True)
                    (CACHE / name).write_bytes(data)
                    records[project] = name
            done.write_text(json.dumps({"pins": pins, "records": records}, indent=1))
    return done


@pytest.fixture(scope="module")
def artifacts() -> dict[str, object]:
    require_uv()
    try:
        path = real_artifacts()
    except (cuda_artifacts.Unavailable, subprocess.CalledProcessError, OSError) as exc:
        require("pypi", False, f"torch {TORCH}'s wheels on PyPI: {exc}")
        raise
    data: dict[str, object] = json.loads(path.read_text())
    return data


def lay_out(site: Path, records: dict[str, str], projects: list[str]) -> None:
    """site-packages from real RECORDs (empty files) and torch's real libraries."""
    for name in TORCH_LIBS:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CACHE / name, site / name)
    for project in projects:
        record = records[project]
        (site / record).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CACHE / record, site / record)
        for row in (CACHE / record).read_text().splitlines():
            path = row.split(",", 1)[0]
            if path.startswith("nvidia/"):
                (site / path).parent.mkdir(parents=True, exist_ok=True)
                (site / path).touch()


def test_torch_2_13_is_one_cuda_13_stack(artifacts: dict[str, object], tmp_path: Path) -> None:
    records: dict[str, str] = artifacts["records"]  # type: ignore[assignment]
    cu13 = [p for p in records if p != "nvidia-nccl-cu12"]
    assert "nvidia-nccl-cu13" in cu13 and "nvidia-cuda-runtime" in cu13
    site = tmp_path / "site-packages"
    lay_out(site, records, cu13)
    check = cudalibs.check(site, 13)
    assert check.ok, check.problems
    c10 = {r.needed: r for r in check.objects["torch/lib/libc10_cuda.so"]}
    assert c10["libcudart.so.13"].path == "nvidia/cu13/lib/libcudart.so.13"
    assert c10["libcudart.so.13"].major == 13
    nvrtc = {r.needed: r for r in check.objects["torch/lib/libcaffe2_nvrtc.so"]}
    assert nvrtc["libnvrtc.so.13"].owners[0].startswith("nvidia-cuda-nvrtc ")
    wrong = cudalibs.check(site, 12)
    assert any("belongs to CUDA 13 (nvidia-cuda-runtime" in p for p in wrong.problems)


def test_real_nccl_wheels_of_both_majors_share_a_path(
    artifacts: dict[str, object], tmp_path: Path
) -> None:
    """The RECORDs of nvidia-nccl-cu12 and -cu13 name the same file; an object that needs
    libnccl.so.2 through torch's real RUNPATH (compiled here) sees two owners."""
    records: dict[str, str] = artifacts["records"]  # type: ignore[assignment]
    rows = {
        p: {r.split(",", 1)[0] for r in (CACHE / records[p]).read_text().splitlines()}
        for p in ("nvidia-nccl-cu12", "nvidia-nccl-cu13")
    }
    shared = rows["nvidia-nccl-cu12"] & rows["nvidia-nccl-cu13"]
    assert "nvidia/nccl/lib/libnccl.so.2" in shared
    site = tmp_path / "site-packages"
    lay_out(site, records, list(records))
    stub = tmp_path / "stub"
    (stub / "libnccl.so.2").parent.mkdir(parents=True)
    compile_so(
        stub, "libnccl.so.2", "int ncclGetVersion(int *v) { return 0; }\n", soname="libnccl.so.2"
    )
    runpath = tuple(cuda_artifacts_runpath())
    (site / "torch" / "lib" / "libuses_nccl.so").write_bytes(
        compile_so(
            stub, "libuses_nccl.so",
            "int ncclGetVersion(int *);\nint f(void) { int v; return ncclGetVersion(&v); }\n",
            soname="libuses_nccl.so", needs=(stub / "libnccl.so.2",), runpath=runpath,
        )
    )  # fmt: skip
    check = cudalibs.check(site, 13)
    assert any(
        "libnccl.so.2: nvidia/nccl/lib/libnccl.so.2 is claimed by nvidia-nccl-cu12" in p
        and "nvidia-nccl-cu13" in p
        for p in check.problems
    ), check.problems


def cuda_artifacts_runpath() -> list[str]:
    """torch 2.13.0's own DT_RUNPATH (read from its real libc10_cuda.so)."""
    from hpcenv.kit import elf

    return elf.runpath(CACHE / "torch/lib/libc10_cuda.so")
