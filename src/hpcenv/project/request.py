"""A user's project as hpcenv is asked for it: ``--project DIR`` (``ProjectRequest``), its
name and the environment's, the stamp of its dependency files, and its Python.

``python_for`` is the one rule for a project's Python, whichever command asks (``audit``,
``plan``/``lock``/``build --project``) and whatever the project's kind: ``--python X.Y``
(one its ``requires-python`` admits); a uv project's ``.python-version`` (``uv sync``
honours it); a conda file's ``python=``; else the offered Python (the profile's or the
node's) when ``requires-python`` admits it; else the oldest it admits.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpcenv.project import read_once, uv_lock
from hpcenv.project.uv_lock import PythonChoice
from hpcenv.utils.errors import BadInput
from hpcenv.utils.names import canonicalize_name

if TYPE_CHECKING:  # imported where used: an audit of a uv.lock needs neither (start-up)
    from hpcenv.project import readers

PROJECT_FILES = ("pyproject.toml", "uv.lock", ".python-version")
_PY_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True, kw_only=True)
class ProjectRequest:
    """``build --project DIR [--extra/--group/--no-default-groups] [--name NAME]``."""

    directory: Path
    selection: uv_lock.Selection = uv_lock.DEFAULT_SELECTION
    name: str | None = None  # the environment's name; default <profile>-<project>
    with_profile_packages: bool = False  # the profile's [packages] install joins the project
    file: Path | None = None  # the dependency file named by --project FILE (no uv.lock)
    python: str | None = None  # --python X.Y: the project's Python, whatever its files say

    @property
    def locked(self) -> bool:
        """A uv project (``uv.lock``); otherwise hand-written files (``project/handwritten.py``)."""
        return self.file is None and (self.directory / "uv.lock").is_file()


def project_name(directory: Path) -> str:
    try:
        name = uv_lock.read_project(directory).name
    except BadInput:
        name = None
    return name or canonicalize_name(directory.name)


def environment_name(profile: str, request: ProjectRequest) -> str:
    """``venvs/<profile>-<project>`` (or ``--name``): beside the profile's own environment."""
    name = request.name or f"{profile}-{project_name(request.directory)}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or name.endswith(".lock"):
        raise BadInput(f"--name {name!r}: use letters, digits, '.', '_' and '-' (e.g. isambard-rl)")
    return name


def project_digest(request: ProjectRequest) -> str:
    """Hash of the project's dependency files and the selection (part of the build stamp)."""
    h = hashlib.sha256()
    if not request.locked:
        from hpcenv.project import handwritten

        h.update(handwritten.request_of(request.directory, file=request.file).digest().encode())
    for name in PROJECT_FILES:
        path = request.directory / name
        if path.is_file():
            h.update(name.encode() + b"\0" + read_once.content(path, name))
    h.update("\0".join(request.selection.uv_args()).encode())
    h.update(b"\0profile-packages" if request.with_profile_packages else b"")
    return h.hexdigest()[:16]


def python_for(
    source: ProjectRequest | uv_lock.Project | readers.Request,
    offered: str | None,
    offered_by: str,
    *,
    requires_python: str | None = None,
) -> PythonChoice:
    """The one rule for a project's Python (the module docstring): of a ``--project``
    request, of a uv project (``requires_python``: its lock's), or of a hand-written
    project's files. ``offered`` is the profile's or the node's Python, named by
    ``offered_by``."""
    if isinstance(source, ProjectRequest):
        return _of_request(source, offered, offered_by)
    if isinstance(source, uv_lock.Project):
        return _of_lock(source, requires_python, offered, offered_by)
    return _of_files(source, offered, offered_by)


def _of_request(request: ProjectRequest, offered: str | None, offered_by: str) -> PythonChoice:
    """``--project DIR``: ``--python`` when given (it must be one the project's
    ``requires-python`` admits), else the rule of its kind."""
    if not request.locked:
        from hpcenv.project import handwritten

        hand = handwritten.request_of(
            request.directory, request.selection.extras, file=request.file
        )
        if request.python:
            return forced_python(request.python, hand.requires_python, hand.source)
        return _of_files(hand, offered, offered_by)
    project = uv_lock.read_project(request.directory)
    lock = uv_lock.read_lock(lock_path(request.directory))
    if request.python:
        requires = project.requires_python or lock.requires_python
        return forced_python(request.python, requires, str(request.directory))
    return _of_lock(project, lock.requires_python, offered, offered_by)


def forced_python(python: str, requires: str | None, where: str) -> PythonChoice:
    """``--python X.Y`` (any command): it wins over every file's choice, but one the
    project's ``requires-python`` excludes is bad input (exit 2)."""
    if not uv_lock.admits(requires, python):
        raise BadInput(
            f"--python {python}: {where}'s requires-python {requires} excludes it; "
            "give a Python it admits"
        )
    return PythonChoice(version=python, why="--python")


def lock_path(directory: Path) -> Path:
    lock = directory / "uv.lock"
    if not lock.is_file():
        raise BadInput(
            f"{directory}: no uv.lock; run 'uv lock' in the project first "
            "(hpcenv never writes a project's files)"
        )
    return lock


def _of_lock(
    project: uv_lock.Project, requires_python: str | None, offered: str | None, offered_by: str
) -> PythonChoice:
    """A uv project's Python: its ``.python-version`` when it has one (``uv
    sync`` honours it and the lock was resolved for it), else ``offered`` (the node's or
    the profile's Python, named by ``offered_by``) when ``requires-python`` admits it, else
    the oldest version ``requires-python`` admits. A pin outside ``requires-python`` is bad
    input (uv refuses it too)."""
    req = project.requires_python or requires_python
    said = f"requires-python {req}" if req else "no requires-python"
    if project.python_pin:
        where = project.directory / ".python-version"
        return _pinned(project.python_pin, where, req, offered, offered_by, locked=True)
    if offered and uv_lock.admits(req, offered):
        return PythonChoice(
            version=offered,
            why=f"{offered_by} says {offered}, which the project's {said} admits",
        )
    low = uv_lock.lowest_admitted(req)
    if low is None:
        raise BadInput(f"{project.directory}: the project's {said} admits no Python 3.8 to 3.20")
    if offered:
        return PythonChoice(
            version=low,
            why=f"{offered_by} says {offered}, outside the project's {said}: "
            f"using {low}, the oldest it admits",
        )
    return PythonChoice(version=low, why=f"the oldest Python the project's {said} admits")


def _minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])


def _pinned(
    text: str, where: Path, req: str | None, offered: str | None, offered_by: str, *, locked: bool
) -> PythonChoice:
    """The Python a ``.python-version`` pins (uv sync honours it), when ``requires-python``
    admits it; else bad input."""
    said = f"requires-python {req}" if req else "no requires-python"
    m = _PY_VERSION.search(text)
    if not m:
        raise BadInput(f"{where}: {text!r} names no Python version (e.g. 3.12)")
    pin = m.group(1)
    if not uv_lock.admits(req, pin):
        raise BadInput(
            f"{where} pins Python {pin}, which the project's {said} excludes; change one of them"
        )
    if offered and _minor(offered) == _minor(pin):
        return PythonChoice(
            version=offered, why=f"the project pins {pin} (.python-version), as {offered_by}"
        )
    if offered:
        lock = " and the project's lock was resolved for it" if locked else ""
        return PythonChoice(
            version=pin,
            why=f"the project pins {pin} in .python-version; {offered_by} says "
            f"{_minor(offered)}: using {pin} because uv sync honours .python-version{lock}",
        )
    return PythonChoice(version=pin, why=f"the project pins {pin} in .python-version")


def _of_files(request: readers.Request, offered: str | None, offered_by: str) -> PythonChoice:
    """A hand-written project's Python: conda's ``python=X.Y``, else a pyproject's
    ``.python-version`` (uv sync honours it, lock or not), else ``offered`` (the profile's or
    the node's Python, named by ``offered_by``) when ``requires-python`` admits it, else the
    oldest it admits."""
    if request.python:
        return PythonChoice(
            version=request.python, why=f"{Path(request.source).name} says python={request.python}"
        )
    req = request.requires_python
    if request.python_pin:
        where = Path(request.source).parent / ".python-version"
        return _pinned(request.python_pin, where, req, offered, offered_by, locked=False)
    if offered and uv_lock.admits(req, offered):
        said = f"requires-python {req}" if req else "no requires-python"
        return PythonChoice(
            version=offered, why=f"{offered_by} says {offered}, which the project's {said} admits"
        )
    low = uv_lock.lowest_admitted(req)
    if low is None:
        raise BadInput(f"{request.source}: requires-python {req} admits no Python 3.8 to 3.20")
    return PythonChoice(
        version=low, why=f"the oldest Python the project's requires-python {req} admits"
    )


__all__ = [
    "PROJECT_FILES",
    "ProjectRequest",
    "environment_name",
    "forced_python",
    "lock_path",
    "project_digest",
    "project_name",
    "python_for",
]
