"""Read members of a remote wheel (a zip) through HTTP range requests, without downloading it.

A zip's central directory sits at its end, so ``zipfile`` needs only a seekable file:
:class:`RangeFile` is one over HTTP, fetching the byte ranges ``zipfile`` asks for.
Sequential reads (streaming a 350 MB ``libtorch_cuda.so`` member) grow the request size
up to :data:`MAX_WINDOW`, so a member costs a few dozen requests, not thousands; a read
elsewhere asks for :data:`MIN_WINDOW`, and the zip's tail, read first, is kept (never asked
for again).

A server that ignores ``Range`` (answers 200 with the whole file) raises
:class:`NoRanges`; :func:`open_wheel` then downloads the file once into a temporary file
(checking its sha256 when one is known) and reads that, and says so in ``Wheel.ranged``.

Every request goes through one connection per host and thread (:func:`_open`,
``http.client`` kept alive; a connection the server closed is opened again once), not a
new TCP and TLS handshake per range. A wheel's METADATA is read from the index's PEP 658
file (``<wheel URL>.metadata``, PEP 714) where the index serves it
(:func:`fetch_metadata`), one small request instead of the zip's tail and a member.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import re
import shutil
import tempfile
import threading
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from hpcenv.utils.errors import BadInput

#: the zip's end read first (its central directory, where a small wheel's fits whole)
TAIL = 256 * 1024
#: a read elsewhere (a member's local header and data: a METADATA of a few KB) fetches this
MIN_WINDOW = 64 * 1024
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


class HTTPStatus(BadInput):
    """An HTTP error answer (4xx, 5xx), one line naming the URL."""

    def __init__(self, url: str, status: int, reason: str) -> None:
        super().__init__(f"{_where(url)}: HTTP {status} {reason}")
        self.status = status


@dataclass
class Counts:
    """What this thread's requests cost: requests, connections opened, body bytes read."""

    requests: int = 0
    connections: int = 0
    bytes: int = 0


@dataclass
class _Pool:
    connections: dict[tuple[str, str], http.client.HTTPConnection] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    #: hosts that answered a PEP 658 ``.metadata`` request with "none here": not asked again
    no_metadata: set[str] = field(default_factory=set)


_LOCAL = threading.local()
MAX_REDIRECTS = 5
_STALE = (
    http.client.RemoteDisconnected,
    http.client.CannotSendRequest,
    http.client.ResponseNotReady,
    BrokenPipeError,
    ConnectionResetError,
)


def _pool() -> _Pool:
    pool: _Pool | None = getattr(_LOCAL, "pool", None)
    if pool is None:
        pool = _LOCAL.pool = _Pool()
    return pool


def counts() -> Counts:
    """This thread's request counts so far (``bench/bench_remote_metadata.py`` reads them)."""
    return _pool().counts


def close_connections() -> None:
    """Close this thread's kept connections (the next request opens new ones)."""
    pool = _pool()
    for conn in pool.connections.values():
        conn.close()
    pool.connections.clear()


def _connection(scheme: str, netloc: str, timeout: float) -> http.client.HTTPConnection:
    pool = _pool()
    conn = pool.connections.get((scheme, netloc))
    if conn is None:
        kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = pool.connections[(scheme, netloc)] = kind(netloc, timeout=timeout)
    conn.timeout = timeout
    if conn.sock is not None:
        conn.sock.settimeout(timeout)
    return conn


def _send(
    url: str, headers: dict[str, str], timeout: float
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """One GET on the host's kept connection; a connection the server closed meanwhile is
    opened again, once."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{_where(url)}: not an http(s) URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    pool = _pool()
    for attempt in (0, 1):
        conn = _connection(parts.scheme, netloc, timeout)
        fresh = conn.sock is None
        try:
            conn.request("GET", path, headers={"User-Agent": USER_AGENT, **headers})
            pool.counts.requests += 1
            pool.counts.connections += fresh
            return conn, conn.getresponse()
        except _STALE:
            conn.close()
            if fresh or attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def _open(
    url: str, *, headers: dict[str, str] | None = None, timeout: float = TIMEOUT_S
) -> Iterator[http.client.HTTPResponse]:
    """The answer to a GET of ``url`` (redirects followed), on a kept connection; an error
    answer is :class:`HTTPStatus`, an unreachable host one ``BadInput`` line. A body left
    unread closes the connection (it cannot carry the next request)."""
    target = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            conn, resp = _send(target, dict(headers or {}), timeout)
        except (OSError, http.client.HTTPException) as exc:
            raise BadInput(f"{_where(url)} is unreachable ({exc})") from exc
        location = resp.getheader("Location")
        if resp.status in (301, 302, 303, 307, 308) and location:
            resp.read(MAX_PAGE)
            target = urllib.parse.urljoin(target, location)
            continue
        try:
            if resp.status >= 400:
                raise HTTPStatus(url, resp.status, resp.reason)
            yield resp
        finally:
            if not resp.isclosed():
                conn.close()
        return
    raise BadInput(f"{_where(url)}: more than {MAX_REDIRECTS} redirects")


def _read(resp: http.client.HTTPResponse, limit: int, url: str) -> bytes:
    """Up to ``limit`` bytes of the body; a connection lost meanwhile is one line."""
    try:
        body = resp.read(limit)
    except (OSError, http.client.HTTPException) as exc:
        raise BadInput(f"{_where(url)} is unreachable ({exc})") from exc
    _pool().counts.bytes += len(body)
    return body


def fetch(url: str, *, accept: str | None = None, timeout: float = TIMEOUT_S) -> bytes:
    """The body of ``url`` (one GET); an unreachable URL is one ``BadInput`` line."""
    with _open(url, headers={"Accept": accept} if accept else None, timeout=timeout) as resp:
        body = _read(resp, MAX_PAGE + 1, url)
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
        tail, start, size = self._get(f"bytes=-{TAIL}")
        self.size = size
        self._buf, self._buf_start = tail, start
        # kept for the whole read: zipfile comes back to the end (the directory's last
        # entries, the end record) after reading the part of the directory before it
        self._tail, self._tail_start = tail, start

    def _get(self, spec: str) -> tuple[bytes, int, int]:
        """(body, first byte offset, total size) of one range request."""
        self.requests += 1
        with _open(self.url, headers={"Range": spec}) as resp:
            if resp.status != 206:
                raise NoRanges(f"{_where(self.url)} answered {resp.status} to a range request")
            match = _CONTENT_RANGE.fullmatch((resp.getheader("Content-Range") or "").strip())
            if not match:
                raise NoRanges(f"{_where(self.url)}: no usable Content-Range in a 206 answer")
            first, last, total = (int(g) for g in match.groups())
            if not first <= last < total or last - first >= MAX_WINDOW:
                raise BadInput(
                    f"{_where(self.url)}: a range answer of bytes {first}-{last}/{total} to {spec}"
                )
            body = _read(resp, last - first + 2, self.url)  # one more: a body too long
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
            at_tail = self._pos - self._tail_start
            if 0 <= off < len(self._buf):
                chunk = self._buf[off : off + size]
            elif 0 <= at_tail < len(self._tail):
                chunk = self._tail[at_tail : at_tail + size]
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
        if self._pos < self._tail_start <= end:  # the tail is held: not fetched again
            end = self._tail_start - 1
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
    with _open(url) as resp:
        while chunk := _read(resp, 8 * 1024 * 1024, url):
            digest.update(chunk)
            into.write(chunk)
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


def fetch_metadata(url: str, *, limit: int) -> bytes | None:
    """The METADATA of the wheel at ``url`` from the index's PEP 658 file
    (``<url>.metadata``), or None where the index serves none (404, 403: read the wheel;
    that host is not asked again in this process: one request lost at most)."""
    parts = urllib.parse.urlsplit(url)
    meta = urllib.parse.urlunsplit(parts._replace(path=parts.path + ".metadata", fragment=""))
    if parts.netloc in _pool().no_metadata:
        return None
    try:
        with _open(meta) as resp:
            body = _read(resp, limit + 1, meta)
    except HTTPStatus as exc:
        if exc.status in (403, 404, 410):  # this host serves none: the wheel is read
            _pool().no_metadata.add(parts.netloc)
            return None
        raise
    if len(body) > limit:
        raise BadInput(f"{_where(meta)}: over {limit} bytes; not a METADATA file")
    return body


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
    "Counts",
    "HTTPStatus",
    "NoRanges",
    "RangeFile",
    "Wheel",
    "close_connections",
    "copy_member",
    "counts",
    "fetch",
    "fetch_metadata",
    "open_wheel",
    "parse_json",
    "read_member",
    "sha256_of",
]
