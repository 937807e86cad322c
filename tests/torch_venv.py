"""A real venv with the CPU torch wheel (and Ray) for tests that run probes on SLURM.

Built once per session with uv from the local wheelhouse (``/opt/wheels`` or
``$PIP_FIND_LINKS``); uv's cache makes rebuilds take seconds. Import the fixture
(``from torch_venv import torch_venv_fixture``) and ask for ``torch_python``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require

TORCH = "torch==2.13.0+cpu"
RAY = "ray>=2.49"
#: The venv, shared by every module importing the fixture (each gets its own copy of it).
_BUILT: list[Path] = []


def _wheelhouse() -> Path | None:
    for candidate in (os.environ.get("PIP_FIND_LINKS", ""), "/opt/wheels"):
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob("torch-*.whl")):
            return Path(candidate)
    return None


@pytest.fixture(scope="session", name="torch_python")
def torch_venv_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv holding CPU torch, numpy and Ray (built once per session)."""
    if _BUILT:
        return _BUILT[0]
    uv = shutil.which("uv")
    require("uv", uv is not None, "uv not on PATH")
    assert uv is not None
    wheels = _wheelhouse()
    require("torch-wheel", wheels is not None, "no torch wheel in $PIP_FIND_LINKS or /opt/wheels")
    venv = tmp_path_factory.mktemp("torchvenv") / "venv"
    subprocess.run([uv, "venv", "-q", "-p", "3.11", str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            "--find-links",
            str(wheels),
            TORCH,
            "numpy",
            RAY,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    require("torch-wheel", done.returncode == 0, f"uv pip install failed: {done.stderr[-500:]}")
    _BUILT.append(venv / "bin" / "python")
    return _BUILT[0]
