"""Real CUDA artifacts from PyPI for the fatbin tests and benchmarks, downloaded once.

Standard library only at import (the benchmarks import it too; ``python
tests/support/cuda_artifacts.py`` fetches everything ahead of time); ``libtorch_cuda`` reads its
member with hpcenv's own range reader (``hpcenv.knowledge.remote``). Everything lands
under ``$HPCENV_TEST_CACHE`` (default ``~/.cache/hpcenv-tests``), each download checked
against the sha256 PyPI's JSON API lists and guarded by a file lock, so concurrent
sessions share one copy. A failure
(PyPI unreachable) raises ``Unavailable`` with the reason; tests turn it into
``conftest.require(...)``, which skips locally and fails in CI.

What and why (versions that exist on PyPI today, pinned so results are reproducible):

- NVIDIA's tools, as oracles and to compile fixtures: ``nvidia-cuda-cuobjdump``,
  ``nvidia-cuda-nvcc`` with the smallest set that compiles a ``.cu`` into a shared
  library: ``nvidia-cuda-crt`` (crt headers), ``nvidia-cuda-runtime`` (``cuda_runtime.h``,
  ``libcudart_static.a``), ``nvidia-nvvm`` (cicc); all 13.5.37, for this machine's arch.
  The host compiler is the system gcc.
- Real libraries (x86_64 wheels on every host: they are read, never run):
  ``bitsandbytes`` 0.50.2 (CUDA 11.8-13.2 libraries, PTX only in ``__nv_relfatbin``,
  LZ4-compressed entries), ``xformers`` 0.0.28.post3 cp311 (a library on which cuobjdump
  stops with "Invalid ELF"), ``nvidia-curand-cu12`` 10.3.10.19 (sm_101, PTX 12.1),
  ``nvidia-nccl-cu12`` 2.32.3 (``sm_100f`` family cubins, 183 PTX entries).
- For the benchmarks only: ``torch/lib/libtorch_cuda.so`` of torch 2.13.0's PyPI wheel
  (read by HTTP range requests, the rest of the wheel is never downloaded), and a venv
  holding torch 2.13.0 with its CUDA wheels (``uv pip install``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("HPCENV_TEST_CACHE") or Path.home() / ".cache" / "hpcenv-tests")
PYPI = os.environ.get("HPCENV_TEST_PYPI", "https://pypi.org/pypi")
CUDA_VERSION = "13.5.37"
TOOLKIT = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-nvvm")
TORCH_VERSION = "2.13.0"


class Unavailable(Exception):
    """An artifact could not be fetched (the message says why)."""


@dataclass(frozen=True, kw_only=True)
class RealLibrary:
    """A CUDA library inside a PyPI wheel (the wheel's origin is its project/version)."""

    key: str
    project: str
    version: str
    member: str  # path inside the wheel
    tag: str = "x86_64"  # a substring of the wheel's file name that picks it


LIBRARIES = (
    RealLibrary(key="bnb-cuda118", project="bitsandbytes", version="0.50.2",
                member="bitsandbytes/libbitsandbytes_cuda118.so"),
    RealLibrary(key="bnb-cuda128", project="bitsandbytes", version="0.50.2",
                member="bitsandbytes/libbitsandbytes_cuda128.so"),
    RealLibrary(key="bnb-cuda130", project="bitsandbytes", version="0.50.2",
                member="bitsandbytes/libbitsandbytes_cuda130.so"),
    RealLibrary(key="xformers", project="xformers", version="0.0.28.post3",
                member="xformers/_C.so", tag="cp311-cp311-manylinux_2_28_x86_64"),
    RealLibrary(key="curand", project="nvidia-curand-cu12", version="10.3.10.19",
                member="nvidia/curand/lib/libcurand.so.10"),
    RealLibrary(key="nccl", project="nvidia-nccl-cu12", version="2.32.3",
                member="nvidia/nccl/lib/libnccl.so.2"),
)  # fmt: skip
BY_KEY = {lib.key: lib for lib in LIBRARIES}


def host_tag() -> str:
    """The wheel-name fragment of this machine's arch."""
    return {"aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine(), "x86_64")


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    (CACHE / "locks").mkdir(parents=True, exist_ok=True)
    with open(CACHE / "locks" / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.read()  # type: ignore[no-any-return]
    except (urllib.error.URLError, OSError) as exc:
        raise Unavailable(f"cannot fetch {url}: {exc}") from exc


def release_file(project: str, version: str, tag: str) -> tuple[str, str, str]:
    """(url, sha256, filename) of ``project==version``'s wheel whose name contains ``tag``."""
    url = f"{PYPI}/{project}/json"
    data = json.loads(_get(url))
    files = data.get("releases", {}).get(version) or []
    for f in files:
        name = f["filename"]
        if name.endswith(".whl") and tag in name and ("linux" in name or "-none-any" in name):
            return urllib.parse.urljoin(url, f["url"]), f["digests"]["sha256"], name
    raise Unavailable(f"PyPI lists no {tag} wheel of {project} {version}")


def wheel(project: str, version: str, tag: str) -> Path:
    """The wheel file, downloaded once and checked against PyPI's sha256."""
    url, sha, name = release_file(project, version, tag)
    dest = CACHE / "wheels" / name
    with locked(name):
        if dest.exists():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as resp:
                while chunk := resp.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != sha:
                raise Unavailable(f"{name}: sha256 {digest.hexdigest()} != PyPI's {sha}")
            os.replace(tmp, dest)
        except (urllib.error.URLError, OSError) as exc:
            raise Unavailable(f"cannot download {url}: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return dest


def _extract(whl: Path, dest: Path, keep: Callable[[str], bool]) -> None:
    with zipfile.ZipFile(whl) as zf:
        for info in zf.infolist():
            if info.is_dir() or not keep(info.filename):
                continue
            target = dest / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            if (info.external_attr >> 16) & stat.S_IXUSR or "/bin/" in info.filename:
                target.chmod(0o755)


def library(key: str) -> Path:
    """A real CUDA library extracted from its wheel (the wheel is kept: tests read it too)."""
    lib = BY_KEY[key]
    return wheel_member(lib.project, lib.version, lib.member, lib.tag)


def wheel_member(project: str, version: str, member: str, tag: str = "x86_64") -> Path:
    """One file of a PyPI wheel (``project==version``, the wheel named with ``tag``),
    extracted once under ``libs/<project>-<version>/<member>``."""
    whl = wheel(project, version, tag)
    root = CACHE / "libs" / f"{project}-{version}"
    with locked(f"lib-{project}-{version}"):
        if not (root / member).exists():
            _extract(whl, root, lambda n: n == member)
    return root / member


def cuda_toolkit() -> Path:
    """``.../nvidia/cu13``: nvcc, ptxas, cicc, crt and runtime headers, cuobjdump."""
    root = CACHE / f"cuda-{CUDA_VERSION}-{host_tag()}"
    done = root / ".complete"
    with locked(root.name):
        if not done.exists():
            for project in (*TOOLKIT, "nvidia-cuda-cuobjdump"):
                whl = wheel(project, CUDA_VERSION, host_tag())
                _extract(whl, root, lambda n: n.startswith("nvidia/"))
            done.write_text("ok\n")
    return root / "nvidia" / "cu13"


def cuobjdump() -> Path:
    return cuda_toolkit() / "bin" / "cuobjdump"


def nvcc() -> Path:
    return cuda_toolkit() / "bin" / "nvcc"


def libtorch_cuda() -> Path:
    """``torch/lib/libtorch_cuda.so`` of torch 2.13.0's x86_64 cp311 PyPI wheel."""
    dest = CACHE / "libs" / f"torch-{TORCH_VERSION}-x86_64" / "libtorch_cuda.so"
    with locked("libtorch_cuda"):
        if dest.exists():
            return dest
        url, _sha, _name = release_file("torch", TORCH_VERSION, "cp311-cp311-manylinux_2_28_x86_64")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".part")
        from hpcenv.knowledge import remote
        from hpcenv.utils.errors import BadInput  # hpcenv's own range reader (no copy here)

        try:
            with remote.open_wheel(url) as whl, open(tmp, "wb") as out:
                if not remote.copy_member(whl, "torch/lib/libtorch_cuda.so", out):
                    raise Unavailable(f"{url} holds no torch/lib/libtorch_cuda.so")
            os.replace(tmp, dest)  # the member's CRC was checked by zipfile while reading
        except (BadInput, OSError, zipfile.BadZipFile) as exc:
            raise Unavailable(f"cannot read libtorch_cuda.so from {url}: {exc}") from exc
    return dest


def torch_cuda_venv(suffix: str = "") -> Path:
    """A venv with torch 2.13.0 and its CUDA wheels from PyPI (x86_64; for the bench, and
    with a ``suffix`` a copy of its own for tests that add to it: uv hard-links from its
    cache, so a second one costs seconds, not gigabytes)."""
    venv = CACHE / f"venv-torch-{TORCH_VERSION}-cuda{suffix}"
    uv = shutil.which("uv")
    if uv is None:
        raise Unavailable("uv is not on PATH")
    with locked(venv.name):
        if not (venv / ".complete").exists():
            if not (venv / "bin" / "python").exists():
                subprocess.run([uv, "venv", "-q", "--python", "3.11", str(venv)], check=True)
            done = subprocess.run(
                [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                 "--index-url", "https://pypi.org/simple", f"torch=={TORCH_VERSION}"],
                capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode != 0:
                raise Unavailable(f"uv pip install torch=={TORCH_VERSION}: {done.stderr[-400:]}")
            (venv / ".complete").write_text("ok\n")
    return venv


def install_venv(root: Path, wheels: list[Path]) -> Path:
    """A real venv (uv, Python 3.11) at ``root`` with ``wheels`` installed without their
    dependencies, as x86_64 Linux (the cached wheels are x86_64 on every host)."""
    uv = shutil.which("uv")
    if uv is None:
        raise Unavailable("uv is not on PATH")
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(root)], check=True)
    subprocess.run(
        [uv, "pip", "install", "-q", "--no-deps", "--python", str(root / "bin" / "python"),
         "--python-platform", "x86_64-manylinux_2_28", *map(str, wheels)],
        check=True,
    )  # fmt: skip
    return root


def main() -> int:
    """Fetch the test artifacts (``--bench``: also what the benchmarks read)."""
    try:
        print(f"cuobjdump, nvcc: {cuda_toolkit()}")
        for lib in LIBRARIES:
            print(f"{lib.key}: {library(lib.key)}")
        if "--bench" in sys.argv[1:]:
            print(f"libtorch_cuda.so: {libtorch_cuda()}")
            print(f"torch CUDA venv: {torch_cuda_venv()}")
    except Unavailable as exc:
        print(f"cuda_artifacts: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
