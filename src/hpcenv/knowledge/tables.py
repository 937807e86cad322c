"""The knowledge TOML files' data, parsed once per change of the files, not once per run.

Parsing the files (~215 KB) with ``tomllib`` costs ~40 ms, more than a plan's decisions.
So their parsed data is kept as one entry of ``utils/data_cache`` (a ``marshal`` file of
plain data under this user's own cache, ``knowledge/``), keyed by the sha256 of every file's
name and bytes: reading it back takes ~1 ms, and a changed file is a new key, parsed and
cached again. An entry someone else could have written is ignored (``data_cache``), and
the files are then parsed in memory: the tables are the same either way.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

from hpcenv.utils import data_cache

HERE = Path(__file__).parent
#: Entries kept: one per version of the data (two installations of hpcenv side by side
#: must not rewrite each other's on every run).
KEEP = 4

Tables = dict[str, dict[str, Any]]


def sources(directory: Path = HERE) -> dict[str, bytes]:
    """Every ``*.toml`` file of the knowledge directory, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.toml")) if p.is_file()}


def key(files: dict[str, bytes]) -> str:
    return data_cache.key(sorted(files.items()))


def parse(files: dict[str, bytes]) -> Tables:
    """The files parsed by ``tomllib`` (what the cache holds)."""
    if sys.version_info >= (3, 11):  # imported here: a cached run parses no TOML
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    return {name: tomllib.loads(data.decode("utf-8")) for name, data in files.items()}


def _shaped(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


def load(directory: Path = HERE, base: Path | None = None) -> Tables:
    """The tables of ``directory``'s TOML files: from the cache when it holds them, else
    parsed (and cached). ``base``: the cache directory (default the user cache)."""
    files = sources(directory)
    digest = key(files)
    where = data_cache.entry("knowledge", digest, base)
    found = data_cache.read(where, digest)
    if _shaped(found):
        return found  # type: ignore[no-any-return]
    data = parse(files)
    data_cache.write(where, digest, data, keep=KEEP)
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
