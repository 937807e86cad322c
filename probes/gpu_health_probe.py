"""GPU health at DCGM's quick level: uncorrected ECC, retired pages or row remaps,
free memory, persistence mode, throttle reasons, temperature.

Reads NVML through pynvml when the environment has it (nvidia-ml-py), else parses
``nvidia-smi --query-gpu`` CSV. A node with uncorrected ECC errors or pending row
remaps produces wrong numbers or dies mid-job: better to learn it before the job.
No GPU: skip with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

from hpcenv.kit import probe
from hpcenv.kit.status import Status

#: NVML clock throttle ("clocks event") reason bits (nvml.h).
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
BAD_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
WARN_THROTTLE = {"sw_thermal_slowdown"}
HOT_C = 85

SMI_FIELDS = (
    "index",
    "name",
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "memory.free",
    "memory.total",
    "persistence_mode",
    "clocks_throttle_reasons.active",
    "temperature.gpu",
)


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def _num(text: str) -> int | None:
    text = text.strip()
    if text in ("", "[N/A]", "N/A", "[Not Supported]", "Not Supported"):
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(float(text))
    except ValueError:
        return None


def parse_smi(csv_text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` -> GPU dicts."""
    gpus = []
    for line in csv_text.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(SMI_FIELDS):
            continue
        row = dict(zip(SMI_FIELDS, cols, strict=True))
        mask = _num(row["clocks_throttle_reasons.active"])
        gpus.append(
            {
                "index": _num(row["index"]),
                "name": row["name"],
                "ecc_uncorrected": _num(row["ecc.errors.uncorrected.volatile.total"]),
                "retired_pending": row["retired_pages.pending"].strip().lower() == "yes",
                "remap_pending": row["remapped_rows.pending"].strip().lower() == "yes",
                "remap_failure": row["remapped_rows.failure"].strip().lower() == "yes",
                "memory_free_mib": _num(row["memory.free"]),
                "memory_total_mib": _num(row["memory.total"]),
                "persistence": row["persistence_mode"].strip().lower() == "enabled",
                "throttle": throttle_names(mask or 0),
                "temperature_c": _num(row["temperature.gpu"]),
            }
        )
    return gpus


def read_nvml() -> list[dict[str, Any]] | None:
    """GPU dicts from pynvml; None when pynvml or the driver is not there."""
    try:
        import pynvml as nv
    except ImportError:
        return None
    try:
        nv.nvmlInit()
    except Exception:  # no driver: NVMLError_LibraryNotFound / DriverNotLoaded
        return None

    def get(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # not supported on this GPU: unknown, not a failure
            return None

    try:
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = get(nv.nvmlDeviceGetName, h)
            mem = get(nv.nvmlDeviceGetMemoryInfo, h)
            remap = get(nv.nvmlDeviceGetRemappedRows, h)  # (corr, unc, pending, failure)
            pending = get(nv.nvmlDeviceGetRetiredPagesPendingStatus, h)
            reasons_fn = (
                getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nv.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            mask = get(reasons_fn, h) or 0
            out.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "ecc_uncorrected": get(
                        nv.nvmlDeviceGetTotalEccErrors,
                        h,
                        nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                        nv.NVML_VOLATILE_ECC,
                    ),
                    "retired_pending": bool(pending) if pending is not None else False,
                    "remap_pending": bool(remap[2]) if remap else False,
                    "remap_failure": bool(remap[3]) if remap else False,
                    "memory_free_mib": mem.free // (1 << 20) if mem else None,
                    "memory_total_mib": mem.total // (1 << 20) if mem else None,
                    "persistence": get(nv.nvmlDeviceGetPersistenceMode, h) == 1,
                    "throttle": throttle_names(int(mask)),
                    "temperature_c": get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                }
            )
        return out
    finally:
        nv.nvmlShutdown()


def read_smi() -> list[dict[str, Any]] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    proc = subprocess.run(
        [exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return parse_smi(proc.stdout) if proc.returncode == 0 else None


def judge(gpu: dict[str, Any], need_mib: int = 0) -> list[tuple[str, Status, str, str]]:
    """(check, status, summary, remedy) for one GPU; warnings pass with a note."""
    i, out = gpu["index"], []
    tag = f"GPU {i}"
    if gpu.get("ecc_uncorrected"):
        out.append(
            (
                "ecc",
                Status.FAIL,
                f"{tag}: {gpu['ecc_uncorrected']} uncorrected ECC errors",
                "drain this node and report it; results computed on it may be wrong",
            )
        )
    if gpu.get("remap_failure"):
        out.append(
            (
                "row-remap",
                Status.FAIL,
                f"{tag}: row remapping failed",
                "the GPU memory is failing: drain the node and report it",
            )
        )
    elif gpu.get("remap_pending") or gpu.get("retired_pending"):
        out.append(
            (
                "row-remap",
                Status.FAIL,
                f"{tag}: row remap / page retirement pending",
                "the GPU needs a reset (nvidia-smi -r, or a node reboot) before use",
            )
        )
    free, total = gpu.get("memory_free_mib"), gpu.get("memory_total_mib")
    if free is not None and need_mib and free < need_mib:
        out.append(
            (
                "memory",
                Status.FAIL,
                f"{tag}: {free} MiB free, the job needs {need_mib}",
                "another process holds GPU memory (nvidia-smi shows it), or pick bigger GPUs",
            )
        )
    bad = [t for t in gpu.get("throttle", []) if t in BAD_THROTTLE]
    if bad:
        out.append(
            (
                "throttle",
                Status.FAIL,
                f"{tag}: clocks throttled ({', '.join(bad)})",
                "hardware slowdown: check cooling/power; report the node",
            )
        )
    temp = gpu.get("temperature_c")
    notes = []
    if temp is not None and temp >= HOT_C:
        notes.append(f"{temp} C (hot)")
    if free is not None and total and free < 0.9 * total:
        notes.append(f"{total - free} MiB already used")
    if not gpu.get("persistence"):
        notes.append("persistence mode off (slower CUDA start)")
    warn = [t for t in gpu.get("throttle", []) if t in WARN_THROTTLE]
    if warn:
        notes.append(f"throttled: {', '.join(warn)}")
    if not out:
        desc = f"{tag} {gpu.get('name')}: healthy, {free} MiB free, {temp} C"
        out.append(("health", Status.PASS, desc + (f" ({'; '.join(notes)})" if notes else ""), ""))
    return out


def body(ctx: probe.Context) -> None:
    """ECC, row remaps, free memory, persistence, throttling, temperature of every GPU."""
    gpus, source = read_nvml(), "pynvml"
    if gpus is None:
        gpus, source = read_smi(), "nvidia-smi"
    if not gpus:
        ctx.check(
            "gpus",
            Status.SKIP,
            "no NVIDIA GPU or driver on this node (pynvml and nvidia-smi found none)",
            remedy="run on a GPU node; nothing to check here",
        )
        return
    ctx.details.update(source=source, gpus=gpus)
    need = int(float(ctx.config.get("gpu_memory_gib") or 0) * 1024)
    for g in gpus:
        for name, status, summary, remedy in judge(g, need):
            ctx.check(name, status, summary, remedy=remedy)
    ctx.metrics.update(
        gpus=len(gpus),
        min_free_mib=min((g["memory_free_mib"] or 0) for g in gpus),
        max_temperature_c=max((g["temperature_c"] or 0) for g in gpus),
    )
    if all(c["status"] == Status.PASS for c in ctx.checks):
        ctx.summary = (
            f"{len(gpus)} GPU(s) healthy ({source}): no uncorrected ECC, no pending "
            f"remaps, max {ctx.metrics['max_temperature_c']} C"
        )


if __name__ == "__main__":
    sys.exit(probe.main("gpu-health", body))
