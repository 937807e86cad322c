"""``uv export --frozen`` of a project's ``uv.lock``, started before the lock is read.

``hpcenv audit LOCK`` spends most of its time importing what judges a lock (packaging,
the knowledge, the decisions); uv's export of the lock (~25 ms, on a core of its own) can
run beside that. :func:`early` starts it in a thread for the command's target and
selection, before those imports, and :func:`run` (``uv_lock.export``) takes its text, or
runs uv then when none was started for that project and selection. What reaches the
caller is the same either way: the export's text, or the ``CommandFailed`` it raised.

Also uv's selection flags (:class:`Selection`), which the export is keyed by. This module
imports neither ``packaging`` nor the lock reader: it must be cheap to import first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hpcenv.kit import threads
from hpcenv.tools import uv


@dataclass(frozen=True, kw_only=True)
class Selection:
    """uv's selection flags: ``--extra``, ``--all-extras``, ``--group``, ``--no-default-groups``."""

    extras: tuple[str, ...] = ()
    all_extras: bool = False
    groups: tuple[str, ...] = ()
    no_default_groups: bool = False

    def uv_args(self) -> list[str]:
        args: list[str] = []
        for e in self.extras:
            args += ["--extra", e]
        if self.all_extras:
            args.append("--all-extras")
        if self.no_default_groups:
            args.append("--no-default-groups")
        for g in self.groups:
            args += ["--group", g]
        return args


#: ``uv sync`` with no selection flags: the default groups, no extras
DEFAULT_SELECTION = Selection()

_Key = tuple[str, tuple[str, ...]]

#: exports started by :func:`early` and not yet taken, by project directory and flags
_started: dict[_Key, threads.Beside[str]] = {}


def _key(directory: Path, selection: Selection) -> _Key:
    return (str(directory.absolute()), tuple(selection.uv_args()))


def lock_of(target: str | Path) -> Path | None:
    """The ``uv.lock`` that ``uv export`` would read for an audit of ``target`` (the lock
    itself, or a project directory holding one), when its project's ``pyproject.toml``
    is beside it; None otherwise, and for a lock that is a symlink (its containment is
    checked before anything reads it)."""
    p = Path(target)
    lock = p / "uv.lock" if p.is_dir() and not (p / "pyvenv.cfg").exists() else p
    if lock.name != "uv.lock" or lock.is_symlink() or not lock.is_file():
        return None
    pyproject = lock.parent / "pyproject.toml"
    return lock if beside(pyproject) and pyproject.is_file() else None


def beside(path: Path) -> bool:
    """False for a file read with a lock (its ``pyproject.toml``, ``.python-version``) that
    is a symlink leaving the project (``containment``): uv is not run on it early, and
    ``uv_lock`` refuses it, naming it, before hpcenv or uv reads it."""
    if not path.is_symlink():
        return True
    from hpcenv.project import containment

    return containment.inside(path, containment.root_of(path))


@contextlib.contextmanager
def early(target: str | Path, selection: Selection) -> Iterator[None]:
    """Start ``uv export`` for ``target`` (:func:`lock_of`) now, in a thread, for
    :func:`run` to take within the block; an export the block did not take is dropped
    as it ends (its thread ends with uv)."""
    lock = lock_of(target)
    key = None
    if lock is not None:
        directory, args = lock.parent, selection.uv_args()
        key = _key(directory, selection)
        _started[key] = threads.Beside(lambda: uv.project_export(directory, selection=args))
    try:
        yield
    finally:
        if key is not None:
            _started.pop(key, None)


def run(directory: Path, selection: Selection) -> str:
    """The text of ``uv export --frozen`` in ``directory`` with the selection flags:
    the one :func:`early` started, else run now. Raises uv's ``CommandFailed``."""
    pending = _started.pop(_key(directory, selection), None)
    if pending is not None:
        return pending.result()
    return uv.project_export(directory, selection=selection.uv_args())


__all__ = ["DEFAULT_SELECTION", "Selection", "beside", "early", "lock_of", "run"]
