"""libfabric's providers for the facts (``fi_info -l``), cached.

``fi_info -l`` is most of what ``hpcenv facts`` costs (~0.3 s: libfabric loads and
initialises every provider), and its answer only changes when what it runs changes.
So it is cached per key: the ``fi_info`` binary and the libfabric library it loads
(paths, sizes, modification times), libfabric's provider plugin directory, and the
``FI_*`` variables and LD_LIBRARY_PATH (which pick providers and libraries). A key
that does not match runs ``fi_info`` again; a failed or timed-out run is not cached.

The cache lives in ``$HPCENV_CACHE``, else ``$HPCENV_HOME/cache``, else the user
cache directory (``$XDG_CACHE_HOME/hpcenv``, ``~/.cache/hpcenv``): ``hpcenv facts``
may run anywhere and must not leave a ``.hpcenv`` in the working directory. Entries
are written by ``fsio`` (temporary file and rename, never through another user's
symlink); when that is refused the facts are read uncached.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcenv.kit.libfabric import FI_INFO_TIMEOUT_S, parse_fi_info_list
from hpcenv.kit.netplugin import SYSTEM_LIB_DIRS
from hpcenv.utils import paths

# The warm path (a cache hit) stats a few files and reads one small JSON file; the ELF
# reader, hpcenv.tools.command and fsio are imported only on a miss: `hpcenv facts` is meant
# to cost what a Python start costs.


def _stat(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), st.st_size, st.st_mtime_ns]


def libfabric_of(fi_info: Path, env: Mapping[str, str]) -> Path | None:
    """The libfabric library ``fi_info`` loads: its DT_NEEDED name looked up on its
    RUNPATH, LD_LIBRARY_PATH and the system library directories, as the loader does."""
    from hpcenv.kit import elf

    try:
        with elf.ElfFile.open(fi_info) as f:
            names = [n for n in f.needed() if n.startswith("libfabric.so")]
            runpath = f.runpath()
    except (OSError, elf.ElfError):
        return None
    if not names:
        return None
    origin = str(fi_info.resolve().parent)
    dirs = [d.replace("$ORIGIN", origin) for d in runpath]
    dirs += [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [*SYSTEM_LIB_DIRS, "/lib64", "/lib"]
    for d in dirs:
        candidate = Path(d) / names[0]
        if candidate.is_file():
            return candidate.resolve()
    return None


def binary_key(fi_info: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """What picks the fi_info binary and the library it loads: the entry's name."""
    return {
        "fi_info": _stat(fi_info.resolve()),
        "env": {k: v for k, v in sorted(env.items()) if k.startswith("FI_")},
        "ld_library_path": env.get("LD_LIBRARY_PATH", ""),
    }


def library_key(lib: Path | None) -> dict[str, Any]:
    """The libfabric library and its provider plugin directory, as they are now."""
    return {
        "libfabric": _stat(lib) if lib is not None else None,
        "provider_dir": _stat(lib.parent / "libfabric") if lib is not None else None,
    }


def cache_key(fi_info: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The whole key: the binary, its FI_* environment, the library it loads."""
    return {**binary_key(fi_info, env), **library_key(libfabric_of(fi_info, env))}


def cache_dir(env: Mapping[str, str]) -> Path:
    return paths.user_cache_dir(env) / "fi_info"


def _read(path: Path, binary: dict[str, Any]) -> tuple[str, ...] | None:
    """The entry's providers when its key still holds: the same binary and environment,
    and the library it recorded unchanged (re-stat, no ELF read)."""
    from hpcenv.utils import fsio
    from hpcenv.utils.errors import HpcenvError

    try:  # a FIFO planted there must not hang the facts: fsio reads regular files only
        data = json.loads(fsio.read_text(path, "fi_info cache entry"))
    except (HpcenvError, ValueError):
        return None
    key = data.get("key") if isinstance(data, dict) else None
    if not isinstance(key, dict) or {k: key.get(k) for k in binary} != binary:
        return None
    recorded = key.get("libfabric")
    lib = Path(recorded[0]) if isinstance(recorded, list) and recorded else None
    if {k: key.get(k) for k in ("libfabric", "provider_dir")} != library_key(lib):
        return None
    found = data.get("providers")
    if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
        return None
    return tuple(found)


def _write(path: Path, key: dict[str, Any], providers: tuple[str, ...]) -> None:
    """Atomically, never through a symlink or another user's link (``fsio``); a cache
    that cannot be written is not an error: the facts are right, just not cached."""
    from hpcenv.utils import fsio
    from hpcenv.utils.errors import HpcenvError

    data = json.dumps({"key": key, "providers": list(providers)}).encode()
    try:
        fsio.write_bytes(path, data)
    except (HpcenvError, OSError):
        return


def providers(
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = FI_INFO_TIMEOUT_S,
    problems: list[str] | None = None,
) -> tuple[str, ...] | None:
    """Providers ``fi_info -l`` lists (cached, see above); None when fi_info is not
    installed, () when it fails; a hung fi_info is noted in ``problems``."""
    env = os.environ if env is None else env
    found = shutil.which("fi_info", path=env.get("PATH"))
    if found is None:
        return None
    fi_info = Path(found)
    binary = binary_key(fi_info, env)
    name = zlib.crc32(json.dumps(binary, sort_keys=True).encode())  # the key is in the file
    entry = cache_dir(env) / f"{name:08x}.json"
    cached = _read(entry, binary)
    if cached is not None:
        return cached
    from hpcenv.tools import command
    from hpcenv.utils.errors import CommandFailed

    key = cache_key(fi_info, env)
    try:
        done = command.run([fi_info, "-l"], env=env, timeout=timeout)
    except CommandFailed as exc:
        if exc.returncode == 124 and problems is not None:
            problems.append(
                f"fi_info -l did not answer within {timeout:g} s and was stopped: it hangs "
                "(a libfabric provider probing stuck hardware); the providers are unknown"
            )
        return ()
    listed = parse_fi_info_list(done.stdout)
    _write(entry, key, listed)
    return listed
