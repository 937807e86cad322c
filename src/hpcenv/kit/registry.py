"""Every probe hpcenv runs, with its properties: the one list.

The profile schema (``probes.run``), the runner (which probes are multi-rank), the
``probe`` and ``sbatch`` commands, the report's metric columns and the nox
``probe-<name>`` sessions all read it; the noxfile imports this module without
installing hpcenv (it is standard library only, like the whole kit).

A probe ``<name>`` is the script ``probes/<name with _ for ->_probe.py`` (never named
like the package it probes: ``torch.py`` would shadow torch in its own directory).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ProbeInfo:
    name: str
    #: what it checks, one line (``hpcenv probe --help``, the README)
    summary: str
    #: runs as several ranks (one per GPU, or 2 gloo ranks on a CPU node)
    multi_rank: bool = False
    #: metrics worth a column in the report table (others stay in the JSON)
    key_metrics: tuple[str, ...] = ()

    @property
    def script(self) -> str:
        return script_name(self.name)


def script_name(name: str) -> str:
    """The file of probe ``name`` (also for test stand-ins that are not registered)."""
    return f"{name.replace('-', '_')}_probe.py"


PROBES: tuple[ProbeInfo, ...] = (
    ProbeInfo(
        name="imports",
        summary="every package of the profile imports; versions; compiled extensions load",
    ),
    ProbeInfo(
        name="torch",
        summary="version and CUDA build, arch list vs the GPUs, a kernel, matmul vs CPU, bf16",
        key_metrics=("gpu_matmul_rel_err", "cpu_matmul_max_abs_err"),
    ),
    ProbeInfo(
        name="jax",
        summary="devices JAX sees vs the GPUs, a psum across the job's processes",
        multi_rank=True,
        key_metrics=("devices", "processes"),
    ),
    ProbeInfo(
        name="gpu-health",
        summary="uncorrected ECC, row remaps, free memory, persistence, throttling, heat",
        key_metrics=("gpus", "min_free_mib", "max_temperature_c"),
    ),
    ProbeInfo(
        name="nccl",
        summary="allreduce sweep: every element checked, algbw/busbw (NCCL, gloo on CPU)",
        multi_rank=True,
        key_metrics=("busbw_gbps_at_max", "peak_busbw_gbps", "wrong", "world_size"),
    ),
    ProbeInfo(
        name="ofi",
        summary="NCCL net plugin vs NCCL's API, libfabric providers, the network NCCL uses",
    ),
    ProbeInfo(
        name="ray",
        summary="start or join Ray, a task on every node, GPU resources vs the allocation",
        key_metrics=("nodes", "cpus", "gpus"),
    ),
    ProbeInfo(
        name="vllm",
        summary="imports, torch pin, compute capability minimum, optional generation",
    ),
    ProbeInfo(
        name="flash-attn",
        summary="imports, flash_attn_func against torch SDPA on the GPU",
        key_metrics=("max_abs_diff",),
    ),
    ProbeInfo(
        name="deepspeed",
        summary="version and accelerator, nvcc vs torch's CUDA, TORCH_CUDA_ARCH_LIST, a JIT op",
        key_metrics=("jit_build_s",),
    ),
)

NAMES: tuple[str, ...] = tuple(p.name for p in PROBES)
MULTI_RANK: frozenset[str] = frozenset(p.name for p in PROBES if p.multi_rank)


def get(name: str) -> ProbeInfo | None:
    return next((p for p in PROBES if p.name == name), None)
