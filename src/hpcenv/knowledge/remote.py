"""Read members of a remote wheel (a zip) through HTTP range requests, without downloading it.

A zip's central directory sits at its end, so ``zipfile`` needs only a seekable file:
:class:`RangeFile` is one over HTTP, fetching the byte ranges ``zipfile`` asks for.
Sequential reads (streaming a 350 MB ``libtorch_cuda.so`` member) grow the request size
up to :data:`MAX_WINDOW`, so a member costs a few dozen requests, not thousands.

A server that ignores ``Range`` (answers 200 with the whole file) raises
:class:`NoRanges`; :func:`open_wheel` then downloads the file once into a temporary file
(checking its sha256 when one is known) and reads that, and says so in ``Wheel.ranged``.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from hpcenv.utils.errors import BadInput

MIN_WINDOW = 256 * 1024
MAX_WINDOW = 32 * 1024 * 1024
TIMEOUT_S = 60.0
#: the biggest page :func:`fetch` reads (PyPI's JSON of torch is a few MB)
MAX_PAGE = 64 * 1024 * 1024
USER_AGENT = "hpcenv-knowledge-update"


class NoRanges(Exception):
    """The server answered a range request with the whole file (no range support)."""


def http_get(url: str, *, headers: dict[str, str] | None = None) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})


def _where(url: str) -> str:
    """A URL as said in a message: without credentials or query (may carry tokens)."""
    return re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]


def fetch(url: str, *, accept: str | None = None, timeout: float = TIMEOUT_S) -> bytes:
    """The body of ``url`` (one GET); an unreachable URL is one ``BadInput`` line."""
    req = http_get(url, headers={"Accept": accept} if accept else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body: bytes = resp.read(MAX_PAGE + 1)
    except urllib.error.HTTPError as exc:
        raise BadInput(f"{_where(url)}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BadInput(f"{_where(url)} is unreachable ({reason})") from exc
    if len(body) > MAX_PAGE:
        raise BadInput(f"{_where(url)}: the answer is over {MAX_PAGE >> 20} MiB; not an index page")
    return body


def parse_json(url: str, body: bytes) -> Any:
    """A JSON answer of ``url`` (an index page, PyPI's project JSON), parsed as every JSON
    input is (``fsio.parse_json``: nesting and numbers bounded): a hostile server's
    ``[[[[...`` is one line naming the URL, never a ``RecursionError``."""
    from hpcenv.utils import fsio

    return fsio.parse_json(body.decode("utf-8", "replace"), _where(url))


_SHA256 = re.compile(r"[0-9a-f]{64}")


def sha256_of(digest: str | None, url: str) -> str | None:
    """The index's sha256 of the file at ``url``, checked to be one (64 hex digits) before
    it names a cache file: a hostile or broken index's ``../../x`` would otherwise make
    ``<cache>/../../x.json`` a path outside the cache, read and written. None stays None."""
    if digest is None or _SHA256.fullmatch(digest := digest.lower()):
        return digest
    raise BadInput(f"{_where(url)}: the index's sha256 {digest[:80]!r} is not a sha256")


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.requests = 0
        self.bytes_read = 0
        self._pos = 0
        self._buf = b""
        self._buf_start = 0
        self._window = MIN_WINDOW
        self._last_end = -1
        tail, start, size = self._get(f"bytes=-{MIN_WINDOW}")
        self.size = size
        self._buf, self._buf_start = tail, start

    def _get(self, spec: str) -> tuple[bytes, int, int]:
        """(body, first byte offset, total size) of one range request."""
        req = http_get(self.url, headers={"Range": spec})
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                if resp.status != 206:
                    raise NoRanges(f"{_where(self.url)} answered {resp.status} to a range request")
                match = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
                if not match:
                    raise NoRanges(f"{_where(self.url)}: no usable Content-Range in a 206 answer")
                first, last, total = (int(g) for g in match.groups())
                if not first <= last < total or last - first >= MAX_WINDOW:
                    raise BadInput(
                        f"{_where(self.url)}: a range answer of bytes {first}-{last}/{total} "
                        f"to {spec}"
                    )
                body: bytes = resp.read(last - first + 2)  # one more: a body too long
        except urllib.error.HTTPError as exc:
            raise BadInput(f"{_where(self.url)}: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BadInput(f"{_where(self.url)} is unreachable ({reason})") from exc
        if len(body) != last - first + 1:
            size = f"{len(body)}" if len(body) <= last - first else "more"
            raise BadInput(
                f"{_where(self.url)}: range answer of {size} bytes for bytes {first}-{last}"
            )
        self.bytes_read += len(body)
        return body, first, total

    # -- io.RawIOBase ---------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.size - self._pos
        size = min(size, self.size - self._pos)
        if size <= 0:
            return b""
        out = bytearray()
        while size > 0:
            off = self._pos - self._buf_start
            if 0 <= off < len(self._buf):
                chunk = self._buf[off : off + size]
            else:
                self._fill(size)
                continue
            out += chunk
            self._pos += len(chunk)
            size -= len(chunk)
        return bytes(out)

    def _fill(self, want: int) -> None:
        sequential = self._pos == self._last_end
        self._window = min(self._window * 2, MAX_WINDOW) if sequential else MIN_WINDOW
        end = min(self.size, self._pos + min(max(want, self._window), MAX_WINDOW)) - 1
        body, first, _ = self._get(f"bytes={self._pos}-{end}")
        if not first <= self._pos < first + len(body):  # never asked again and again
            raise BadInput(
                f"{_where(self.url)}: asked for bytes {self._pos}-{end}, got {first}-"
                f"{first + len(body) - 1}"
            )
        self._buf, self._buf_start = body, first
        self._last_end = first + len(body)


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """An open remote wheel: ``zip`` reads members; ``ranged`` says how it was read."""

    url: str
    zip: zipfile.ZipFile
    ranged: bool  # False: the server has no range support, the file was downloaded


def _download(url: str, sha256: str | None, into: IO[bytes]) -> None:
    digest = hashlib.sha256()
    req = http_get(url)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            while chunk := resp.read(8 * 1024 * 1024):
                digest.update(chunk)
                into.write(chunk)
    except urllib.error.HTTPError as exc:
        raise BadInput(f"{_where(url)}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise BadInput(f"{_where(url)} is unreachable ({getattr(exc, 'reason', exc)})") from exc
    if sha256 and digest.hexdigest() != sha256:
        raise BadInput(
            f"{_where(url)}: sha256 {digest.hexdigest()} differs from the index's {sha256}"
        )
    into.flush()


@contextmanager
def open_wheel(url: str, *, sha256: str | None = None) -> Iterator[Wheel]:
    """The remote wheel at ``url`` as a zip, read by ranges (or downloaded, see module doc)."""
    try:
        raw = RangeFile(url)
    except NoRanges:
        with tempfile.TemporaryFile(prefix="hpcenv-wheel-") as tmp:
            _download(url, sha256, tmp)
            tmp.seek(0)
            with _zip(url, tmp) as zf:
                yield Wheel(url=url, zip=zf, ranged=False)
        return
    with io.BufferedReader(raw, buffer_size=64 * 1024) as buffered, _zip(url, buffered) as zf:
        yield Wheel(url=url, zip=zf, ranged=True)


@contextmanager
def _zip(url: str, fileobj: IO[bytes]) -> Iterator[zipfile.ZipFile]:
    try:
        zf = zipfile.ZipFile(fileobj)
    except zipfile.BadZipFile as exc:
        raise BadInput(f"{_where(url)} is not a wheel (zip): {exc}") from exc
    with zf:
        yield zf


def read_member(wheel: Wheel, name: str) -> bytes | None:
    """A small member's bytes (``torch/version.py``), or None when the wheel has none."""
    try:
        return wheel.zip.read(name)
    except KeyError:
        return None


def copy_member(wheel: Wheel, name: str, into: IO[bytes]) -> bool:
    """Stream member ``name`` into ``into`` (inflating as it goes); False when absent."""
    try:
        info = wheel.zip.getinfo(name)
    except KeyError:
        return False
    with wheel.zip.open(info) as src:
        shutil.copyfileobj(src, into, 8 * 1024 * 1024)
    into.flush()
    return True


__all__ = [
    "NoRanges",
    "RangeFile",
    "Wheel",
    "copy_member",
    "fetch",
    "open_wheel",
    "parse_json",
    "read_member",
    "sha256_of",
]
