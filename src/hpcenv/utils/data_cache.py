"""Parsed data kept between runs: plain dicts and lists as ``marshal`` files in this
user's own cache (``paths.per_user_cache_dir()/<kind>/<key>.marshal``, not under
``$HPCENV_HOME``: an entry depends only on the bytes it was parsed from, whose sha256 is
its key, so a new home, or a home the group shares, finds it warm). ``tomllib`` reads ~5 KB
per millisecond; ``marshal`` reads the same data back ~40x faster, and runs no code doing
it (unlike pickle).

What hpcenv acts on must be what it parsed, so a cache file is trusted only when nobody
else could have written it: the file and its directory owned by you and writable by
nobody else, reached through no symlink another user owns (``fsio.private_dir``). The file
is written 0644 and the directories made 0755 whatever the umask (a umask that lets the
group write would otherwise make every entry untrusted). Anything else (another user's
file, group-writable, a symlink, unreadable, another key, not the shape asked for) is a
miss, and so is a cache that cannot be written (a read-only or foreign home, no home at
all): the caller parses again, with the same result.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcenv.utils import modes

#: Bumped when what is stored changes shape (every key changes with it).
FORMAT = 1


def key(parts: Iterable[tuple[str, bytes]]) -> str:
    """The sha256 of named byte strings, the format and the writer's Python and marshal."""
    digest = hashlib.sha256(f"{FORMAT} {marshal.version} {sys.version_info[:2]}\0".encode())
    for name, data in parts:
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def entry(kind: str, digest: str, base: Path | None = None) -> Path | None:
    """Where the entry of ``digest`` lives (under ``base``, else this user's own cache);
    None when there is no usable cache directory (no home directory)."""
    from hpcenv.utils import paths

    try:
        return (base or paths.per_user_cache_dir()) / kind / f"{digest[:32]}.marshal"
    except (RuntimeError, KeyError):
        return None


def trusted(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else (``modes.yours_alone``)."""
    return modes.yours_alone(st)


#: the biggest entry read back (a large project's uv.lock takes a few MB): a bigger file
#: is not one hpcenv wrote, and is a miss without being read
MAX_BYTES = 64 << 20


def read(path: Path | None, digest: str) -> Any:
    """The value stored at ``path`` under ``digest`` when the entry is trusted, else None.
    Its directory is never entered through a symlink (``fsio.private_dir``): one planted
    or swapped in there could lead to a directory of yours that you did not fill."""
    from hpcenv.utils import fsio

    if path is None:
        return None
    directory = fsio.private_dir(path.parent)
    if directory is None:
        return None
    try:
        data = fsio.read_at(directory, path.name, MAX_BYTES)
    finally:
        os.close(directory)
    if data is None:
        return None
    try:
        stored = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(stored, dict) and stored.get("key") == digest):
        return None
    return stored.get("value")


def write(path: Path | None, digest: str, value: Any, *, keep: int) -> bool:
    """Store ``value`` (plain data) at ``path`` atomically, never through a symlink (also
    one swapped in for the directory mid-way: all is done through its descriptor), and
    drop all but the ``keep`` newest entries beside it; False when it was not written (a
    read-only or foreign cache directory: the caller goes on uncached)."""
    from hpcenv.utils import fsio
    from hpcenv.utils.errors import HpcenvError

    if path is None:
        return False
    try:
        blob = marshal.dumps({"key": digest, "value": value})
        _make_dirs(fsio.check_dir(path.parent.parent))
        directory = fsio.private_dir(path.parent, make=True)
        if directory is None:
            return False
        try:
            fsio.write_at(directory, path.name, blob)
            _prune(directory, path.name, keep)
        finally:
            os.close(directory)
    except (HpcenvError, OSError, ValueError):
        return False
    return True


def _make_dirs(directory: Path) -> None:
    """``directory`` and its missing parents made 0755 whatever the umask: a cache of one
    user's, not a container the group adds to (``fsio.ensure_dir``)."""
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent run made it first
            os.mkdir(made, 0o755)
            os.chmod(made, 0o755)


def _prune(directory: int, written: str, keep: int) -> None:
    """All but the ``keep`` newest entries in ``directory`` (a descriptor) removed (never
    ``written``)."""
    entries = []
    with os.scandir(directory) as found:
        for e in found:
            with contextlib.suppress(OSError):
                if e.name.endswith(".marshal") and e.name != written:
                    entries.append((e.stat(follow_symlinks=False).st_mtime, e.name))
    for _, old in sorted(entries, reverse=True)[max(keep - 1, 0) :]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(old, dir_fd=directory)


def load_toml(path: Path, what: str, *, keep: int = 32) -> dict[str, Any]:
    """``fsio.load_toml`` of ``path``, parsed once per content: a file read again (a
    project's pyproject.toml audited per cluster) comes from the cache. A uv.lock is kept
    as what ``uv_lock.read_lock`` took from it (:func:`read`, :func:`write`)."""
    from hpcenv.utils import fsio

    data = fsio.read_bytes(path, what)
    digest = key([("toml", data)])
    where = entry("toml", digest)
    found = read(where, digest)
    if isinstance(found, dict):
        return found
    parsed = fsio.parse_toml(fsio.decode(data, str(path), what), str(path))
    write(where, digest, parsed, keep=keep)
    return parsed
