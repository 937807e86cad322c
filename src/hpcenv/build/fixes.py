"""Install the fixes from ``sitecustomize/`` into a built venv, only those the plan names.

A fix ``<name>`` is ``sitecustomize/<name>.py``. It is copied into the venv's
site-packages as ``hpcenv_fix_<name>.py`` with a one-line ``hpcenv_fix_<name>.pth``
that imports it at interpreter start. A ``.pth`` rather than ``sitecustomize.py``
because a venv can only have one ``sitecustomize`` (a project or the distribution
may ship its own) while ``.pth`` files compose. The fix modules must be cheap at
start-up (they never import torch themselves).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput, BuildFailed


def source(name: str) -> Path:
    path = paths.repo_dir("sitecustomize") / f"{name}.py"
    if not path.is_file():
        raise BadInput(f"fix {name!r}: {path} does not exist (known fixes are in sitecustomize/)")
    return path


def digest(names: Sequence[str]) -> str:
    """Hash of the fixes' sources, part of the build stamp (a changed fix rebuilds)."""
    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode())
        h.update(source(name).read_bytes())
    return h.hexdigest()[:16]


def site_packages(venv: Path) -> Path:
    """The venv's (first) site-packages, where the fixes go; ``BuildFailed`` without one."""
    found = paths.site_packages(venv)
    if not found:
        raise BuildFailed(f"{venv}: no lib/python3*/site-packages (not a venv?)")
    return found[0]


def install(venv: Path, names: Sequence[str]) -> list[str]:
    """Copy each fix into ``venv``; returns the installed module names."""
    site = site_packages(venv)
    installed = []
    for name in names:
        module = f"hpcenv_fix_{name}"
        shutil.copyfile(source(name), site / f"{module}.py")
        fsio.write_bytes(site / f"{module}.pth", f"import {module}\n".encode())
        installed.append(module)
    return installed
