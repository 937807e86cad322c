"""Copy what building a project needs, and nothing else.

A project is built (or its metadata read through its build backend, which writes
``*.egg-info`` beside ``setup.py``) from a copy, so the user's tree stays byte-identical.
The copy holds the files git tracks when the project is a git checkout; otherwise the
tree less ``.git``, tool caches, sockets, FIFOs, devices and files over ``max_bytes``
(checkpoints), each kind of skip said once. Symlinks are copied as links; one leaving the
project (``containment``) is refused naming it: a build would install what it points at.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from hpcenv.project import containment
from hpcenv.tools import command
from hpcenv.utils.errors import BadInput, CommandFailed

#: Never copied: built or created by tools, never sources.
NOT_COPIED = (".git", ".venv", "__pycache__", "*.egg-info", ".hpcenv", "build", "dist", ".*cache")
#: Files at least this large are not copied from a tree git does not track (checkpoints).
MAX_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Copied:
    files: int
    skipped: tuple[str, ...]  # one line per kind of skip


def git_files(src: Path) -> list[str] | None:
    """The files git tracks under ``src`` (relative), or None when it is no git checkout."""
    if not (src / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        out = command.run(["git", "-C", str(src), "ls-files", "-z"], timeout=60).stdout
    except CommandFailed:
        return None
    return [f for f in out.split("\0") if f]


def copy_project(src: Path, dest: Path, *, max_bytes: int = MAX_BYTES) -> Copied:
    """Copy the project at ``src`` to the new directory ``dest`` (see the module docstring)."""
    tracked = git_files(src)
    names = tracked if tracked is not None else list(_walk(src))
    skipped: dict[str, list[str]] = {}
    count = 0
    for rel in names:
        path = src / rel
        try:
            st = path.lstat()
        except OSError:
            continue  # tracked but deleted in the work tree
        kind = _skip_kind(st, tracked is None, max_bytes)
        if kind:
            skipped.setdefault(kind, []).append(rel)
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISLNK(st.st_mode):
            _check_link(path, src, rel)
            os.symlink(os.readlink(path), target)
        else:
            shutil.copy2(path, target)
        count += 1
    lines = tuple(
        f"not copied: {len(rels)} {kind} ({', '.join(rels[:3])}{', ...' if len(rels) > 3 else ''})"
        for kind, rels in skipped.items()
    )
    return Copied(files=count, skipped=lines)


def _check_link(path: Path, src: Path, rel: str) -> None:
    if not containment.inside(path, src):
        raise BadInput(
            f"{containment.shown(src)}: {containment.shown(rel)} is a symlink leaving the "
            "project; a build would install the file it points at: replace the link with the "
            "file, or remove it"
        )


def _skip_kind(st: os.stat_result, untracked_tree: bool, max_bytes: int) -> str | None:
    mode = st.st_mode
    if stat.S_ISSOCK(mode):
        return "sockets"
    if stat.S_ISFIFO(mode):
        return "FIFOs"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "devices"
    if untracked_tree and stat.S_ISREG(mode) and st.st_size >= max_bytes:
        size = f"{max_bytes // 2**20} MiB" if max_bytes >= 2**20 else f"{max_bytes} bytes"
        return f"files of {size} or more"
    return None


def _walk(src: Path) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not _ignored(d)]
        for name in files:
            if not _ignored(name):
                out.append(os.path.relpath(os.path.join(root, name), src))
        for d in dirs:  # symlinked directories are copied as links, not walked
            if os.path.islink(os.path.join(root, d)):
                out.append(os.path.relpath(os.path.join(root, d), src))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return sorted(out)


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in NOT_COPIED)


__all__ = ["MAX_BYTES", "NOT_COPIED", "Copied", "copy_project", "git_files"]
