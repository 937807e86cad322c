"""A newcomer's hpcenv works without uv on PATH, and the README says how to run it.

Before: after ``make demo``, ``.venv/bin/hpcenv build local`` said "uv not found" (uv
was in ``.tools/bin``, not on PATH) and the README never said how to get ``hpcenv`` on
PATH. Now uv is a dependency of hpcenv (``uv.uv_argv`` finds the one installed with
it). The test installs hpcenv from this checkout into a fresh venv, as ``uv sync``
would, and builds ``local`` with a PATH that holds no uv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from support.buildkit import require_local_build

pytestmark = pytest.mark.slow


def test_hpcenv_from_a_fresh_venv_builds_without_uv_on_path(tmp_path: Path) -> None:
    require_local_build()
    uv = shutil.which("uv")
    assert uv is not None
    venv = tmp_path / "venv"
    for argv in (
        [uv, "venv", "-q", "--python", sys.executable, str(venv)],
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(REPO)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    shutil.copytree(REPO / "lockfiles", tmp_path / "lockfiles")
    env = {
        **os.environ,
        "PATH": "/usr/bin:/bin",  # no uv, no venv
        "HPCENV_HOME": str(tmp_path / "home"),
        "HPCENV_LOCKFILES": str(tmp_path / "lockfiles"),
    }
    assert not shutil.which("uv", path=env["PATH"])
    done = subprocess.run(
        [str(venv / "bin" / "hpcenv"), "build", "local"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert "uv not found" not in done.stderr and "local: built" in done.stdout


def test_the_readme_says_how_to_run_hpcenv_after_make_demo() -> None:
    readme = (REPO / "README.md").read_text()
    assert "source .venv/bin/activate" in readme and "uv sync" in readme
