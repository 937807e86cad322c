"""The GPU code any remote wheel carries, read through HTTP range requests, not installed.

For a package hpcenv has no table for (JAX's CUDA plugin, CuPy, a cuDNN wheel), the wheel
itself says which GPUs it runs on: each shared-library member is streamed (inflated) into a
temporary file and scanned as ``hpcenv archs`` scans a wheel (``kit.fatbin``: SASS and PTX
per compute capability, full or partial by ``kit.coverage``'s rule). A GPU runs the wheel
when every library with GPU code covers it (:func:`missing`): ``jax_cuda13_plugin 0.7.2``'s
libraries carry SASS 7.5 to 12.0 and PTX 12.0 only, so a V100 (7.0) has no kernel image.
Members over :data:`MAX_MEMBER` are left out and named (a 500 MB cuDNN engine library is
not streamed to answer an audit). Results are cached by the wheel's sha256 (content-
addressed, never stale) in this user's cache, ``wheel-code/``.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcenv.kit.coverage import covers
from hpcenv.kit.elf import ElfError
from hpcenv.kit.fatbin import FatbinError, scan
from hpcenv.knowledge import remote
from hpcenv.models import wheel_fit
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput

CACHE_FORMAT = 1
#: PEP 691's JSON project page (PyPI and uv-compatible indexes serve it)
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
#: the largest member streamed (compressed bytes); bigger ones are named as not read
MAX_MEMBER = 256 * 1024 * 1024
_SHARED = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True, kw_only=True)
class Library:
    member: str
    sass: tuple[str, ...]  # full archs only (kit.coverage)
    ptx: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class WheelCode:
    """The GPU code of one wheel's shared libraries (those that carry any)."""

    wheel: str  # its file name
    libraries: tuple[Library, ...] = ()
    skipped: tuple[str, ...] = ()  # members over MAX_MEMBER, not read

    def missing(self, cap: str, *, ptx_jit: bool) -> tuple[Library, ...]:
        """The libraries that have no code a GPU of ``cap`` runs."""
        return tuple(
            lib for lib in self.libraries if covers(cap, lib.sass, lib.ptx, ptx_jit=ptx_jit) is None
        )


def read(url: str, *, sha256: str | None) -> WheelCode:
    """Stream and scan every shared library of the wheel at ``url`` (module docstring)."""
    libraries: list[Library] = []
    skipped: list[str] = []
    name = url.split("?", 1)[0].rsplit("/", 1)[-1]
    with remote.open_wheel(url, sha256=sha256) as wheel, fsio.work_dir("hpcenv-wheel-code-") as tmp:
        for info in wheel.zip.infolist():
            if info.is_dir() or not _SHARED.search(info.filename):
                continue
            if info.compress_size > MAX_MEMBER:
                skipped.append(info.filename)
                continue
            local = Path(tmp) / "member.so"
            with open(local, "wb") as out:
                remote.copy_member(wheel, info.filename, out)
            try:
                code = scan(local)
            except (ElfError, FatbinError) as exc:
                raise BadInput(f"{name}: {info.filename}: {exc}") from exc
            finally:
                local.unlink(missing_ok=True)
            if not code.empty and code.launchable:
                libraries.append(
                    Library(member=info.filename, sass=tuple(code.full_sass),
                            ptx=tuple(code.full_ptx))
                )  # fmt: skip
    return WheelCode(wheel=name, libraries=tuple(libraries), skipped=tuple(skipped))


def release_files(
    name: str, version: str, *, index: str, timeout: float = remote.TIMEOUT_S
) -> dict[str, tuple[str, str | None]]:
    """``{file name: (URL, sha256)}`` of release ``version`` of ``name`` on the index's PEP 691
    project page (wheels and sdists); ``BadInput`` when the index cannot be read."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    from packaging.version import InvalidVersion, Version

    from hpcenv.utils.names import canonicalize_name

    page = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    data = remote.parse_json(page, remote.fetch(page, accept=SIMPLE_JSON, timeout=timeout))
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise BadInput(f"{page}: not a PEP 691 project page (no 'files' list)")
    try:
        wanted = Version(version)
    except InvalidVersion:
        return {}
    out: dict[str, tuple[str, str | None]] = {}
    for f in files:
        filename = str(f.get("filename", "")) if isinstance(f, dict) else ""
        try:
            if filename.endswith(".whl"):
                got = parse_wheel_filename(filename)[:2]
            else:
                got = parse_sdist_filename(filename)
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        if got == (canonicalize_name(name), wanted) and not f.get("yanked"):
            sha = (f.get("hashes") or {}).get("sha256")
            out[filename] = (urllib.parse.urljoin(page, str(f.get("url", ""))), sha)
    return out


def wheel_for(
    name: str,
    version: str,
    *,
    index: str,
    arch: str,
    python: str,
    glibc: str | None,
) -> tuple[str, str | None] | None:
    """(URL, sha256) of the wheel of ``name`` ``version`` that installs on the node, from
    the index's PEP 691 project page, or None (no such wheel: an sdist, another platform)."""
    for filename, found in release_files(name, version, index=index).items():
        if filename.endswith(".whl") and wheel_fit.wheel_fits(
            filename, python=python, arch=arch, glibc=glibc
        ):
            return found
    return None


def cache_dir() -> Path:
    return paths.per_user_cache_dir() / "wheel-code"


def read_cached(url: str, *, sha256: str | None) -> WheelCode:
    """:func:`read`, cached by the wheel's sha256 (not cached without one)."""
    sha256 = remote.sha256_of(sha256 or None, url)
    if not sha256:
        return read(url, sha256=None)
    path = cache_dir() / f"{sha256}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.pop("format", None) == CACHE_FORMAT:
            libs = tuple(
                Library(member=lib["member"], sass=tuple(lib["sass"]), ptx=tuple(lib["ptx"]))
                for lib in data["libraries"]
            )
            return WheelCode(wheel=data["wheel"], libraries=libs, skipped=tuple(data["skipped"]))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    code = read(url, sha256=sha256)
    text = json.dumps({"format": CACHE_FORMAT, **asdict(code)}, sort_keys=True)
    fsio.write_bytes(path, text.encode("utf-8"))
    return code


__all__ = ["Library", "WheelCode", "read", "read_cached", "release_files", "wheel_for"]
