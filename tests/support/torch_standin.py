"""A stand-in for PyPI and for a PyTorch index (download.pytorch.org or a site mirror), on
127.0.0.1, for ``hpcenv knowledge update`` tests.

The real ones are unreachable (download.pytorch.org) or too big to use in a test (a torch
CUDA wheel is ~900 MB). The stand-in wheels are small but real where update looks:

- ``torch/version.py`` as torch writes it (``__version__ = '2.9.1+cu126'``, ``cuda = ...``);
- ``torch/share/cmake/Torch/TorchConfig.cmake`` with the ABI flag (or without, as 2.15);
- ``torch/lib/libtorch_cuda.so``: a real 64-bit ELF whose ``.nv_fatbin`` section holds a
  fatbinary container written byte by byte from the documented layout (hpcenv.kit.fatbin:
  magic ``0xBA55ED50``, version, header size, payload size; entries with kind 1 = PTX or
  2 = ELF, header size, payload size, ``sm`` arch), padded with incompressible bytes so
  that streaming it takes more than one range request.

The server answers ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` with 206 (the part
http.server lacks), or, with ``ranges=False``, ignores Range and sends the whole file, like
a mirror without range support. It serves PyPI's project JSON (``/pypi/torch/json``, file
URLs relative as PyPI's are here), PEP 691 JSON and PEP 503 HTML simple pages
(``/simple/torch/``, ``/whl/torch/``, ``/whl/<variant>/torch/``) and counts requests.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import random
import re
import struct
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2


def fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fatbinary container with one entry per (kind, sm) pair, e.g. (2, 90) = SASS sm_90."""
    body = b""
    for kind, sm in entries:
        payload = (f"// stand-in {'ptx' if kind == KIND_PTX else 'cubin'} sm_{sm}\n".encode()
                   .ljust(64, b"\0"))  # fmt: skip
        header = struct.pack(
            "<HHIQIIHHIIIQQQ",
            kind,  # 0: kind
            0x0101,  # 2: entry format version
            64,  # 4: header size
            len(payload),  # 8: payload size
            0,  # 16: compressed size (0: not compressed)
            0,  # 20
            7 if kind == KIND_PTX else 0,  # 24: code version minor (PTX ISA 8.7)
            8 if kind == KIND_PTX else 0,  # 26: code version major
            sm,  # 28: arch as sm number
            0,  # 32: name offset
            0,  # 36: name length
            0x11,  # 40: flags (64-bit code, plain)
            0,  # 48
            0,  # 56: decompressed size
        )
        body += header + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def elf_with_section(name: str, data: bytes, *, padding: int = 0) -> bytes:
    """A minimal 64-bit little-endian ELF shared object with one PROGBITS section."""
    pad = random.Random(0).randbytes(padding)
    shstrtab = b"\0" + name.encode() + b"\0.shstrtab\0.pad\0"
    off_data = 64
    off_pad = off_data + len(data)
    off_str = off_pad + len(pad)
    off_sh = (off_str + len(shstrtab) + 7) // 8 * 8
    sections = [
        struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        struct.pack("<IIQQQQIIQQ", 1, 1, 2, 0, off_data, len(data), 0, 0, 8, 0),
        struct.pack("<IIQQQQIIQQ", 1 + len(name) + 11, 1, 0, 0, off_pad, len(pad), 0, 0, 1, 0),
        struct.pack("<IIQQQQIIQQ", 1 + len(name) + 1, 3, 0, 0, off_str, len(shstrtab), 0, 0, 1, 0),
    ]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, off_sh, 0, 64, 0, 0, 64, len(sections), 3
    )
    blob = header + data + pad + shstrtab
    blob += b"\0" * (off_sh - len(blob))
    return blob + b"".join(sections)


def torch_wheel(
    folder: Path,
    version: str,
    *,
    python: str = "cp311",
    arch: str = "x86_64",
    label: str | None = None,
    cuda: str | None = None,
    sass: tuple[int, ...] = (),
    ptx: tuple[int, ...] = (),
    abi: int | None = 1,
    padding: int = 3 * 1024 * 1024,
    bundled: bool = False,
) -> Path:
    """A stand-in torch wheel; ``label`` goes into the file name (``+cu126``); ``bundled``
    puts a CUDA runtime inside, as PyTorch's old aarch64 CUDA wheels did."""
    local = f"+{label}" if label else ""
    name = f"torch-{version}{local}-{python}-{python}-manylinux_2_28_{arch}.whl"
    built = f"{version}+{'cpu' if cuda is None else 'cu' + cuda.replace('.', '')}"
    version_py = (
        f"__version__ = '{built}'\n"
        "debug = False\n"
        f"cuda: Optional[str] = {repr(cuda) if cuda else 'None'}\n"
        "git_version = '0000000000000000000000000000000000000000'\n"
    )
    cfg = "# TorchConfig.cmake (stand-in)\n"
    if abi is not None:
        cfg += f'  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={abi}")\n'
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/__init__.py", "")
        zf.writestr("torch/version.py", version_py)
        zf.writestr("torch/share/cmake/Torch/TorchConfig.cmake", cfg)
        if cuda is not None:
            entries = [(KIND_ELF, sm) for sm in sass] + [(KIND_PTX, sm) for sm in ptx]
            elf = elf_with_section(".nv_fatbin", fatbin(entries), padding=padding)
            zf.writestr("torch/lib/libtorch_cuda.so", elf)
        if bundled:  # the old aarch64 CUDA wheels: CUDA runtime inside, no nvidia-* deps
            zf.writestr("torch/lib/libcudart-d0da41ae.so.12", b"\x7fELF")
        zf.writestr(
            f"torch-{version}{local}.dist-info/METADATA",
            f"Name: torch\nVersion: {version}{local}\n",
        )
    return path


@dataclass
class Served:
    """What the server was asked (for assertions)."""

    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)
    clients: list[tuple[str, int]] = field(default_factory=list)  # each request's connection

    def count(self, suffix: str) -> int:
        return sum(1 for p, _ in self.requests if p.endswith(suffix))

    def full_gets(self, suffix: str) -> int:
        return sum(1 for p, r in self.requests if p.endswith(suffix) and r is None)


class StandIn:
    """Serves ``root`` (``files/`` holds the wheels) as PyPI and as a PyTorch index."""

    def __init__(self, root: Path, *, ranges: bool = True) -> None:
        self.root = root
        self.files = root / "files"
        self.files.mkdir(parents=True, exist_ok=True)
        self.ranges = ranges
        self.pypi: list[Path] = []  # wheels PyPI lists
        self.index: dict[str, list[Path]] = {}  # variant -> wheels the index lists
        self.whole_page = True  # serve /whl/torch/ (False: only per-variant pages)
        self.keep_alive = False  # HTTP/1.1, connections kept (True), or HTTP/1.0's one each
        self.metadata = False  # serve each wheel's PEP 658 ``<wheel>.metadata`` file
        self.served = Served()
        self._server: ThreadingHTTPServer | None = None

    # -- contents -----------------------------------------------------------------------

    def add_pypi(self, wheel: Path) -> None:
        self.pypi.append(wheel)

    def add_index(self, variant: str, wheel: Path) -> None:
        self.index.setdefault(variant, []).append(wheel)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @staticmethod
    def sha256(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def _pypi_json(self) -> bytes:
        releases: dict[str, list[dict[str, object]]] = {}
        for w in self.pypi:
            version = w.name.split("-")[1].split("+")[0]
            releases.setdefault(version, []).append(
                {
                    "filename": w.name,
                    "url": f"../../files/{w.name}",  # relative, as PyPI's are here
                    "digests": {"sha256": self.sha256(w)},
                    "requires_python": ">=3.10",
                    "yanked": False,
                }
            )
        return json.dumps({"info": {"name": "torch"}, "releases": releases}).encode()

    def _simple(self, wheels: list[Path], as_json: bool, prefix: str) -> bytes:
        if as_json:
            files = [
                {
                    "filename": w.name,
                    "url": f"{prefix}{w.name}",
                    "hashes": {"sha256": self.sha256(w)},
                }
                for w in wheels
            ]
            return json.dumps(
                {"meta": {"api-version": "1.1"}, "name": "torch", "files": files}
            ).encode()
        links = "".join(
            f'<a href="{html.escape(prefix + w.name)}#sha256={self.sha256(w)}">'
            f"{html.escape(w.name)}</a>\n"
            for w in wheels
        )
        return f"<!DOCTYPE html><html><body>{links}</body></html>".encode()

    def page(self, path: str, accept: str) -> bytes | None:
        as_json = "application/vnd.pypi.simple.v1+json" in accept
        if path == "/pypi/torch/json":
            return self._pypi_json()
        if path == "/simple/torch/":
            return self._simple(self.pypi, as_json, "../../files/")
        if path == "/whl/torch/" and self.whole_page:
            every = [w for ws in self.index.values() for w in ws]
            return self._simple(every, as_json, "../../files/")
        m = re.fullmatch(r"/whl/([a-z0-9]+)/torch/", path)
        if m and m.group(1) in self.index:
            return self._simple(self.index[m.group(1)], as_json, "../../../files/")
        return None

    # -- serving ------------------------------------------------------------------------

    def start(self) -> StandIn:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if outer.keep_alive else "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                rng = self.headers.get("Range")
                outer.served.requests.append((self.path, rng))
                outer.served.clients.append(self.client_address[:2])
                if self.path.endswith(".whl.metadata") and outer.metadata:
                    wheel = outer.files / os.path.basename(self.path).removesuffix(".metadata")
                    with zipfile.ZipFile(wheel) as zf:
                        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
                        self._send(200, zf.read(name), {"Content-Type": "text/plain"})
                    return
                if self.path.startswith("/files/"):
                    path = outer.files / os.path.basename(self.path)
                    if not path.is_file():
                        self.send_error(404)
                        return
                    self._file(path.read_bytes(), rng if outer.ranges else None)
                    return
                body = outer.page(self.path, self.headers.get("Accept", ""))
                if body is None:
                    self.send_error(404)
                    return
                self._send(200, body, {"Content-Type": "text/html"})

            def _file(self, data: bytes, rng: str | None) -> None:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
                if not m or not (m.group(1) or m.group(2)):
                    self._send(200, data, {"Accept-Ranges": "bytes" if outer.ranges else "none"})
                    return
                size = len(data)
                if m.group(1):
                    first = int(m.group(1))
                    last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                else:
                    first, last = max(0, size - int(m.group(2))), size - 1
                if first >= size or first > last:
                    self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                    return
                self._send(
                    206, data[first : last + 1], {"Content-Range": f"bytes {first}-{last}/{size}"}
                )

            def _send(self, code: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
