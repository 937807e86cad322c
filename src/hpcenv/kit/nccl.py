"""NCCL's version, as the library and torch report it, in one spelling: ``2.27.3``; and
which ``libnccl.so.2`` a process really loaded (``/proc/self/maps``) against the one
the profile's ``[job] nccl`` means."""

from __future__ import annotations

import ctypes
import mmap
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcenv.kit.versions import key as versions_key


def decode_version(code: int) -> str:
    """``ncclGetVersion``'s integer: X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def version_text(value: object) -> str:
    """``(2, 27, 3)`` (``torch.cuda.nccl.version()``), ``22703`` (older torch and
    ``ncclGetVersion``) or a string, as ``2.27.3``."""
    if isinstance(value, tuple):
        return ".".join(str(x) for x in value)
    if isinstance(value, int):
        return decode_version(value)
    return str(value)


def torch_nccl_version(torch: Any) -> str | None:
    """The NCCL a torch build carries; None for a CPU build (it has none)."""
    try:
        if not (torch.cuda.is_available() or getattr(torch.version, "cuda", None)):
            return None
        return version_text(torch.cuda.nccl.version())
    except Exception:  # a CPU build without NCCL, or a broken CUDA: unknown
        return None


# --- which libnccl.so.2 a process really loaded, against the one the profile means -----

#: ``[job] nccl`` of a profile (passed to probes in their config).
MODES = ("auto", "venv", "system")
_VERSION_TEXT = re.compile(rb"NCCL version (\d+\.\d+\.\d+)")


def loaded_libraries(maps: str) -> list[str]:
    """The ``libnccl.so*`` files mapped into a process, from its ``/proc/<pid>/maps``
    text, in load order (NCCL's net plugins, ``libnccl-net*.so``, are not NCCL)."""
    out: list[str] = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip().removesuffix(" (deleted)")
        if os.path.basename(path).startswith("libnccl.so") and path not in out:
            out.append(path)
    return out


class _DlInfo(ctypes.Structure):
    _fields_ = (
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    )


def bound_library(consumer: str, symbol: str = "ncclGetVersion") -> str | None:
    """The file a loaded library (``consumer``: torch's ``libtorch_cuda.so``) takes
    ``symbol`` from, as the loader bound it: ``dlsym`` on its handle searches its own
    dependency tree, ``dladdr`` names the file the address lies in. The maps list every
    copy, by address; this is the one in use. None when ``consumer`` is not loaded."""
    try:
        lib = ctypes.CDLL(consumer, mode=os.RTLD_NOLOAD)  # only when already loaded
        address = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p)
    except (OSError, AttributeError):
        return None
    for libdl in (None, "libdl.so.2"):  # glibc >= 2.34 has dladdr in libc itself
        try:
            dladdr = ctypes.CDLL(libdl).dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = (ctypes.c_void_p, ctypes.POINTER(_DlInfo))
        info = _DlInfo()
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    return None


def file_version(path: str) -> str | None:
    """The release a libnccl file carries (its ``NCCL version X.Y.Z`` banner), read from
    the file without loading it (a second NCCL in the process would be a hazard)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            found = _VERSION_TEXT.search(m)
            return found.group(1).decode() if found else None
    except (OSError, ValueError):
        return None


def venv_library(purelib: str) -> str | None:
    """The environment's own NCCL (the nvidia-nccl-cu12/cu13 wheel torch depends on)."""
    path = Path(purelib) / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    return str(path) if path.is_file() else None


def system_library(env: Mapping[str, str]) -> str | None:
    """The first ``libnccl.so.2`` on ``LD_LIBRARY_PATH`` (a site module's NCCL)."""
    for d in env.get("LD_LIBRARY_PATH", "").split(":"):
        path = Path(d) / "libnccl.so.2"
        if d and path.is_file():
            return str(path)
    return None


def preloaded(env: Mapping[str, str]) -> list[str]:
    """``libnccl`` entries of ``LD_PRELOAD`` (they come before anything else)."""
    items = env.get("LD_PRELOAD", "").replace(":", " ").split()
    return [p for p in items if os.path.basename(p).startswith("libnccl")]


@dataclass(frozen=True, kw_only=True)
class LibraryCheck:
    """The verdict on the NCCL a process uses: status name, summary, remedy, details."""

    status: str  # pass | fail | skip
    summary: str
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def _same(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a or "") == os.path.realpath(b or "")


def check_library(
    mode: str,
    *,
    used: str | None,
    loaded: list[str],
    venv_lib: str | None,
    system_lib: str | None,
    preload: list[str],
    versions: Mapping[str, str | None],
) -> LibraryCheck:
    """Whether the ``libnccl.so.2`` torch uses (``used``: ``bound_library``, else the
    only one in ``loaded``, every copy mapped) is the one ``[job] nccl`` means: ``venv``
    the environment's own, ``system`` the first on LD_LIBRARY_PATH, ``auto`` any that is
    not older than the environment's (the one torch was built with). ``versions`` maps
    paths to their releases."""
    fix = (
        "set [job] nccl = 'venv' in the profile and rebuild (hpcenv build): the venv's "
        "NCCL then loads first in its Pythons"
    )
    if used is None and len(loaded) == 1:
        used = loaded[0]
    details: dict[str, Any] = {
        "mode": mode,
        "used": used,
        "loaded": loaded,
        "venv": venv_lib,
        "system": system_lib,
        "ld_preload": preload,
        "versions": dict(versions),
    }

    def name(path: str | None) -> str:
        version = versions.get(path or "")
        return f"{path} (NCCL {version or 'version unknown'})"

    if used is None:
        return LibraryCheck(
            status="skip",
            summary="no libnccl.so.2 in this process after importing torch (NCCL linked in "
            "statically, or not used)"
            if not loaded
            else f"{len(loaded)} libnccl files mapped, and which one torch binds to is unknown",
            remedy="nothing to check here; the nccl probe tests NCCL itself",
            details=details,
        )
    why_preload = f"; LD_PRELOAD puts {', '.join(preload)} first" if preload else ""
    unpreload = (
        "unset LD_PRELOAD (hpcenv's venv mode does the preloading, for this venv only)"
        if preload
        else ""
    )
    meant = {  # mode: (the library it means, whose, when it is missing: why, fix; else fix)
        "venv": (
            venv_lib, "the venv's", "the venv has no nvidia/nccl/lib/libnccl.so.2",
            "install the nvidia-nccl wheel of torch's CUDA in the venv (rebuild)",
            "rebuild the environment (hpcenv build): the venv_nccl fix is missing, or "
            "something loads another libnccl.so.2 first",
        ),
        "system": (
            system_lib, "the system's", "no libnccl.so.2 is on LD_LIBRARY_PATH",
            "load the site's NCCL module ([modules] load)",
            "a torch wheel finds its own NCCL through its RPATH: use [job] nccl = 'venv', "
            "or 'auto'",
        ),
    }  # fmt: skip
    if mode in meant:
        lib, whose, missing, missing_fix, wrong_fix = meant[mode]
        if lib is None:
            return LibraryCheck(
                status="fail",
                summary=f"[job] nccl = '{mode}' but {missing}; torch uses {name(used)}",
                remedy=missing_fix,
                details=details,
            )
        if _same(used, lib):
            return LibraryCheck(
                status="pass",
                summary=f"torch uses {whose} {name(used)}, as [job] nccl = '{mode}' asks",
                details=details,
            )
        return LibraryCheck(
            status="fail",
            summary=f"torch uses {name(used)}, not {whose} {name(lib)} that "
            f"[job] nccl = '{mode}' means{why_preload}",
            remedy=unpreload or wrong_fix,
            details=details,
        )
    have, want = versions.get(used), versions.get(venv_lib or "")
    if have and want and versions_key(have) < versions_key(want):
        return LibraryCheck(
            status="fail",
            summary=f"torch uses {name(used)}, older than the venv's {name(venv_lib)} it was "
            f"built with{why_preload}",
            remedy=unpreload or fix,
            details=details,
        )
    where = "the venv's" if _same(used, venv_lib) else "not the venv's"
    return LibraryCheck(
        status="pass", summary=f"torch uses {name(used)} ({where})", details=details
    )


def import_failure(message: str, maps: str, env: Mapping[str, str], purelib: str) -> str | None:
    """Why importing torch failed, when it is NCCL's doing: torch's CUDA library asks for a
    symbol the libnccl.so.2 loaded first lacks (an older release, put first by
    LD_PRELOAD or by a library that found it on LD_LIBRARY_PATH). None otherwise."""
    if not re.search(r"undefined symbol: nccl", message):
        return None
    own = venv_library(purelib)
    # the maps are in address order: the culprit is the preloaded file, else a foreign one
    foreign = [p for p in loaded_libraries(maps) if not _same(p, own)]
    culprits = preloaded(env) or foreign
    culprit = culprits[0] if culprits else None
    first = f"{culprit} (NCCL {file_version(culprit) or '?'})" if culprit else "another NCCL"
    mine = f"; the venv's is {own} (NCCL {file_version(own) or '?'})" if own else ""
    how = "LD_PRELOAD puts it first" if preloaded(env) else "it was loaded before torch"
    return f"torch needs a newer NCCL than the libnccl.so.2 loaded first, {first}: {how}{mine}"
