"""Each project file read once per process: what a reader took from a file, kept by the
file's identity (path, inode, size, modification time) for the rest of the command.

``plan``/``lock``/``build --project`` and ``audit`` ask the readers many times (the
directory's precedence, the project's Python, its set, the build's check before the venv);
the file is opened and parsed the first time only (``tests/integration/projects/
test_agreement.py`` counts the opens). A file changed since (another size or time) is read
again. The readers' answers are frozen data, so sharing them is safe.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

from hpcenv.utils import fsio

T = TypeVar("T")

#: At most this many answers are kept (one project's files, with room to spare).
_MAX = 256
_KEPT: dict[tuple[Hashable, ...], object] = {}


def identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, modification time) of ``path``; None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def kept(
    kind: str,
    path: Path,
    args: tuple[Hashable, ...],
    read: Callable[[], T],
    *,
    also: Callable[[T], Iterable[str]] = lambda _: (),
) -> T:
    """``read()``'s answer for ``path`` (and the reader's ``args``), read once per file
    identity; a file that cannot be stat'ed is read each time (the reader says why).
    ``also``: the other files the answer was read from (a requirements file's includes),
    which must be unchanged too for it to be reused."""
    if (ident := identity(path)) is None:
        return read()
    key = (kind, os.path.abspath(path), ident, args)
    if key in _KEPT:
        answer, others = cast(tuple[T, tuple[tuple[str, object], ...]], _KEPT[key])
        if all(identity(Path(f)) == was for f, was in others):
            return answer
    answer = read()
    if len(_KEPT) >= _MAX:
        _KEPT.clear()
    _KEPT[key] = (answer, tuple((f, identity(Path(f))) for f in also(answer)))
    return answer


def content(path: Path, what: str) -> bytes:
    """The bytes of a project file (``fsio.read_bytes``: regular files, no foreign
    symlinks), read once: the readers parse them, ``request.project_digest`` hashes them."""
    return kept("bytes", path, (), lambda: fsio.read_bytes(path, what))


def text(path: Path, what: str) -> str:
    """:func:`content` as UTF-8 text (BadInput naming the file otherwise)."""
    return fsio.decode(content(path, what), str(path), what)


def toml(path: Path, what: str) -> dict[str, Any]:
    """:func:`content` parsed as TOML, once (BadInput naming the file and line)."""
    return kept("toml", path, (), lambda: fsio.parse_toml(text(path, what), str(path)))


__all__ = ["content", "identity", "kept", "text", "toml"]
