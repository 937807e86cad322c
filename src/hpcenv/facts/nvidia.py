"""Read the NVIDIA driver and GPUs: NVML (pynvml) first, then ``nvidia-smi``, then /proc.

Each reader returns ``None`` when its source is absent, so the caller can fall
through to the next one; none of them raises on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
from pathlib import Path
from typing import Any

from hpcenv.kit import nvidia_proc
from hpcenv.models.facts import Gpu, NvidiaFacts
from hpcenv.utils.errors import CommandFailed

SMI_FIELDS = (
    "index",
    "name",
    "compute_cap",
    "memory.total",
    "driver_version",
    "ecc.errors.uncorrected.volatile.total",
)


def _cuda_from_int(value: int) -> str:
    """NVML encodes CUDA 12.7 as 12070."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    try:
        return int(float(text))
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def read_nvml(nvml: Any = None) -> NvidiaFacts | None:
    """Driver and GPUs through NVML. ``nvml`` is the pynvml module (a test double in tests)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        try:
            cuda: str | None = _cuda_from_int(int(nvml.nvmlSystemGetCudaDriverVersion_v2()))
        except Exception:
            cuda = None
        gpus: list[Gpu] = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                ecc: int | None = int(
                    nvml.nvmlDeviceGetTotalEccErrors(
                        handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
                    )
                )
            except Exception:  # NotSupported on GeForce/Quadro without ECC
                ecc = None
            gpus.append(
                Gpu(
                    index=index,
                    name=name,
                    compute_capability=f"{major}.{minor}",
                    memory_mib=int(memory.total) // (1024 * 1024),
                    ecc_uncorrected=ecc,
                )
            )
        return NvidiaFacts(
            driver_version=driver, cuda_driver_version=cuda, gpus=tuple(gpus), source="nvml"
        )
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def parse_smi_csv(text: str) -> list[Gpu]:
    """Parse ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``."""
    gpus: list[Gpu] = []
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        if len(row) < 4:
            continue
        cells = [c.strip() for c in row] + [""] * (len(SMI_FIELDS) - len(row))
        index = _int_or_none(cells[0])
        cap = cells[2] if re.fullmatch(r"\d+\.\d+", cells[2]) else None
        gpus.append(
            Gpu(
                index=index if index is not None else len(gpus),
                name=cells[1],
                compute_capability=cap,
                memory_mib=_int_or_none(cells[3]),
                ecc_uncorrected=_int_or_none(cells[5]),
            )
        )
    return gpus


#: Seconds ``nvidia-smi`` gets: it answers in well under one on a healthy node; one that
#: hangs (a stuck GPU or driver) is reported as hung after this, not as "no driver".
SMI_TIMEOUT_S = 5.0


def read_smi(
    timeout: float = SMI_TIMEOUT_S, problems: list[str] | None = None
) -> NvidiaFacts | None:
    """Driver and GPUs from ``nvidia-smi`` (one line per GPU), CUDA from its banner.
    A hung nvidia-smi is noted in ``problems``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    from hpcenv.tools import command  # here: a node without nvidia-smi never pays for it

    try:
        out = command.run(
            [smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            timeout=timeout,
        ).stdout
    except CommandFailed as exc:
        if exc.returncode == 124 and problems is not None:
            problems.append(
                f"nvidia-smi did not answer within {timeout:g} s and was stopped: it hangs "
                "(a stuck GPU or driver); the GPUs are unknown: drain or reboot the node"
            )
        return None
    gpus = parse_smi_csv(out)
    driver = None
    for row in csv.reader(out.splitlines()):
        if len(row) >= 5 and row[4].strip():
            driver = row[4].strip()
            break
    cuda = None
    try:
        banner = command.run([smi], timeout=timeout, check=False).stdout
        m = re.search(r"CUDA Version:\s*([\d.]+)", banner)
        cuda = m.group(1) if m else None
    except CommandFailed:
        pass
    if driver is None:
        return None
    return NvidiaFacts(
        driver_version=driver, cuda_driver_version=cuda, gpus=tuple(gpus), source="nvidia-smi"
    )


def read_proc() -> NvidiaFacts | None:
    """The driver alone, from the kernel module (no GPU list: that needs NVML or nvidia-smi)."""
    found = nvidia_proc.driver_version()
    if found is None:
        return None
    version, path = found
    return NvidiaFacts(driver_version=version, cuda_driver_version=None, gpus=(), source=str(path))


def kernel_driver_present() -> bool:
    """NVML cannot answer without the kernel module; checking first saves importing it."""
    files = (nvidia_proc.PROC_VERSION, nvidia_proc.SYS_VERSION, Path("/dev/nvidiactl"))
    return any(p.exists() for p in files)


def read(problems: list[str] | None = None) -> NvidiaFacts | None:
    """The first source that answers, or ``None`` on a machine without an NVIDIA driver;
    a source that hangs is noted in ``problems``."""
    if os.environ.get("HPCENV_NO_NVML") != "1" and kernel_driver_present():
        found = read_nvml()
        if found is not None:
            return found
    return read_smi(problems=problems) or read_proc()
