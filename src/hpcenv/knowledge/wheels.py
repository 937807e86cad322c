"""What one torch wheel really is, read from the wheel itself through range requests.

- ``torch/version.py``: the build (``__version__ = '2.15.0+cu132'``) and its CUDA
  (``cuda = '13.2'``; ``None`` for a CPU build);
- ``torch/share/cmake/Torch/TorchConfig.cmake``: the C++ ABI (``-D_GLIBCXX_USE_CXX11_ABI=0``
  or ``=1``; releases built only with the new ABI dropped the flag: read as the new ABI);
- ``torch/lib/libtorch_cuda.so``: the GPU code, streamed (inflated) into a temporary file
  and scanned by ``hpcenv.kit.fatbin`` (SASS and PTX per compute capability, with entry
  counts); the member is ~350 MB compressed, a few seconds at PyPI's speed here;
- whether the wheel bundles its CUDA runtime (``libcudart`` inside the wheel: the old
  aarch64 CUDA wheels did, with no ``nvidia-*`` dependencies).

Results are cached by the wheel's sha256 (content-addressed, so a cache entry can never
be stale) under ``$XDG_CACHE_HOME/hpcenv/wheel-facts/``.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcenv.knowledge import remote
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, HpcenvError

VERSION_PY = "torch/version.py"
TORCH_CONFIG = "torch/share/cmake/Torch/TorchConfig.cmake"
LIBTORCH_CUDA = "torch/lib/libtorch_cuda.so"
# 1.13's PyPI wheels (and CUDA 11 index builds of 1.9-1.12) split the library
# (BUILD_SPLIT_CUDA): the kernels are in libtorch_cuda_cu.so, libtorch_cuda.so is a stub
LIBTORCH_CUDA_SPLIT = "torch/lib/libtorch_cuda_cu.so"
CACHE_FORMAT = 1

_VERSION = re.compile(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)
_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", re.M)
_ABI = re.compile(r"-D_GLIBCXX_USE_CXX11_ABI=([01])")
_CUDART = re.compile(r"(^|/)libcudart[-.\w]*\.so")


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What a torch wheel carries (see the module docstring for where each field comes from)."""

    build: str  # "2.15.0+cu132"
    cuda: str | None  # "13.2"; None: CPU build
    cxx11abi: bool | None  # None: no TorchConfig.cmake in the wheel
    bundles_cudart: bool
    sass: tuple[str, ...] = ()  # archs the library was built for (kit.coverage's full rule)
    ptx: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()  # SASS/PTX archs with only a few special kernels
    sass_entries: dict[str, int] = field(default_factory=dict)  # "9.0" -> fatbin entries
    ptx_entries: dict[str, int] = field(default_factory=dict)
    ptx_isa: dict[str, str] = field(default_factory=dict)  # PTX arch -> PTX ISA version
    ranged: bool = True  # False: the server had no range support, the wheel was downloaded

    @property
    def variant(self) -> str:
        return "cpu" if self.cuda is None else "cu" + self.cuda.replace(".", "")


def parse_version_py(text: str, where: str) -> tuple[str, str | None]:
    """(``__version__``, ``cuda``) of a ``torch/version.py``."""
    build = _VERSION.search(text)
    cuda = _CUDA.search(text)
    if not build or not cuda:
        raise BadInput(f"{where}: {VERSION_PY} has no __version__ or cuda line")
    return build.group(1), cuda.group(1)


def parse_abi(text: str | None) -> bool | None:
    if text is None:
        return None
    found = _ABI.search(text)
    return True if found is None else found.group(1) == "1"


def _scan(path: Path) -> dict[str, Any]:
    from hpcenv.kit import fatbin

    try:
        code = fatbin.scan(path)
    except ValueError as exc:  # ElfError, FatbinError: one line naming the file
        raise BadInput(f"{LIBTORCH_CUDA}: {exc}") from exc
    sass, sass_partial = code.split("sass")
    ptx, ptx_partial = code.split("ptx")
    return {
        "sass": tuple(sass),
        "ptx": tuple(ptx),
        "partial": tuple(dict.fromkeys([*sass_partial, *ptx_partial])),
        "sass_entries": dict(code.sass),
        "ptx_entries": dict(code.ptx),
        "ptx_isa": dict(code.ptx_isa),
    }


def read(url: str, *, sha256: str | None, tmpdir: str | None = None) -> WheelFacts:
    """Read a remote torch wheel (see the module docstring)."""
    where = url.split("?", 1)[0]
    with remote.open_wheel(url, sha256=sha256) as wheel:
        raw = remote.read_member(wheel, VERSION_PY)
        if raw is None:
            raise BadInput(f"{where}: no {VERSION_PY} in the wheel; is it a torch wheel?")
        build, cuda = parse_version_py(raw.decode("utf-8", "replace"), where)
        cfg = remote.read_member(wheel, TORCH_CONFIG)
        abi = parse_abi(cfg.decode("utf-8", "replace") if cfg is not None else None)
        bundles = any(_CUDART.search(n) for n in wheel.zip.namelist())
        code: dict[str, Any] = {}
        if cuda is not None:
            with tempfile.NamedTemporaryFile(prefix="hpcenv-libtorch-", dir=tmpdir) as tmp:
                # the split library's kernels when there is one (libtorch_cuda.so is then
                # a small stub), else the one library
                member = (
                    LIBTORCH_CUDA_SPLIT
                    if LIBTORCH_CUDA_SPLIT in wheel.zip.namelist()
                    else LIBTORCH_CUDA
                )
                if not remote.copy_member(wheel, member, tmp):
                    raise BadInput(f"{where}: a CUDA {cuda} build without {LIBTORCH_CUDA}")
                code = _scan(Path(tmp.name))
        return WheelFacts(
            build=build, cuda=cuda, cxx11abi=abi, bundles_cudart=bundles, ranged=wheel.ranged,
            **code,
        )  # fmt: skip


def cache_dir() -> Path:
    from hpcenv.utils import paths

    return paths.per_user_cache_dir() / "wheel-facts"


def read_cached(url: str, *, sha256: str | None, cache: Path | None = None) -> WheelFacts:
    """:func:`read`, cached by sha256 (no cache when the index gives no sha256)."""
    sha256 = remote.sha256_of(sha256 or None, url)
    if not sha256:
        return read(url, sha256=None)
    folder = cache or cache_dir()
    path = folder / f"{sha256}.json"
    if (cached := _cached(path)) is not None:
        return cached
    facts = read(url, sha256=sha256)
    data = json.dumps({"format": CACHE_FORMAT, **asdict(facts)}, sort_keys=True)
    with contextlib.suppress(HpcenvError, OSError):  # a cache that cannot be written: none
        fsio.write_bytes(path, data.encode())
    return facts


#: The largest cache entry read back (one is a few KiB).
MAX_ENTRY_BYTES = 1 << 20


def _cached(path: Path) -> WheelFacts | None:
    """The facts cached at ``path``, when the entry is one you wrote (the reading rule,
    ``fsio.read_yours``: ``XDG_CACHE_HOME`` may be shared, and an entry planted there
    would turn a CPU wheel into a CUDA one in the knowledge); None (a miss) otherwise."""
    try:
        data = fsio.load_json_yours(path, "wheel-facts cache entry", limit=MAX_ENTRY_BYTES)
        if not isinstance(data, dict) or data.pop("format", None) != CACHE_FORMAT:
            return None
        for key in ("sass", "ptx", "partial"):
            data[key] = tuple(data[key])
        return WheelFacts(**data)
    except (HpcenvError, OSError, KeyError, TypeError):
        return None


__all__ = ["WheelFacts", "parse_abi", "parse_version_py", "read", "read_cached"]
