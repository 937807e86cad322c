"""Whether a path is inside the project: the one rule every include, symlink and local path
of a project under audit, plan or build is checked against.

A repo is data: its ``-r``/``-c`` includes, ``-e``/``./pkg`` paths, the requirements file
itself when it is a symlink, and the files its ``setup.py`` reads must stay inside the
project's root (followed through every symlink), or they are refused naming them - before
anything in them is read, so no line of a file outside the project is printed or sent to an
index. A path the user gives on the command line is the user's own choice (its directory is
then the root when no project is around it).
"""

from __future__ import annotations

from pathlib import Path

from hpcenv.utils.errors import BadInput

#: A directory holding one of these is a project's root (a git checkout's first).
_MARKERS = ((".git",), ("pyproject.toml", "setup.py", "setup.cfg"))


def root_of(path: Path) -> Path:
    """The project a file given on the command line belongs to: the nearest directory above
    it (its own, not a symlink's target) holding ``.git``, else a project file, else its own
    directory."""
    start = Path(path).absolute().parent
    for names in _MARKERS:
        for directory in (start, *start.parents):
            if any((directory / name).exists() for name in names):
                return directory
    return start


def inside(path: Path, root: Path) -> bool:
    """True when ``path``, followed through every symlink, stays under ``root``."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):  # a symlink loop: not followed, not inside
        return False


def shown(path: Path | str) -> str:
    """A path as an error line shows it: control characters escaped (one line, always)."""
    text = str(path)
    if text.isprintable():
        return text
    return repr(text)[1:-1]


def require_inside(path: Path, root: Path, what: str, where: str | None = None) -> Path:
    """``path`` when :func:`inside` ``root``; else BadInput naming it (never its content)."""
    if inside(path, root):
        return path
    lead = f"{shown(where)}: " if where else ""
    raise BadInput(
        f"{lead}{what} {shown(path)} leaves the project {shown(root)} (through a symlink or "
        "'..'); hpcenv reads nothing outside the project it audits: copy the file into the "
        "project, or pass it on the command line yourself"
    )


__all__ = ["inside", "require_inside", "root_of", "shown"]
