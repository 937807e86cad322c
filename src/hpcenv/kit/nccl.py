"""NCCL's version, as the library and torch report it, in one spelling: ``2.27.3``."""

from __future__ import annotations

from typing import Any


def decode_version(code: int) -> str:
    """``ncclGetVersion``'s integer: X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def version_text(value: object) -> str:
    """``(2, 27, 3)`` (``torch.cuda.nccl.version()``), ``22703`` (older torch and
    ``ncclGetVersion``) or a string, as ``2.27.3``."""
    if isinstance(value, tuple):
        return ".".join(str(x) for x in value)
    if isinstance(value, int):
        return decode_version(value)
    return str(value)


def torch_nccl_version(torch: Any) -> str | None:
    """The NCCL a torch build carries; None for a CPU build (it has none)."""
    try:
        if not (torch.cuda.is_available() or getattr(torch.version, "cuda", None)):
            return None
        return version_text(torch.cuda.nccl.version())
    except Exception:  # a CPU build without NCCL, or a broken CUDA: unknown
        return None
