"""The one rule for a project's Python (``request.python_for``), for each kind it is
given: a ``--project`` request, a uv project, a hand-written project's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.project import readers
from hpcenv.project import uv_lock as uvlock
from hpcenv.project.request import ProjectRequest, python_for
from hpcenv.utils.errors import BadInput

BY = "profile local"


def test_a_conda_python_is_the_python() -> None:
    files = readers.Request(source="/p/environment.yml", kind="environment.yml", python="3.8")
    chosen = python_for(files, "3.11", BY)
    assert chosen.version == "3.8" and "environment.yml says python=3.8" in chosen.why


def test_the_offered_python_when_admitted_else_the_oldest() -> None:
    files = readers.Request(source="/p/pyproject.toml", kind="pyproject", requires_python=">=3.12")
    assert python_for(files, "3.11", BY).version == "3.12"
    assert python_for(files, "3.13", BY).version == "3.13"


def test_a_lock_python_version_file_wins(tmp_path: Path) -> None:
    project = uvlock.Project(directory=tmp_path, requires_python=">=3.10", python_pin="3.11")
    assert python_for(project, "3.12", BY).version == "3.11"
    assert python_for(project, "3.12", BY, requires_python=None).version == "3.11"


def test_forced_python_must_be_admitted(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\nrequires-python = ">=3.11"\n'
    )
    request = ProjectRequest(directory=tmp_path, python="3.12")
    assert python_for(request, "3.10", BY).why == "--python"
    with pytest.raises(BadInput, match=r"--python 3\.9: .*excludes it"):
        python_for(ProjectRequest(directory=tmp_path, python="3.9"), "3.10", BY)
