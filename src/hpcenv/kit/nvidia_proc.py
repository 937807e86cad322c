"""The NVIDIA driver and GPU models from the kernel module's files: no NVML, no subprocess.

``/proc/driver/nvidia/version`` reads like ``NVRM version: NVIDIA UNIX Open Kernel
Module for aarch64  565.57.01  Release Build ...``; ``/sys/module/nvidia/version``
holds the bare version; ``/proc/driver/nvidia/gpus/*/information`` one file per GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

PROC_VERSION = Path("/proc/driver/nvidia/version")
SYS_VERSION = Path("/sys/module/nvidia/version")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")

_KERNEL_MODULE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def parse_proc_version(text: str) -> str | None:
    """The driver version in the text of /proc/driver/nvidia/version, or None."""
    m = _KERNEL_MODULE.search(text)
    return m.group(1) if m else None


def driver_version() -> tuple[str, Path] | None:
    """(driver version, the file it came from), or None without an NVIDIA kernel module."""
    for path in (SYS_VERSION, PROC_VERSION):
        try:
            text = path.read_text()
        except OSError:
            continue
        version = text.strip() if path == SYS_VERSION else parse_proc_version(text)
        if version:
            return version, path
    return None


def gpu_models(base: Path = PROC_GPUS) -> list[str]:
    """GPU model names, one per GPU (node-wide, whatever CUDA_VISIBLE_DEVICES says)."""
    models: list[str] = []
    if not base.is_dir():
        return models
    for info in sorted(base.glob("*/information")):
        try:
            m = re.search(r"^Model:\s*(.+)$", info.read_text(), re.M)
        except OSError:
            continue
        models.append(m.group(1).strip() if m else "unknown")
    return models
