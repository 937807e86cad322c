"""torchvision and torchaudio paired with each torch release, read from their own wheels.

Each torchvision/torchaudio wheel says which torch it was built for in its
``*.dist-info/METADATA`` (``Requires-Dist: torch (==2.13.0)``). ``update_companions`` reads
that line from one wheel per release (a Linux x86_64 wheel where there is one, the smallest;
the index's PEP 658 ``.metadata`` file where it serves one, else through HTTP range
requests: the zip's central directory and the METADATA member, a few hundred KB), cached
by the wheel's sha256, and writes ``torch_companions.toml``
(GENERATED): one ``[[torch]]`` row per torch release on PyPI from 1.8 with its pair, every
companion release read (``[[read]]``, the requirement as written) and the releases not read
with the reason (``[[left_out]]``: yanked, no wheel).

The pairing rule (``pair``): the newest release that pins exactly that torch
(``torch==2.13.0``); else the newest whose requirement admits it (torchvision 0.29.2's
``torch>=2.14.0`` for torch 2.15.0); else none, with the reason: a torch release that no
companion names has none published (torchaudio stops at 2.11.0, whose METADATA names no
torch), never a neighbour's.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from hpcenv.knowledge import listing, remote
from hpcenv.knowledge.companions import Released
from hpcenv.knowledge.refresh.toml_out import Written, data_dir, render, write_if_changed
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, HpcenvError
from hpcenv.utils.names import canonicalize_name

COMPANIONS_FILE = "torch_companions.toml"
COMPANIONS = ("torchvision", "torchaudio")
OLDEST = "1.8"  # as torch_pypi.toml
CACHE_FORMAT = 1

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True, kw_only=True)
class LeftOut:
    package: str
    version: str
    reason: str


# --- reading one wheel's METADATA -------------------------------------------------------


def torch_requirement(metadata: str) -> str | None:
    """The specifier of the ``Requires-Dist: torch ...`` line of a METADATA text (``==2.13.0``,
    ``>=2.14.0``; ``""`` for a bare ``torch``), None when it names no torch. A requirement
    that applies only to an extra is not torch's pin."""
    headers = HeaderParser().parsestr(metadata, headersonly=True)
    for line in headers.get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        return str(req.specifier)
    return None


#: the biggest METADATA read (torchvision's is ~6 KB; a long description a few hundred KB)
MAX_METADATA = 4 * 1024 * 1024


def read_requires(url: str, *, sha256: str | None) -> str | None:
    """``torch_requirement`` of the remote wheel at ``url``: its METADATA from the index's
    PEP 658 file where it serves one, else read from the wheel by ranges."""
    served = remote.fetch_metadata(url, limit=MAX_METADATA)
    if served is not None:
        return torch_requirement(served.decode("utf-8", "replace"))
    with remote.open_wheel(url, sha256=sha256) as wheel:
        names = [
            n
            for n in wheel.zip.namelist()
            if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            raise BadInput(f"{url}: {len(names)} top-level *.dist-info/METADATA members, not 1")
        info = wheel.zip.getinfo(names[0])
        if info.file_size > MAX_METADATA:
            raise BadInput(f"{url}: {names[0]} is {info.file_size} bytes; not a METADATA file")
        with wheel.zip.open(info) as member:  # at most what it claims, inflated
            text = member.read(MAX_METADATA + 1)[:MAX_METADATA].decode("utf-8", "replace")
    return torch_requirement(text)


def cache_dir() -> Path:
    from hpcenv.knowledge.wheels import cache_dir as wheel_facts

    return wheel_facts().parent / "companion-metadata"


#: The largest cache entry read back (a wheel's Requires-Dist lines).
MAX_CACHED_BYTES = 4 << 20


def read_requires_cached(url: str, *, sha256: str | None) -> str | None:
    """``read_requires``, cached by the wheel's sha256 (content-addressed: never stale)."""
    sha256 = remote.sha256_of(sha256 or None, url)
    if not sha256:
        return read_requires(url, sha256=None)
    path = cache_dir() / f"{sha256}.json"
    try:  # the reading rule: XDG_CACHE_HOME may be shared (fsio.read_yours); else a miss
        data = fsio.load_json_yours(path, "cache entry", limit=MAX_CACHED_BYTES)
        if isinstance(data, dict) and data.get("format") == CACHE_FORMAT:
            found = data.get("requires")
            return found if isinstance(found, str) else None
    except (OSError, HpcenvError):
        pass
    requires = read_requires(url, sha256=sha256)
    text = json.dumps({"format": CACHE_FORMAT, "requires": requires})
    fsio.write_bytes(path, text.encode("utf-8"))
    return requires


# --- which wheel of a release ---------------------------------------------------------------


def _final(version: str) -> Version | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_devrelease else v


def pick_wheel(files: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | str:
    """The wheel of a release to read (a Linux x86_64 one where there is one, the smallest),
    or the reason there is none."""
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel"]
    usable = [f for f in wheels if not f.get("yanked")]
    if not usable:
        if wheels:
            why = next((str(f["yanked_reason"]) for f in wheels if f.get("yanked_reason")), "")
            return "every wheel is yanked on PyPI" + (f" ({why})" if why else "")
        return "no wheel on PyPI"
    linux = [
        f
        for f in usable
        if "linux" in str(f.get("filename")) and "x86_64" in str(f.get("filename"))
    ]
    return min(linux or usable, key=lambda f: (int(f.get("size") or 0), str(f.get("filename"))))


# --- the pairing rule -----------------------------------------------------------------------


def _exact(spec: str, torch: Version) -> bool:
    parts = list(SpecifierSet(spec))
    return len(parts) == 1 and parts[0].operator == "==" and parts[0].contains(torch, True)


def pair(torch: str, reads: Iterable[Released]) -> Released | None:
    """The companion release paired with ``torch`` (see the module docstring), or None."""
    v = Version(torch)
    ordered = sorted(reads, key=lambda r: Version(r.version), reverse=True)
    pinned = [r for r in ordered if r.requires and _exact(r.requires, v)]
    if pinned:
        return pinned[0]
    return next(
        (r for r in ordered if r.requires and SpecifierSet(r.requires).contains(v, True)), None
    )


def none_reason(package: str, torch: str, reads: Sequence[Released]) -> str:
    """Why ``torch`` has no ``package``: said from what was read, never guessed."""
    if not reads:
        return f"no {package} release was read from PyPI"
    newest = max(reads, key=lambda r: Version(r.version))
    said = (
        f"requires torch{newest.requires}"
        if newest.requires
        else "names no torch at all, so hpcenv does not pair it by its version number"
    )
    return (
        f"none published for torch {torch}: no {package} release on PyPI requires it (read "
        f"from each release's METADATA; the newest, {package} {newest.version}, {said})"
    )


def torch_row(torch: str, reads: Mapping[str, Sequence[Released]]) -> dict[str, object]:
    row: dict[str, object] = {"version": torch}
    for package in COMPANIONS:
        found = pair(torch, reads.get(package, ()))
        if found is None:
            row[f"{package}_none"] = none_reason(package, torch, reads.get(package, ()))
            continue
        row[package] = found.version
        row[f"{package}_requires"] = f"torch{found.requires}"
        row[f"{package}_source"] = found.source
    return row


# --- the file -------------------------------------------------------------------------------


HEADER = """\
torchvision and torchaudio paired with each torch release on PyPI ({oldest} on), read from
the companions' own wheels: the `Requires-Dist: torch` line of each release's
*.dist-info/METADATA, read through HTTP range requests from one wheel per release (a Linux
x86_64 wheel where there is one). The pair of a torch release: the newest companion release
that pins exactly it (`torch==X`); else the newest whose requirement admits it
(`torch>=2.14.0`); else none, and `<name>_none` says why (none published is an answer, never
a guess from a version number). `<name>_source`: the wheel read (URL#sha256 as PyPI
publishes it). `[[read]]`: every companion release read, `requires` its torch requirement
as written (absent: its METADATA names no torch). `[[left_out]]`: releases not read, why.
Variants: on PyPI the pair has no local label (torchvision==0.28.0 beside torch==2.13.0);
on a PyTorch index it carries torch's (torchvision==0.21.0+cu124 beside torch==2.6.0+cu124).
GENERATED by `hpcenv knowledge update`; do not edit (rerun the command). Read from:
{pages}
Current to PyPI's uploads up to {newest} (the newest upload among the releases read).
"""


@dataclass(frozen=True, kw_only=True)
class Project:
    """A companion's releases as read: what each requires, what was not read."""

    reads: tuple[Released, ...]
    left_out: tuple[LeftOut, ...]
    newest_upload: str


def _project_json(pypi: str, package: str) -> tuple[str, dict[str, Any]] | None:
    """``<pypi>/pypi/<package>/json``'s releases; None where a mirror lacks the project."""
    url = f"{pypi.rstrip('/')}/pypi/{package}/json"
    try:
        data = remote.parse_json(url, remote.fetch(url))
    except BadInput as exc:
        if "HTTP 404" in str(exc):
            return None
        raise
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise BadInput(f"{url}: not PyPI project JSON (no 'releases' object)")
    return url, releases


def read_project(pypi: str, package: str, *, log: Log = _quiet) -> Project | None:
    """Every final release of ``package`` on PyPI, its wheel's torch requirement read; None
    where ``pypi`` (a mirror) does not have the project."""
    found = _project_json(pypi, package)
    if found is None:
        return None
    url, releases = found
    reads: list[Released] = []
    left: list[LeftOut] = []
    newest = ""
    for version in sorted(releases, key=lambda v: _final(v) or Version("0")):
        if _final(version) is None:
            continue
        chosen = pick_wheel(releases[version] or ())
        if isinstance(chosen, str):
            left.append(LeftOut(package=package, version=version, reason=chosen))
            continue
        file_url = urllib.parse.urljoin(url, str(chosen["url"]))
        sha = (chosen.get("digests") or {}).get("sha256")
        log(f"reading {package} {version}: {chosen['filename']}")
        requires = read_requires_cached(file_url, sha256=sha)
        source = f"{file_url}#sha256={sha}" if sha else file_url
        reads.append(Released(name=package, version=version, requires=requires, source=source))
        newest = max(newest, str(chosen.get("upload_time_iso_8601") or "")[:10])
    return Project(reads=tuple(reads), left_out=tuple(left), newest_upload=newest)


def _torch_releases(pypi: str, oldest: str) -> list[str]:
    floor = Version(oldest)
    found = listing.pypi_files(pypi)
    return [v for v in listing.versions(found.files) if Version(v) >= floor]


def render_file(
    torch: Sequence[str], projects: Mapping[str, Project], *, pages: str, oldest: str = OLDEST
) -> tuple[str, int]:
    """The file's text and its number of ``[[torch]]`` rows."""
    reads = {name: p.reads for name, p in projects.items()}
    rows: list[tuple[str, dict[str, object]]] = [("torch", torch_row(t, reads)) for t in torch]
    count = len(rows)
    for p in projects.values():
        rows += [
            ("read", {"package": r.name, "version": r.version, "requires": r.requires,
                      "source": r.source})
            for r in p.reads
        ]  # fmt: skip
        rows += [
            ("left_out", {"package": o.package, "version": o.version, "reason": o.reason})
            for o in p.left_out
        ]
    newest = max((p.newest_upload for p in projects.values()), default="") or "unknown"
    header = HEADER.format(oldest=oldest, pages=pages, newest=newest)
    return render(header, rows), count


def update_companions(
    pypi: str = "https://pypi.org",
    *,
    out: Path | None = None,
    oldest: str = OLDEST,
    log: Log = _quiet,
) -> Written | None:
    """Regenerate ``torch_companions.toml`` from PyPI (or a stand-in at ``pypi``); None (the
    file left as it is) where ``pypi`` is a mirror that has neither torchvision nor
    torchaudio."""
    torch = _torch_releases(pypi, oldest)
    if not torch:
        raise BadInput(f"{pypi} lists no Linux torch wheel of {oldest} or newer")
    found = {name: read_project(pypi, name, log=log) for name in COMPANIONS}
    if all(p is None for p in found.values()):
        log(f"{pypi} has neither torchvision nor torchaudio: {COMPANIONS_FILE} left as it is")
        return None
    empty = Project(reads=(), left_out=(), newest_upload="")
    projects = {name: p or empty for name, p in found.items()}
    base = pypi.rstrip("/")
    pages = ", ".join(f"{base}/pypi/{name}/json" for name in ("torch", *COMPANIONS))
    text, rows = render_file(torch, projects, pages=pages, oldest=oldest)
    path = (out or data_dir()) / COMPANIONS_FILE
    return Written(path=path, changed=write_if_changed(path, text), rows=rows)


__all__ = ["pair", "torch_requirement", "update_companions"]
