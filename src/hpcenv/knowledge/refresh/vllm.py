"""vLLM's minimum GPU compute capability per release, read from its sdists on PyPI.

vLLM's top-level ``CMakeLists.txt`` sets ``CUDA_SUPPORTED_ARCHS``, since 0.9 in branches
by the CUDA compiler version (``if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL
13.0)`` ... ``elseif(... 12.8)`` ... ``else()``). The wheels on PyPI are built with CUDA
12.8 or newer, so the minimum that matters is the lowest arch of the branches for CUDA >=
12.8 (``min_compute_capability``); a source build with an older CUDA may still reach
lower (``min_older_cuda``). The sdist is streamed (gzip has no index) only until that
member: a few hundred KB of a 30 MB file, cached by the sdist's sha256.

``update_vllm`` writes ``vllm.toml`` (GENERATED; one row per release, source URL#sha256
as PyPI publishes it); ``hpcenv.knowledge.vllm`` reads it.
"""

from __future__ import annotations

import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from hpcenv.knowledge import remote
from hpcenv.knowledge.refresh.toml_out import Written, data_dir, render, write_if_changed
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, HpcenvError

VLLM_FILE = "vllm.toml"
CUDA_FLOOR = "12.8"  # PyPI's vLLM wheels are built with CUDA >= this

_SET = re.compile(r'set\(\s*CUDA_SUPPORTED_ARCHS\s+"([^"]*)"\s*\)')
_IF = re.compile(r"^\s*(if|elseif|else|endif)\s*\(", re.I)
_GE = re.compile(r"VERSION_GREATER_EQUAL\s+([0-9.]+)")


def _cap(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(re.sub(r"\D.*", "", minor) or 0)


def _statements(cmake: str) -> list[str]:
    """CMake lines with multi-line commands joined (parentheses balanced), comments dropped."""
    out: list[str] = []
    pending = ""
    for raw in cmake.splitlines():
        line = raw.split("#", 1)[0] if '"' not in raw else raw
        pending = f"{pending} {line.strip()}" if pending else line.strip()
        if pending.count("(") <= pending.count(")"):
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out


def branches(cmake: str) -> list[tuple[str | None, list[str]]]:
    """(CUDA floor or None, archs) for each ``set(CUDA_SUPPORTED_ARCHS ...)``.

    The floor is the ``VERSION_GREATER_EQUAL`` of the CUDA compiler condition of the
    ``if``/``elseif`` the set sits in (``">=12.8"``); an ``else()`` branch gets
    ``"<"`` + the lowest floor of its siblings; a set outside any condition gets None.
    """
    out: list[tuple[str | None, list[str]]] = []
    floor: str | None = None
    siblings: list[str] = []
    stack: list[tuple[str | None, list[str]]] = []
    for stmt in _statements(cmake):
        m = _IF.match(stmt)
        if m:
            word = m.group(1).lower()
            ge = _GE.search(stmt)
            cond = f">={ge.group(1)}" if ge and "CUDA_COMPILER_VERSION" in stmt.upper() else None
            if word == "if":
                stack.append((floor, siblings))
                siblings = []
                floor = cond
            elif word == "elseif":
                floor = cond
            elif word == "else":
                floor = f"<{min(siblings, key=_cap)}" if siblings else floor
            else:
                floor, siblings = stack.pop() if stack else (None, [])
                continue
            if cond:
                siblings.append(cond[2:])
            continue
        s = _SET.search(stmt)
        if s:
            out.append((floor, [a for a in s.group(1).split(";") if a]))
    return out


def minimums(cmake: str) -> tuple[str, str | None, list[tuple[str | None, list[str]]]] | None:
    """(min for CUDA >= 12.8 builds, min for older CUDA if lower, branches) or None."""
    found = branches(cmake)
    if not found:
        return None
    new = [
        a for fl, a in found if fl is None or (fl[0] == ">" and _cap(fl[2:]) >= _cap(CUDA_FLOOR))
    ]
    old = [a for fl, a in found if fl is not None and a not in new]
    pick = new or old
    low = min((a for archs in pick for a in archs), key=_cap)
    low_old = min((a for archs in old for a in archs), key=_cap) if old else None
    return low, (low_old if low_old and _cap(low_old) < _cap(low) else None), found


def read_sdist_cmake(url: str) -> str | None:
    """The top-level CMakeLists.txt of a remote sdist, streamed until found."""
    req = remote.http_get(url)
    try:
        with (
            urllib.request.urlopen(req, timeout=remote.TIMEOUT_S) as resp,
            tarfile.open(fileobj=resp, mode="r|gz") as tf,
        ):
            for member in tf:
                if member.name.count("/") == 1 and member.name.endswith("/CMakeLists.txt"):
                    f = tf.extractfile(member)
                    return f.read().decode("utf-8", "replace") if f else None
    except (tarfile.TarError, EOFError) as exc:
        raise BadInput(f"{url}: not a readable sdist ({exc})") from exc
    except urllib.error.HTTPError as exc:
        raise BadInput(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise BadInput(f"{url} is unreachable ({getattr(exc, 'reason', exc)})") from exc
    return None


HEADER = """\
vLLM's minimum GPU compute capability per release, from CUDA_SUPPORTED_ARCHS in the
top-level CMakeLists.txt of each sdist on PyPI. `min_compute_capability`: builds with CUDA
>= 12.8 (PyPI's wheels); `min_older_cuda`: a source build with an older CUDA, when lower;
`branches`: the CUDA floor of each set() and its archs.
GENERATED by `hpcenv knowledge update`; do not edit (rerun the command). Read from:
{page}
"""


def update_vllm(
    pypi: str = "https://pypi.org", *, out: Path | None = None, log: Callable[[str], None] = print
) -> Written:
    """Regenerate ``vllm.toml`` from vLLM's sdists on PyPI (or a stand-in at ``pypi``)."""
    url = f"{pypi.rstrip('/')}/pypi/vllm/json"
    data = remote.parse_json(url, remote.fetch(url))
    if not isinstance(data, dict):
        raise BadInput(f"{url}: not PyPI project JSON (no 'releases' object)")
    rows = []
    for version, files in sorted(
        data.get("releases", {}).items(), key=lambda kv: _version(kv[0]) or Version("0")
    ):
        v = _version(version)
        if v is None or v.is_prerelease or v.is_devrelease:
            continue
        sdist = next(
            (f for f in files or () if f.get("packagetype") == "sdist" and not f.get("yanked")),
            None,
        )
        if sdist is None:
            continue
        file_url = urllib.parse.urljoin(url, sdist["url"])
        sha = (sdist.get("digests") or {}).get("sha256")
        log(f"reading vllm {version}: {sdist['filename']}")
        cmake = _cached_cmake(file_url, sha)
        found = minimums(cmake) if cmake else None
        if found is None:
            continue
        low, low_old, branch = found
        rows.append(
            (
                "release",
                {
                    "version": version,
                    "min_compute_capability": low,
                    "min_older_cuda": low_old,
                    "branches": [f"{fl or 'any'}: {';'.join(a)}" for fl, a in branch],
                    "source": f"{file_url}#sha256={sha}" if sha else file_url,
                },
            )
        )
    if not rows:
        raise BadInput(f"{url}: no vLLM sdist with a CUDA_SUPPORTED_ARCHS line")
    path = (out or data_dir()) / VLLM_FILE
    text = render(HEADER.format(page=url), rows)
    return Written(path=path, changed=write_if_changed(path, text), rows=len(rows))


def _cached_cmake(url: str, sha256: str | None) -> str | None:
    """``read_sdist_cmake``, cached by the sdist's sha256 (content-addressed: never stale)."""
    from hpcenv.knowledge.wheels import cache_dir

    if not sha256:
        return read_sdist_cmake(url)
    path = cache_dir().parent / "vllm-cmake" / f"{sha256}.txt"
    try:  # the reading rule: XDG_CACHE_HOME may be shared (fsio.read_yours); else a miss
        cached = fsio.read_yours(path, "cache entry", limit=16 << 20)
        if cached is not None:
            return cached.decode("utf-8")
    except (OSError, HpcenvError, UnicodeDecodeError):
        pass
    text = read_sdist_cmake(url)
    if text is not None:
        fsio.write_bytes(path, text.encode("utf-8"))
    return text


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


__all__ = ["branches", "minimums", "update_vllm"]
