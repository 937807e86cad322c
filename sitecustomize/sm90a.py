"""GH200 / H100 fix for torch's JIT extension builds (installed by hpcenv as
``hpcenv_fix_sm90a`` with a ``.pth`` line, only into environments whose plan lists
``sm90a``). Why: see README.md next to this file.

At interpreter start this only registers an import hook (torch is *not* imported:
starting Python stays as fast as before). When ``torch.utils.cpp_extension`` is
imported it wraps ``_get_cuda_arch_flags`` and touches nothing else (no CUDA: a
CUDA context made at import breaks every fork that uses CUDA later). When torch
calls ``_get_cuda_arch_flags`` (an extension build), and only if a visible GPU has
compute capability 9.0, the wrapper:

1. if ``TORCH_CUDA_ARCH_LIST`` is unset or empty, sets it from the node's real GPUs
   (``"9.0"``, or e.g. ``"8.0;9.0"`` on a mixed node), so extensions are built for
   the GPUs that are there;
2. tolerates arch names with a suffix (``sm_90a``) in ``torch.cuda.get_arch_list()``
   (read with ``TORCH_CUDA_ARCH_LIST=native``) by stripping the suffix letters while
   torch parses them.

On other GPUs, without CUDA, or when anything unexpected happens, it does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import os
import re
import sys
from types import ModuleType
from typing import Any

TARGET = "torch.utils.cpp_extension"
HOPPER = (9, 0)
_SUFFIX = re.compile(r"^(sm_\d+)[a-z]+$")


def gpu_capabilities(torch: Any) -> list[tuple[int, int]]:
    """Distinct compute capabilities of the visible GPUs ([] without CUDA)."""
    try:
        if not torch.cuda.is_available():
            return []
        caps = {
            tuple(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())
        }
    except Exception:
        return []
    return sorted((int(c[0]), int(c[1])) for c in caps)


def strip_suffixes(arches: list[str]) -> list[str]:
    """``['sm_90', 'sm_90a']`` -> ``['sm_90']``: what torch's int() parsing can read."""
    return list(dict.fromkeys(_SUFFIX.sub(r"\1", a) for a in arches))


def fix_arch_list(torch: Any) -> bool:
    """On a node with a 9.0 GPU, set an unset/empty ``TORCH_CUDA_ARCH_LIST`` from its GPUs.

    True when the node has a 9.0 GPU (the suffix handling is then needed too). Reads
    the GPUs, which initialises CUDA: call it only when torch is about to do that
    itself (``_get_cuda_arch_flags`` does), never at import.
    """
    caps = gpu_capabilities(torch)
    if HOPPER not in caps:
        return False
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(f"{a}.{b}" for a, b in caps)
    return True


def apply(cpp_extension: Any) -> bool:
    """Wrap ``_get_cuda_arch_flags`` of an imported ``torch.utils.cpp_extension``.

    Nothing touches CUDA here: DeepSpeed and inductor import cpp_extension in
    processes that fork workers afterwards, and a CUDA context made at import
    would make every CUDA call in those workers fail ("Cannot re-initialize CUDA
    in forked subprocess"). The GPUs are read when torch reads
    ``TORCH_CUDA_ARCH_LIST``, inside the wrapped call (torch is using CUDA then).
    True when wrapped (now or before).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    original = cpp_extension._get_cuda_arch_flags
    if getattr(original, "_hpcenv_sm90a", False):
        return True

    @functools.wraps(original)
    def _get_cuda_arch_flags(cflags: Any = None) -> Any:
        # Torch reads the GPUs only when the list is unset, empty or "native" and the
        # flags name no arch; otherwise neither may we (it would start CUDA early).
        given = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
        if (given and given != "native") or any(
            "-arch" in str(f) or "-gencode" in str(f) for f in cflags or ()
        ):
            return original(cflags)
        try:
            hopper = fix_arch_list(torch)
        except Exception:  # a fix must never break a build
            hopper = False
        if not hopper:
            return original(cflags)
        real = torch.cuda.get_arch_list
        torch.cuda.get_arch_list = lambda: strip_suffixes(list(real()))
        try:
            return original(cflags)
        finally:
            torch.cuda.get_arch_list = real

    _get_cuda_arch_flags._hpcenv_sm90a = True  # type: ignore[attr-defined]
    cpp_extension._get_cuda_arch_flags = _get_cuda_arch_flags
    return True


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        with contextlib.suppress(Exception):  # a fix must never break an import
            apply(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``torch.utils.cpp_extension``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    if TARGET in sys.modules:  # imported before us: fix it in place
        apply(sys.modules[TARGET])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


if os.environ.get("HPCENV_NO_FIXES") != "1":
    install()
