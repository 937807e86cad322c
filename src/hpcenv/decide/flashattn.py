"""Decide what to do about flash-attn on a node: an official wheel, a source build, or skip.

flash-attn 2 has no kernels below compute capability 8.0 (PyTorch's SDPA is the
fallback there), ships official wheels only for x86_64 and a few torch/CUDA/Python
combinations, and a source build starts one nvcc per job, each with NVCC_THREADS threads
(about 9 GB per 4-thread job): ninja's default on a 288-core node would OOM a login node.
So the build gets MAX_JOBS/NVCC_THREADS from the facts, the way flash-attn's released
setup.py reasons (min(cpus/2, free memory / 9 GB)), but from a planned share of memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcenv import knowledge
from hpcenv.decide.torch_variant import describe_gpus
from hpcenv.knowledge import FlashAttnWheels, cap_key, variant_cuda
from hpcenv.models.facts import Facts
from hpcenv.models.plan import FlashAttnChoice
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.utils.errors import BadInput

MODES = ("auto", "wheel", "build", "skip")
FALLBACK = "PyTorch SDPA (torch.nn.functional.scaled_dot_product_attention) is the fallback"


@dataclass(frozen=True, kw_only=True)
class BuildJobs:
    max_jobs: int
    nvcc_threads: int
    why: str


def build_jobs(cpus: int | None, memory_gib: float | None) -> BuildJobs:
    """MAX_JOBS and NVCC_THREADS that fit the node's cores and memory (never below 1).

    flash-attn's released setup.py rule (packages.toml ``gb_per_job_source``): jobs =
    min(cpus // 2, memory / 9 GB), each job an nvcc with NVCC_THREADS=4. hpcenv applies it
    to a planned share of the node's memory, and lowers NVCC_THREADS when not even one job
    fits (the released rule would run one 9 GB job anyway).
    """
    fa = knowledge.load().flash_attn
    per_job = fa.gb_per_job
    default = fa.default_nvcc_threads
    if memory_gib is None:
        return BuildJobs(
            max_jobs=1,
            nvcc_threads=2,
            why=f"memory unknown: 1 job x 2 nvcc threads (about {per_job * 2 / default:.1f} GB)",
        )
    budget = memory_gib * fa.memory_fraction
    threads = default if budget >= per_job else max(1, int(budget // (per_job / default)))
    by_cpu = max(1, (cpus or 2) // 2)
    by_mem = max(1, int(budget // per_job))
    jobs = min(by_cpu, by_mem)
    cpu_text = f"{cpus} cpus" if cpus else "cpus unknown (2 assumed)"
    fewer = (
        f"; NVCC_THREADS lowered to {threads}: one {default}-thread job needs {per_job:g} GB"
        if threads < default
        else ""
    )
    why = (
        f"MAX_JOBS={jobs}, NVCC_THREADS={threads}: flash-attn's setup.py rule min({cpu_text} / 2, "
        f"{budget:.0f} GB planned ({fa.memory_fraction:.0%} of {memory_gib:g} GiB) / "
        f"{per_job:g} GB per {default}-thread nvcc job){fewer}"
    )
    return BuildJobs(max_jobs=jobs, nvcc_threads=threads, why=why)


def build_archs(caps: tuple[str, ...]) -> tuple[str, ...]:
    """FLASH_ATTN_CUDA_ARCHS values for these GPUs: the highest arch flash-attn builds
    with the same major and not above each GPU (8.6 and 8.9 run sm_80 code)."""
    known = knowledge.load().flash_attn.build_archs
    out: list[str] = []
    for cap in caps:
        fits = [a for a in known if cap_key(a)[0] == cap_key(cap)[0] and cap_key(a) <= cap_key(cap)]
        arch = max(fits, key=cap_key) if fits else cap
        tag = arch.replace(".", "")
        if tag not in out:
            out.append(tag)
    return tuple(out)


def _py_tag(python: str) -> str:
    parts = python.split(".")
    return parts[0] + (parts[1] if len(parts) > 1 else "")


def _py_minor(python: str) -> str:
    return ".".join(python.split(".")[:2])


def official_wheel(
    *, version: str, machine: str, torch_version: str, cuda: str, python: str
) -> tuple[str, str, FlashAttnWheels] | None:
    """(filename, url, entry) of the official flash-attn wheel for this combination, or None."""
    know = knowledge.load()
    release = know.release_of(torch_version)
    plat = release.platforms.get(machine) if release else None
    if release is None or plat is None:
        return None
    major = int(cuda.partition(".")[0])
    abi = "TRUE" if plat.cxx11abi else "FALSE"
    for w in know.flash_attn.wheels:
        if (
            w.version == version
            and machine in w.machines
            and major in w.cuda_tags
            and release.minor in w.torch_minors
            and _py_minor(python) in w.pythons
            and abi in w.abis
            and not w.excluded(torch=release.minor, python=_py_minor(python), cuda_major=major)
        ):
            name = know.flash_attn.wheel_name.format(
                version=version,
                cuda_tag=w.cuda_tags[major],
                torch_minor=release.minor,
                abi=abi,
                py=_py_tag(python),
                machine=machine,
            )
            url = know.flash_attn.wheel_url.format(version=version, filename=name)
            return name, url, w
    return None


def decide(
    facts: Facts, torch_choice: TorchChoice, *, mode: str, version: str, python: str
) -> FlashAttnChoice:
    """The flash-attn action for this node and torch build (module docstring).

    A forced ``wheel`` or ``build`` that cannot work (CPU torch, a GPU below 8.0, no
    official wheel for the combination) is refused with BadInput: it would otherwise
    fail much later, at install time or at the first attention call.
    """
    if mode not in MODES:
        raise BadInput(f"[flash_attn] mode = {mode!r} must be one of: {', '.join(MODES)}")
    if mode == "skip":
        return FlashAttnChoice(
            action="skip",
            reason=f"the profile skips flash-attn ([flash_attn] mode = 'skip'); {FALLBACK}",
            version=version,
        )
    fa = knowledge.load().flash_attn
    cuda = variant_cuda(torch_choice.backend or "cpu")
    forced = mode in ("wheel", "build")
    if cuda is None or not facts.gpus:
        what = "the torch build is cpu" if cuda is None else "these facts show no NVIDIA GPU"
        why = (
            f"{what}: flash-attn needs an NVIDIA GPU with compute capability >= "
            f"{fa.min_compute_capability}"
        )
        if forced:
            raise BadInput(f"[flash_attn] mode = {mode!r} but {why}; set mode = 'auto' or 'skip'")
        return FlashAttnChoice(action="skip", reason=f"{why}; {FALLBACK}", version=version)
    caps = facts.compute_capabilities
    if not caps:
        return FlashAttnChoice(
            action="skip",
            reason=f"the GPUs' compute capability is unknown, so no arch to build for; {FALLBACK}",
            version=version,
        )
    low = [c for c in caps if cap_key(c) < cap_key(fa.min_compute_capability)]
    if low:
        old = describe_gpus(tuple(g for g in facts.gpus if g.compute_capability in low))
        why = (
            f"flash-attn 2 needs compute capability >= {fa.min_compute_capability} "
            f"and this node has {old}"
        )
        if forced:
            raise BadInput(f"[flash_attn] mode = {mode!r} but {why}; set mode = 'auto' or 'skip'")
        return FlashAttnChoice(action="skip", reason=f"{why}; {FALLBACK}", version=version)
    machine = facts.arch or ""
    wheel = official_wheel(
        version=version,
        machine=machine,
        torch_version=torch_choice.version or "",
        cuda=cuda,
        python=python,
    )
    if wheel is not None and mode in ("auto", "wheel"):
        name, url, entry = wheel
        note = "" if entry.confirmed else f" (wheel list unconfirmed: {entry.source})"
        return FlashAttnChoice(
            action="wheel",
            reason=f"an official flash-attn wheel exists: {name}{note}",
            version=version,
            wheel_url=url,
        )
    if mode == "wheel":
        raise BadInput(
            f"[flash_attn] mode = 'wheel' but there is no official flash-attn {version} wheel for "
            f"{machine}, torch {torch_choice.version}, CUDA {cuda.partition('.')[0]}, Python "
            f"{_py_minor(python)} (official wheels are x86_64 only); set mode = 'auto' or 'build'"
        )
    archs = build_archs(caps)
    jobs = build_jobs(facts.cpus, facts.memory_gib)
    if mode == "build":
        source = "the profile forces a source build ([flash_attn] mode = 'build')"
    elif machine != "x86_64":
        source = f"no official flash-attn wheels for {machine}"
    else:
        source = (
            f"no official flash-attn {version} wheel for torch {torch_choice.version}, "
            f"CUDA {cuda.partition('.')[0]}, Python {_py_minor(python)}"
        )
    reason = (
        f"{source}: build from source for sm {', '.join(archs)} (FLASH_ATTN_CUDA_ARCHS) with "
        f"nvcc from a CUDA {cuda.partition('.')[0]}.x toolkit; {jobs.why}"
    )
    return FlashAttnChoice(
        action="build",
        reason=reason,
        version=version,
        cuda_archs=archs,
        max_jobs=jobs.max_jobs,
        nvcc_threads=jobs.nvcc_threads,
    )


__all__ = ["BuildJobs", "build_jobs", "decide", "official_wheel"]
