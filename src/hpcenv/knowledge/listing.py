"""Which torch wheels an index offers: PyPI's JSON API, PEP 691 (JSON) or PEP 503 (HTML).

``pypi_files(base)`` reads ``<base>/pypi/torch/json`` (PyPI's project JSON; its file URLs
come back relative here and are joined with the JSON's URL), falling back to the simple
API ``<base>/simple/torch/``. ``index_files(base)`` reads a PyTorch index or site mirror:
``<base>/torch/`` (every variant on one page, as download.pytorch.org serves it), falling
back to ``<base>/<variant>/torch/`` for the ``variants`` asked about. Only Linux
x86_64/aarch64 wheels of final releases are kept.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from hpcenv.knowledge import remote
from hpcenv.utils.errors import BadInput

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{SIMPLE_JSON}, text/html;q=0.1"
ARCHES = ("x86_64", "aarch64")


@dataclass(frozen=True, kw_only=True)
class WheelFile:
    """One Linux torch wheel an index lists."""

    filename: str
    url: str  # absolute
    sha256: str | None
    version: str  # public version, "2.9.1"
    variant: str | None  # local label ("cu126", "cpu"); None: no label (PyPI's default build)
    arch: str  # "x86_64" | "aarch64"
    python: str  # interpreter tag, "cp311", "cp313t"
    requires_python: str | None = None
    yanked: bool = False
    tags: tuple[str, ...] = ()  # the filename's tags, "cp311-cp311-manylinux_2_28_x86_64"


def wheel_file(
    filename: str,
    url: str,
    *,
    sha256: str | None = None,
    requires_python: str | None = None,
    yanked: bool = False,
) -> WheelFile | None:
    """A ``WheelFile`` for a final-release Linux torch wheel, else None."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    if name != "torch" or version.is_prerelease or version.is_devrelease:
        return None
    tag = sorted(tags, key=str)[0]
    arch = next((a for a in ARCHES if tag.platform.endswith(f"_{a}")), None)
    if arch is None or "linux" not in tag.platform:
        return None
    return WheelFile(
        filename=filename,
        url=url,
        sha256=sha256,
        version=version.public,
        variant=version.local,
        arch=arch,
        python=tag.interpreter,
        requires_python=requires_python,
        yanked=yanked,
        tags=tuple(sorted(str(t) for t in tags)),
    )


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts]) + "/"


# --- parsing ----------------------------------------------------------------------------


def file_entries(url: str, files: object, where: str) -> list[dict[str, Any]]:
    """The file objects of a mirror's listing (``where``: which list), each checked to be
    an object with object digests; BadInput (one line, exit 2) naming the first that is
    not: a mirror's JSON is data, never an AttributeError."""
    if files is None:
        return []
    if not isinstance(files, list):
        raise BadInput(
            f"{url}: {where} is {type(files).__name__}, not a list of file objects; "
            "the mirror does not serve PyPI's JSON: check the URL"
        )
    for i, f in enumerate(files):
        bad = (
            f"is {type(f).__name__}, not a file object"
            if not isinstance(f, dict)
            else next(
                (
                    f"has {key!r} = {type(f[key]).__name__}, not an object"
                    for key in ("digests", "hashes")
                    if f.get(key) is not None and not isinstance(f[key], dict)
                ),
                "",
            )
        )
        if bad:
            raise BadInput(
                f"{url}: {where}[{i}] {bad}; the mirror does not serve PyPI's JSON: check the URL"
            )
    return files


def _from_pypi_json(url: str, data: Any) -> list[WheelFile]:
    out = []
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise BadInput(f"{url}: not PyPI project JSON (no 'releases' object)")
    for version, files in releases.items():
        for f in file_entries(url, files, f"releases[{str(version)[:40]!r}]"):
            w = wheel_file(
                str(f.get("filename", "")),
                urllib.parse.urljoin(url, str(f.get("url", ""))),
                sha256=(f.get("digests") or {}).get("sha256"),
                requires_python=f.get("requires_python"),
                yanked=bool(f.get("yanked")),
            )
            if w:
                out.append(w)
    return out


def _from_simple_json(url: str, data: Any) -> list[WheelFile]:
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise BadInput(f"{url}: not a PEP 691 project page (no 'files' list)")
    out = []
    for f in file_entries(url, files, "files"):
        w = wheel_file(
            str(f.get("filename", "")),
            urllib.parse.urljoin(url, str(f.get("url", ""))),
            sha256=(f.get("hashes") or {}).get("sha256"),
            requires_python=f.get("requires-python"),
            yanked=bool(f.get("yanked")),
        )
        if w:
            out.append(w)
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _from_simple_html(url: str, text: str) -> list[WheelFile]:
    parser = _Links()
    parser.feed(text)
    out = []
    for a in parser.links:
        href = a.get("href") or ""
        target, _, frag = href.partition("#")
        sha = frag.removeprefix("sha256=") if frag.startswith("sha256=") else None
        filename = urllib.parse.unquote(target.rstrip("/").rsplit("/", 1)[-1])
        w = wheel_file(
            filename,
            urllib.parse.urljoin(url, target),
            sha256=sha,
            requires_python=a.get("data-requires-python"),
            yanked="data-yanked" in a,
        )
        if w:
            out.append(w)
    return out


def _parse_simple(url: str, body: bytes) -> list[WheelFile]:
    text = body.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        return _from_simple_json(url, remote.parse_json(url, body))
    return _from_simple_html(url, text)


def simple_page(url: str) -> list[WheelFile]:
    """The torch wheels of one simple-API project page (JSON or HTML, as served)."""
    return _parse_simple(url, remote.fetch(url, accept=ACCEPT))


# --- sources ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Listing:
    """The wheels one source lists, and what was read to list them."""

    files: tuple[WheelFile, ...]
    pages: tuple[str, ...]  # what was read: "URL#sha256=<hex of the bytes read>"


def _read(
    url: str, parse: Callable[[str, bytes], list[WheelFile]], timeout: float = remote.TIMEOUT_S
) -> tuple[list[WheelFile], str]:
    body = remote.fetch(url, accept=ACCEPT, timeout=timeout)
    return parse(url, body), f"{url}#sha256={hashlib.sha256(body).hexdigest()}"


def _parse_pypi(url: str, body: bytes) -> list[WheelFile]:
    return _from_pypi_json(url, remote.parse_json(url, body))


def pypi_files(base: str = "https://pypi.org", *, timeout: float = remote.TIMEOUT_S) -> Listing:
    """torch's wheels on PyPI (or a PyPI stand-in at ``base``)."""
    url = f"{base.rstrip('/')}/pypi/torch/json"
    try:
        files, page = _read(url, _parse_pypi, timeout)
    except BadInput as exc:
        if "HTTP 404" not in str(exc):
            raise
        files, page = _read(_join(base, "simple", "torch"), _parse_simple, timeout)
    return Listing(files=tuple(files), pages=(page,))


def index_files(
    base: str, variants: Iterable[str] = (), *, timeout: float = remote.TIMEOUT_S
) -> Listing:
    """torch's wheels on a PyTorch index or site mirror at ``base``.

    ``<base>/torch/`` first; where that page does not exist, ``<base>/<variant>/torch/``
    for each of ``variants`` (pages that do not exist are skipped). Wheels without a
    local label on a variant page get that variant.
    """
    whole = _join(base, "torch")
    try:
        files, page = _read(whole, _parse_simple, timeout)
        return Listing(files=tuple(files), pages=(page,))
    except BadInput as exc:
        if "HTTP 404" not in str(exc):
            raise
    files = []
    pages = []
    for variant in variants:
        try:
            found, page = _read(_join(base, variant, "torch"), _parse_simple, timeout)
        except BadInput as exc:
            if "HTTP 404" in str(exc):
                continue
            raise
        pages.append(page)
        for w in found:
            files.append(w if w.variant else replace(w, variant=variant))
    if not pages:
        raise BadInput(
            f"{whole} does not exist, nor a <variant>/torch/ page under {base}; "
            "give the base of a PyTorch index (e.g. https://download.pytorch.org/whl)"
        )
    return Listing(files=tuple(files), pages=tuple(pages))


def versions(files: Iterable[WheelFile]) -> list[str]:
    """The distinct release versions among ``files``, ascending."""
    return sorted({f.version for f in files if not f.yanked}, key=Version)


__all__ = ["Listing", "WheelFile", "index_files", "pypi_files", "simple_page", "versions"]
