"""The knowledge TOML files' data, parsed once per change of the files, not once per run.

Parsing the six files (~215 KB) with ``tomllib`` costs ~40 ms, more than a plan's
decisions. So their parsed data (plain dicts, lists, strings, numbers: nothing that runs
code when read) is kept as one ``marshal`` file in the user cache
(``paths.user_cache_dir()/knowledge/<key>.marshal``), keyed by the sha256 of every
file's name and bytes (and the marshal format and Python it was written by). Reading it
back takes ~1 ms; a changed file is a new key, and the data is parsed and cached again.

The cache is data hpcenv acts on, so it is trusted only when nobody else could have
written it: the file and its directory must be owned by you and writable by nobody else
(whatever the umask: the file is written 0644). Otherwise, or when it is unreadable,
stale or not the expected shape, the TOML files are parsed in memory (and the cache
written again where its directory is yours); the results are the same either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import sys
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: Bumped when what is stored changes shape (the key changes with it).
FORMAT = 1

Tables = dict[str, dict[str, Any]]


def sources(directory: Path = HERE) -> dict[str, bytes]:
    """Every ``*.toml`` file of the knowledge directory, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.toml")) if p.is_file()}


def key(files: dict[str, bytes]) -> str:
    """The sha256 of the files (names and bytes), the format and the writer's Python."""
    digest = hashlib.sha256(f"{FORMAT} {marshal.version} {sys.version_info[:2]}\0".encode())
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def parse(files: dict[str, bytes]) -> Tables:
    """The files parsed by ``tomllib`` (what the cache holds)."""
    if sys.version_info >= (3, 11):  # imported here: a cached run parses no TOML
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    return {name: tomllib.loads(data.decode("utf-8")) for name, data in files.items()}


def cache_file(digest: str, base: Path | None = None) -> Path:
    from hpcenv.utils import paths

    return (base or paths.user_cache_dir()) / "knowledge" / f"{digest[:32]}.marshal"


def trusted(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def load_cached(path: Path, digest: str) -> Tables | None:
    """The cached tables at ``path`` when they are trusted and hold ``digest``, else None."""
    try:
        if not trusted(os.stat(path.parent)):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not (stat.S_ISREG(st.st_mode) and trusted(st)):
            return None
        try:
            stored = marshal.loads(fh.read())
        except (EOFError, ValueError, TypeError, OSError):
            return None
    if not (isinstance(stored, dict) and stored.get("key") == digest):
        return None
    data = stored.get("tables")
    if not (isinstance(data, dict) and all(isinstance(v, dict) for v in data.values())):
        return None
    return data


def store(path: Path, digest: str, data: Tables) -> bool:
    """Write the cache (atomically, 0644, never through a symlink); False when it could
    not be written (a read-only or foreign cache directory: the caller goes on uncached)."""
    from hpcenv.utils import fsio
    from hpcenv.utils.errors import HpcenvError

    try:
        blob = marshal.dumps({"key": digest, "tables": data})
        fsio.ensure_dir(path.parent.parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.parent, 0o755)
            os.chmod(path.parent, 0o755)  # not the umask's group write: it would not be trusted
        if not trusted(os.stat(fsio.check_dir(path.parent))):
            return False
        fsio.write_bytes(path, blob, mode=0o644)
    except (HpcenvError, OSError, ValueError):
        return False
    for old in path.parent.glob("*.marshal"):  # earlier data's caches
        if old.name != path.name:
            old.unlink(missing_ok=True)
    return True


def load(directory: Path = HERE, base: Path | None = None) -> Tables:
    """The tables of ``directory``'s TOML files: from the cache when it holds them, else
    parsed (and cached)."""
    from hpcenv.utils.errors import HpcenvError

    files = sources(directory)
    digest = key(files)
    try:
        path: Path | None = cache_file(digest, base)
    except (HpcenvError, RuntimeError):  # an unusable HPCENV_HOME, no home directory
        path = None
    found = load_cached(path, digest) if path else None
    if found is not None:
        return found
    data = parse(files)
    if path:
        store(path, digest, data)
    return data


@cache
def tables() -> Tables:
    """This installation's knowledge tables, read once per process."""
    return load()


def read(name: str) -> dict[str, Any]:
    """One knowledge file's data (``cuda.toml``); KeyError when there is no such file."""
    return tables()[name]


def read_optional(name: str) -> dict[str, Any] | None:
    return tables().get(name)
