"""Helpers for the build, lock and swap tests (imported by those test modules).

- ``local_torch_wheel()``: the CPU torch wheel in a wheelhouse (/opt/wheels or
  $PIP_FIND_LINKS), which the real ``local`` build installs.
- ``make_wheel()``: writes a small but real wheel (zip with METADATA, WHEEL, RECORD).
- fixture ``index`` (object ``index_fixture``): the stand-in index below, once per test
  module that imports ``index_fixture``; the server is stopped when the module is done.
- ``StandInIndex``: a PEP 503 index on 127.0.0.1 serving stand-in wheels. It stands
  in for download.pytorch.org (``/cu126/``, ``/cu130/`` variant indexes with
  ``torch-2.9.1+cu126`` / ``+cu130`` and their CUDA runtime dependencies
  ``nvidia-cuda-runtime-cu12==12.6.77`` / ``nvidia-cuda-runtime-cu13==13.0.96``) and
  for PyPI (``/simple/``: an unlabelled ``torch-2.9.1`` that, like PyPI's aarch64
  torch >= 2.11, is a CUDA 13 build, and a ``torchext`` package built against torch,
  standing in for vLLM / flash-attn). That index is unreachable from here, and real
  torch CUDA wheels are gigabytes; these wheels exercise exactly the resolver and
  installer paths (labels, hashes, dependency edges, markers) at a few KB.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import socket
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from hpcenv.models.plan import FlashAttnChoice, Plan, TorchChoice
from hpcenv.tools import uv
from support import PYPI_AS_OF, REPO, require

WHEELHOUSE = Path("/opt/wheels")


def local_torch_wheel() -> Path | None:
    dirs = [WHEELHOUSE, *(Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split())]
    for d in dirs:
        if d.is_dir():
            for wheel in sorted(d.glob("torch-*+cpu-cp311-*x86_64.whl")):
                return wheel
    return None


def require_uv() -> None:
    require("uv", uv.available(), "uv is not on PATH (pip install uv)")


def require_pypi() -> None:
    """uv, and PyPI reachable (the tests that resolve real projects' files against it), as
    of ``PYPI_AS_OF``: the test must be marked ``pypi``."""
    if os.environ.get("UV_EXCLUDE_NEWER") != PYPI_AS_OF:
        raise AssertionError(
            "a test resolving against PyPI must be marked pytest.mark.pypi (PyPI as of "
            f"{PYPI_AS_OF}, not as of today)"
        )
    require_uv()
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            pass
    except OSError:
        require("pypi", False, "pypi.org:443 unreachable")


def require_local_build() -> Path:
    require_uv()
    wheel = local_torch_wheel()
    require(
        "torch-wheel",
        wheel is not None,
        "no torch-*+cpu-cp311 x86_64 wheel in /opt/wheels or $PIP_FIND_LINKS",
    )
    assert wheel is not None
    return wheel


def hpcenv(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 900, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (``python -m hpcenv``) as a user would (``env`` added to ours)."""
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", *args],
        env={**os.environ, **(env or {})},
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stand_in_plan(index_url: str, *, backend: str = "cu126", **over: object) -> Plan:
    """A plan as the resolver makes it for a cu126 node, pointing at the stand-in index."""
    fields: dict[str, object] = {
        "profile": "standin",
        "arch": "x86_64",
        "python": "3.11",
        "torch": TorchChoice(
            version="2.9.1",
            backend=backend,
            index_url=f"{index_url}/{backend}",
            index_base=index_url,
        ),
        "packages": (),
        "flash_attn": FlashAttnChoice(action="skip", reason="stand-in plan: no GPU"),
        "fixes": (),
    }
    fields.update(over)
    return Plan(**fields)  # type: ignore[arg-type]


# --- wheels -----------------------------------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    out_dir: Path,
    name: str,
    version: str,
    *,
    requires: Iterable[str] = (),
    files: Mapping[str, str | bytes] | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """Write ``name-version-tag.whl`` with ``files`` (default: a package printing its version;
    ``bytes`` contents are written as they are, e.g. ELF shared objects)."""
    dist = name.replace("-", "_")
    files = dict(files or {f"{dist}/__init__.py": f'__version__ = "{version}"\n'})
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    files[f"{info}/METADATA"] = "\n".join(meta) + "\n"
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: hpcenv-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    )
    files[f"{info}/top_level.txt"] = dist + "\n"
    data = {p: c.encode() if isinstance(c, str) else c for p, c in files.items()}
    record = [f"{p},{_record_hash(c)},{len(c)}" for p, c in data.items()]
    record.append(f"{info}/RECORD,,")
    data[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, c in data.items():
            zf.writestr(p, c)
    return path


# --- the index --------------------------------------------------------------------------


class StandInIndex:
    """A PEP 503 index on 127.0.0.1 in a thread of the test process; ``stop()`` ends it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = root / "files"
        self.pages: dict[str, dict[str, list[Path]]] = {}
        handler = partial(_QuietHandler, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.requested: list[str] = []  # every path asked for, in order
        self.server.requested = self.requested  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, index: str, wheel: Path) -> None:
        """Publish ``wheel`` (already in ``files/``) on sub-index ``index``."""
        project = canonicalize_name(wheel.name.split("-")[0])
        self.pages.setdefault(index, {}).setdefault(project, []).append(wheel)

    def write(self) -> None:
        for index, projects in self.pages.items():
            links = []
            for project, wheels in projects.items():
                d = self.root / index / project
                d.mkdir(parents=True, exist_ok=True)
                anchors = "".join(
                    f'<a href="../../files/{html.escape(w.name)}#sha256='
                    f'{hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a>\n'
                    for w in wheels
                )
                (d / "index.html").write_text(
                    f"<!DOCTYPE html><html><body>\n{anchors}</body></html>"
                )
                links.append(f'<a href="{project}/">{project}</a>\n')
            (self.root / index / "index.html").write_text("<html><body>" + "".join(links))

    def start(self) -> StandInIndex:
        self.write()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        self.server.requested.append(self.path)  # type: ignore[attr-defined]


CU12_RUNTIME = ("nvidia-cuda-runtime-cu12", "12.6.77")
CU13_RUNTIME = ("nvidia-cuda-runtime-cu13", "13.0.96")


def build_stand_in_index(root: Path) -> StandInIndex:
    """The stand-in PyTorch variant indexes and PyPI (see the module docstring)."""
    idx = StandInIndex(root)
    files = idx.files
    for arch in ("x86_64", "aarch64"):
        tag = f"cp311-cp311-manylinux_2_28_{arch}"
        triton = 'standin-triton==3.5.1; platform_machine == "x86_64"'
        idx.add(
            "cu126",
            make_wheel(
                files,
                "torch",
                "2.9.1+cu126",
                tag=tag,
                requires=[f"{CU12_RUNTIME[0]}=={CU12_RUNTIME[1]}", triton],
            ),
        )
        idx.add(
            "cu130",
            make_wheel(
                files,
                "torch",
                "2.9.1+cu130",
                tag=tag,
                requires=[f"{CU13_RUNTIME[0]}=={CU13_RUNTIME[1]}", triton],
            ),
        )
        # PyPI's unlabelled torch: a CUDA 13 build (what open-instruct's lock gets on aarch64)
        idx.add(
            "simple",
            make_wheel(
                files,
                "torch",
                "2.9.1",
                tag=tag,
                requires=[f"{CU13_RUNTIME[0]}=={CU13_RUNTIME[1]}", triton],
            ),
        )
    cu12 = make_wheel(files, CU12_RUNTIME[0], CU12_RUNTIME[1])
    cu13 = make_wheel(files, CU13_RUNTIME[0], CU13_RUNTIME[1])
    triton = make_wheel(files, "standin-triton", "3.5.1")
    idx.add("cu126", cu12)
    idx.add("cu126", triton)
    idx.add("cu130", cu13)
    idx.add("cu130", triton)
    for w in (cu12, cu13, triton):
        idx.add("simple", w)
    # built against torch 2.9.1 (stands in for vLLM / flash-attn): imports torch on import
    ext = make_wheel(
        files,
        "torchext",
        "0.1.0",
        requires=["torch==2.9.1"],
        files={"torchext/__init__.py": "import torch\nTORCH = torch.__version__\n"},
    )
    idx.add("simple", ext)
    return idx.start()


@pytest.fixture(scope="module", name="index")
def index_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInIndex]:
    """The stand-in index for one test module (named ``index_fixture`` so that test
    parameters called ``index`` do not shadow the import)."""
    require_uv()
    idx = build_stand_in_index(tmp_path_factory.mktemp("index"))
    try:
        yield idx
    finally:
        idx.stop()
