"""``build --project``: the import check imports the project's own distribution (the one
installed from its directory, found by its PEP 610 ``direct_url.json``), not only the
packages built against torch. A distribution that does not depend on torch, whose module
has another name (``own-dist`` provides ``ownmod``) and does not import, fails the build
with exit 4,
naming the module and the error. The project is this test's own making; the build is real
(uv, the wheelhouse's CPU torch, setuptools from PyPI)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "own-dist"
version = "0.1.0"
dependencies = []

[tool.setuptools]
packages = ["ownmod"]
"""


def test_the_projects_own_module_must_import(tmp_path: Path) -> None:
    require_local_build()
    project = tmp_path / "own"
    (project / "ownmod").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "ownmod" / "__init__.py").write_text(
        "raise ImportError('ownmod needs a file that is not there')\n"
    )
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "."], check=True)
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = hpcenv("build", "local", "--project", str(project), "--json", env=env)
    assert done.returncode == 4, (done.stdout[-2000:], done.stderr[-2000:])
    assert "own-dist: import ownmod: ImportError: ownmod needs a file" in done.stderr
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    assert out.get("exit_code", 4) == 4
