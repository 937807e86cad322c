"""The tests' one torch venv builder (tests/support/probe_env.py), run for real with uv: a
failed install leaves no ``.complete`` marker, so the next session installs again.

Ray is swapped for a wheel path that does not exist (an install that fails at once,
as an unreachable PyPI would), then for numpy (installed already: succeeds offline).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support import probe_env, torch_venv


def test_marker_only_after_every_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "venv"
    monkeypatch.setattr(probe_env, "VENV", venv)
    monkeypatch.setattr(probe_env, "_READY", [])
    monkeypatch.setattr(probe_env, "RAY", str(tmp_path / "ray-0-py3-none-any.whl"))
    python = probe_env.build_probe_venv()
    assert python == venv / "bin" / "python" and python.exists()
    assert not (venv / ".complete").exists()  # ray failed: not finished
    assert (venv / ".ray-install.log").read_text()  # what uv said is kept
    assert probe_env.build_probe_venv() == python  # same session: no second attempt
    # next session (fresh memo), the install works now: finished in place
    monkeypatch.setattr(probe_env, "_READY", [])
    monkeypatch.setattr(probe_env, "RAY", "numpy")
    assert next(venv.glob("lib/python3.11/site-packages/torch/__init__.py"))
    created = (venv / "pyvenv.cfg").stat().st_ino
    assert probe_env.build_probe_venv() == python
    assert (venv / ".complete").read_text() == "ok\n"
    assert (venv / "pyvenv.cfg").stat().st_ino == created  # not rebuilt from scratch


def test_wheel_dirs_split_on_whitespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/a/wheels  /b/wheels\n/c")
    assert probe_env.wheel_dirs() == ["/a/wheels", "/b/wheels", "/c", "/opt/wheels"]


def test_torch_venv_fixture_is_the_probe_venv() -> None:
    """One builder: the SLURM tests' fixture builds nothing of its own."""
    assert torch_venv.build_probe_venv is probe_env.build_probe_venv
