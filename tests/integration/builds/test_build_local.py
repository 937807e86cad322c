"""The real ``local`` build: real uv, the real CPU torch wheel from the wheelhouse,
real numpy and Ray from PyPI (or the uv cache). One build shared by the module."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO
from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    require_local_build()
    root = tmp_path_factory.mktemp("local-build")
    locks = root / "lockfiles"
    if (REPO / "lockfiles").is_dir():
        shutil.copytree(REPO / "lockfiles", locks)
    env = {"HPCENV_HOME": str(root / "home"), "HPCENV_LOCKFILES": str(locks)}
    first = hpcenv("build", "local", "--json", env=env)
    assert first.returncode == 0, first.stderr
    return {"env": env, "root": root, "report": json.loads(first.stdout)}


def test_build_imports_torch_from_the_wheelhouse(built: dict[str, object]) -> None:
    report = built["report"]
    assert isinstance(report, dict)
    venv = Path(report["venv"])
    assert venv.is_symlink()
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch, numpy, ray; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert out.stdout.strip() == "2.13.0+cpu"
    assert report["imports"]["torch"] == "2.13.0+cpu"
    assert set(report["imports"]["imports"]) == {"torch", "numpy", "ray"}  # torch checked too
    assert report["installed"]["torch"] == "2.13.0+cpu"
    assert report["torch"]["from"].startswith("/")  # the wheelhouse file, not the index
    assert "--find-links" in report["sources"]
    assert not any("download.pytorch.org" in s for s in report["sources"])
    assert [s["step"] for s in report["steps"]][-7:] == [
        "venv",
        "sync",
        "flash-attn",
        "fixes",
        "protect",
        "verify",
        "probe",
    ]
    assert "repaired" not in report  # every file matched its RECORD hash
    assert report["flash_attn"]["action"] == "skip" and report["flash_attn"]["reason"]
    assert report["fixes"] == []  # the plan lists no fix for a CPU node
    assert Path(report["report_path"]).is_file()
    log = Path(report["log"]).read_text()
    assert "uv" in log and "pip sync" in log


def test_lockfile_pins_the_cpu_variant_with_a_header(built: dict[str, object]) -> None:
    report = built["report"]
    assert isinstance(report, dict)
    lock = Path(report["lock"]["path"])
    text = lock.read_text()
    assert text.startswith("# hpcenv-lock")
    assert "\ntorch==2.13.0+cpu \\\n    --hash=sha256:" in text
    assert "# plan-digest: " in text and "# command: uv pip compile" in text


def test_second_build_is_a_noop(built: dict[str, object]) -> None:
    env = built["env"]
    assert isinstance(env, dict)
    report = built["report"]
    assert isinstance(report, dict)
    again = hpcenv("build", "local", "--json", env=env)
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["noop"] is True
    assert data["target"] == report["build_dir"]
    assert "steps" not in data  # nothing ran


def test_no_leftover_dirs_after_success(built: dict[str, object]) -> None:
    root = built["root"]
    assert isinstance(root, Path)
    venvs = sorted(p.name for p in (root / "home" / "venvs").iterdir())
    builds = [n for n in venvs if n.startswith("local-")]
    assert len(builds) == 1, venvs
    assert not [n for n in venvs if ".tmp-" in n]
