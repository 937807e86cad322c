"""Job preflight: the checks cluster guides ask for before a long job, in seconds.

Run at the top of a job (``hpcenv preflight PROFILE``, ``nox -s probe-preflight``),
these catch what otherwise costs a 24-hour slot: a ``CUDA_VISIBLE_DEVICES`` exported
in ``~/.bashrc`` that overrides the allocation, fewer GPUs visible than allocated,
TMPDIR on a network filesystem or a full disk, a log directory that does not exist
(SLURM then drops the job's output), modules not loaded, GPUs too small for the job,
a GPU with uncorrected ECC errors.

Every check is a pure function of (profile, facts, environment, filesystem) so it
can be tested with recorded facts and temp dirs; each returns pass, fail or skip
with the reason and, for fail and skip, the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcenv.facts.scratch import NETWORK_FS, mount_of
from hpcenv.kit import slurm_env
from hpcenv.kit.status import Status
from hpcenv.models import hostlist
from hpcenv.models.facts import Facts, SlurmFacts
from hpcenv.profile.schema import Profile
from hpcenv.utils.errors import BadInput


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    reason: str
    fix: str = ""

    def serialize(self) -> dict[str, str]:
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "fix": self.fix,
        }


@dataclass(frozen=True, kw_only=True)
class Context:
    """What the checks read: nothing else, so tests can hand in any of it."""

    profile: Profile
    facts: Facts
    environ: Mapping[str, str]
    mounts: str  # the text of /proc/mounts
    cwd: Path


#: More GPU ids than a node or step can have.
MAX_GPU_IDS = 4096


def _ids(value: str | None) -> list[str]:
    """``0,1,3`` (SLURM may also write ``0-3``) as a list of ids (at most MAX_GPU_IDS)."""
    out: list[str] = []
    for raw in (value or "").split(","):
        part = raw.strip()
        m = re.fullmatch(r"(\d+)-(\d+)", part)
        if m:
            ids = hostlist.id_range(
                int(m.group(1)), int(m.group(2)), limit=MAX_GPU_IDS, what="GPU ids"
            )
            out += [str(i) for i in ids]
        elif part:
            out.append(part)
        if len(out) > MAX_GPU_IDS:
            raise BadInput(f"GPU ids: more than {MAX_GPU_IDS} listed; fix the value")
    return out


def allocated_gpu_ids(ctx: Context) -> list[str] | None:
    """The GPU ids SLURM gave this step (or job); None when it gave none or we are outside."""
    env = slurm_env.read(ctx.environ)
    for given in (env.step_gpus, env.job_gpus):
        if given:
            return _ids(given)
    slurm = ctx.facts.slurm
    if slurm is not None and slurm.gpus and re.fullmatch(r"[\d,\-]+", slurm.gpus):
        return _ids(slurm.gpus) if "," in slurm.gpus or "-" in slurm.gpus else None
    return None


def allocated_gpu_count(ctx: Context) -> int | None:
    ids = allocated_gpu_ids(ctx)
    if ids:
        return len(ids)
    slurm = ctx.facts.slurm
    if slurm is not None and slurm.gpus_on_node:
        return slurm.gpus_on_node
    return slurm_env.read(ctx.environ).gpus_on_node


def _in_allocation(ctx: Context) -> bool:
    return ctx.facts.slurm is not None or slurm_env.read(ctx.environ).in_job


def _cvd(ctx: Context) -> str | None:
    if "CUDA_VISIBLE_DEVICES" in ctx.environ:
        return ctx.environ["CUDA_VISIBLE_DEVICES"]
    return ctx.facts.slurm.cuda_visible_devices if ctx.facts.slurm else None


def check_cuda_visible_devices(ctx: Context) -> Check:
    name = "cuda-visible-devices"
    if not _in_allocation(ctx):
        return Check(
            name=name,
            status=Status.SKIP,
            reason="not inside a SLURM allocation",
            fix="run inside sbatch/salloc to check the GPU binding",
        )
    alloc = allocated_gpu_ids(ctx)
    if not alloc:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="the allocation has no GPU ids (SLURM_JOB_GPUS/SLURM_STEP_GPUS unset)",
            fix="request GPUs in the job (the profile's [slurm] gpu_request)",
        )
    cvd = _cvd(ctx)
    fix = (
        "do not set CUDA_VISIBLE_DEVICES in job scripts or ~/.bashrc; SLURM sets it "
        "to the allocated GPUs"
    )
    if cvd is None:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"SLURM allocated GPUs {','.join(alloc)} "
            "but CUDA_VISIBLE_DEVICES is unset (it was removed after SLURM set it)",
            fix=fix,
        )
    visible = _ids(cvd)
    if cvd.strip() in ("", "-1", "NoDevFiles") or not visible:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"CUDA_VISIBLE_DEVICES={cvd!r} hides every allocated GPU",
            fix=fix,
        )
    if visible == alloc:
        return Check(
            name=name, status=Status.PASS, reason=f"CUDA_VISIBLE_DEVICES={cvd} as allocated"
        )
    renumbered = [str(i) for i in range(len(alloc))]
    if visible == renumbered:  # cgroup-constrained nodes renumber the allocated GPUs 0..n-1
        return Check(
            name=name,
            status=Status.PASS,
            reason=f"CUDA_VISIBLE_DEVICES={cvd}: the "
            f"{len(alloc)} allocated GPUs ({','.join(alloc)}) renumbered by the cgroup",
        )
    if all(not v.isdigit() for v in visible) and len(visible) == len(alloc):
        return Check(
            name=name,
            status=Status.PASS,
            reason=f"CUDA_VISIBLE_DEVICES names {len(visible)} GPUs by UUID, as allocated",
        )
    return Check(
        name=name,
        status=Status.FAIL,
        reason=f"CUDA_VISIBLE_DEVICES={cvd} overrides the "
        f"allocation (SLURM gave GPUs {','.join(alloc)})",
        fix=fix,
    )


def check_gpu_count(ctx: Context) -> Check:
    name = "gpus-visible"
    if not _in_allocation(ctx):
        return Check(
            name=name,
            status=Status.SKIP,
            reason="not inside a SLURM allocation",
            fix="run inside sbatch/salloc to compare GPUs with the allocation",
        )
    want = allocated_gpu_count(ctx)
    if not want:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="the allocation has no GPUs",
            fix="request GPUs in the job (the profile's [slurm] gpu_request)",
        )
    nvml = len(ctx.facts.gpus)
    cvd = _cvd(ctx)
    seen = min(nvml, len(_ids(cvd))) if cvd is not None else nvml
    if ctx.facts.nvidia is None:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"{want} GPUs allocated but no NVIDIA driver is visible on this node",
            fix="check the node (nvidia-smi); exclude it with --exclude if broken",
        )
    if seen == want:
        return Check(name=name, status=Status.PASS, reason=f"{seen} GPUs visible, {want} allocated")
    return Check(
        name=name,
        status=Status.FAIL,
        reason=f"{seen} GPUs visible but {want} allocated",
        fix="fewer: a GPU fell off the bus or CUDA_VISIBLE_DEVICES hides some "
        "(nvidia-smi -L); more: request all GPUs you use (--gpus-per-node)",
    )


def _expand(value: str, ctx: Context) -> Path:
    def sub(m: re.Match[str]) -> str:
        return ctx.environ.get(m.group(1) or m.group(2), m.group(0))

    text = re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, value)
    path = Path(text).expanduser()
    return path if path.is_absolute() else ctx.cwd / path


def check_scratch(ctx: Context) -> Check:
    name = "scratch"
    job = ctx.profile.job
    if not job.scratch:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="the profile names no scratch",
            fix="set [job] scratch to the node-local disk to use it as TMPDIR",
        )
    path = _expand(job.scratch, ctx)
    if not path.is_dir():
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"scratch {path} does not exist on this node",
            fix="fix [job] scratch, or run on a node that has it",
        )
    mount = mount_of(path.resolve(), ctx.mounts)
    if mount is not None and mount[1] in NETWORK_FS:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"scratch {path} is on {mount[1]} ({mount[0]}), a network filesystem",
            fix="point [job] scratch at node-local storage (e.g. /tmp, /local, /srv)",
        )
    st = os.statvfs(path)
    free_gib = st.f_bavail * st.f_frsize / 1024**3
    fs = f"{mount[1]} at {mount[0]}" if mount else "unknown fs"
    if free_gib < job.scratch_min_gib:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"scratch {path} has {free_gib:.1f} GiB free, the job needs "
            f"{job.scratch_min_gib:g} GiB",
            fix=f"free space on {path} or lower [job] scratch_min_gib",
        )
    return Check(
        name=name, status=Status.PASS, reason=f"scratch {path} on {fs}, {free_gib:.1f} GiB free"
    )


def check_log_dir(ctx: Context) -> Check:
    name = "log-dir"
    path = _expand(ctx.profile.job.log_dir, ctx)
    if path.is_dir():
        if os.access(path, os.W_OK | os.X_OK):
            return Check(
                name=name, status=Status.PASS, reason=f"log dir {path} exists and is writable"
            )
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"log dir {path} is not writable",
            fix=f"fix its permissions or point [job] log_dir elsewhere: {path}",
        )
    if path.exists():
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"log dir {path} is not a directory",
            fix="point [job] log_dir at a directory",
        )
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
        return Check(
            name=name,
            status=Status.PASS,
            reason=f"log dir {path} does not exist yet but "
            f"can be created ('hpcenv sbatch' creates it before submitting)",
        )
    return Check(
        name=name,
        status=Status.FAIL,
        reason=f"log dir {path} does not exist and cannot be "
        "created; SLURM silently drops a job's output then",
        fix=f"mkdir -p {path}, or point [job] log_dir somewhere writable",
    )


def _module_loaded(want: str, loaded: Sequence[str]) -> bool:
    return any(m == want or m.startswith(want + "/") for m in loaded)


def check_modules(ctx: Context) -> Check:
    name = "modules"
    wanted = ctx.profile.modules.load
    if not wanted:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="the profile loads no modules",
            fix="list them in [modules] load when the cluster needs some",
        )
    loaded = list(ctx.facts.modules)
    if "LOADEDMODULES" in ctx.environ:
        loaded = [m for m in ctx.environ["LOADEDMODULES"].split(":") if m]
    missing = [m for m in wanted if not _module_loaded(m, loaded)]
    if missing:
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"not loaded: {', '.join(missing)}",
            fix="module load " + " ".join(missing) + " (the rendered sbatch script does this)",
        )
    return Check(name=name, status=Status.PASS, reason=f"loaded: {', '.join(wanted)}")


def check_gpu_memory(ctx: Context) -> Check:
    name = "gpu-memory"
    need = ctx.profile.job.gpu_memory_gib
    if not need:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="the profile declares no GPU memory need",
            fix="set [job] gpu_memory_gib to what the job needs per GPU",
        )
    gpus = ctx.facts.gpus
    if not gpus:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="no GPU visible",
            fix="run on a GPU node to check GPU memory",
        )
    small = [g for g in gpus if g.memory_mib is not None and g.memory_mib / 1024 < need]
    unknown = [g for g in gpus if g.memory_mib is None]
    if small:
        names = ", ".join(
            f"GPU {g.index} ({g.memory_mib / 1024:.1f} GiB)"
            for g in small
            if g.memory_mib is not None
        )
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"{names} below the {need:g} GiB the job needs",
            fix="request bigger GPUs (partition/constraint) or lower [job] gpu_memory_gib",
        )
    if len(unknown) == len(gpus):
        return Check(
            name=name,
            status=Status.SKIP,
            reason="GPU memory size unknown (no NVML)",
            fix="install pynvml or nvidia-smi on the node",
        )
    least = min(g.memory_mib or 0 for g in gpus) / 1024
    return Check(
        name=name,
        status=Status.PASS,
        reason=f"{len(gpus)} GPUs with >= {least:.1f} GiB (need {need:g})",
    )


def check_ecc(ctx: Context) -> Check:
    name = "ecc"
    gpus = ctx.facts.gpus
    if not gpus:
        return Check(
            name=name,
            status=Status.SKIP,
            reason="no GPU visible",
            fix="run on a GPU node to read ECC counters",
        )
    bad = [g for g in gpus if g.ecc_uncorrected]
    if bad:
        names = ", ".join(f"GPU {g.index} ({g.ecc_uncorrected} errors)" for g in bad)
        return Check(
            name=name,
            status=Status.FAIL,
            reason=f"uncorrected ECC errors: {names}",
            fix="report the node to the admins and resubmit with --exclude=<this node>",
        )
    if all(g.ecc_uncorrected is None for g in gpus):
        return Check(
            name=name,
            status=Status.SKIP,
            reason="ECC counters unavailable (ECC off or no NVML)",
            fix="read them with 'nvidia-smi -q -d ECC'",
        )
    return Check(
        name=name, status=Status.PASS, reason=f"no uncorrected ECC errors on {len(gpus)} GPUs"
    )


CHECKS: tuple[Callable[[Context], Check], ...] = (
    check_cuda_visible_devices,
    check_gpu_count,
    check_scratch,
    check_log_dir,
    check_modules,
    check_gpu_memory,
    check_ecc,
)


def run(ctx: Context, command: Sequence[str] | None = None) -> list[Check]:
    """Every check; with the job's ``command``, its launcher's config too."""
    checks = [check(ctx) for check in CHECKS]
    return checks + ([check_launcher_config(ctx, command)] if command else [])


def check_launcher_config(ctx: Context, command: Sequence[str]) -> Check:
    """The accelerate/DeepSpeed config the command names, against this node's real GPUs,
    memory and allocation (the render-time check, repeated where the job runs)."""
    from hpcenv.job import command as job_command
    from hpcenv.job import launch_config

    name = "launcher-config"
    cmd = job_command.read(command)
    gpus = ctx.facts.gpus
    caps = sorted((g.compute_capability for g in gpus if g.compute_capability), key=float)
    slurm = ctx.facts.slurm or slurm_env_facts(ctx)
    nodes = (slurm.nnodes if slurm else None) or 1
    per_node = (
        allocated_gpu_count(ctx) or len(gpus) or int(ctx.environ.get("HPCENV_LAUNCH_PER_NODE") or 1)
    )
    job = launch_config.Job(
        nodes=nodes,
        per_node=per_node,
        compute_capability=caps[0] if caps else "",
        gpu=gpus[0].name if gpus else "",
        memory_gib=ctx.facts.memory_gib or 0.0,
    )
    try:
        found = launch_config.check(cmd, job=job, cwd=ctx.cwd, env=ctx.environ)
    except BadInput as exc:
        return Check(name=name, status=Status.FAIL, reason=str(exc), fix="fix the config file")
    said = [*found.notes, *(f"warning: {w}" for w in found.warnings)]
    what = f"{nodes} node(s) x {per_node}"
    return Check(name=name, status=Status.PASS, reason="; ".join(said) or f"fits {what}")


def slurm_env_facts(ctx: Context) -> SlurmFacts | None:
    from hpcenv.facts.allocation import from_env

    return from_env(ctx.environ)


def read_mounts(path: Path = Path("/proc/mounts")) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def context(profile: Profile, facts: Facts, environ: Mapping[str, str] | None = None) -> Context:
    """The context of this process: its environment, this host's mounts and cwd."""
    return Context(
        profile=profile,
        facts=facts,
        environ=dict(os.environ if environ is None else environ),
        mounts=read_mounts(),
        cwd=Path.cwd(),
    )


def status(checks: Sequence[Check]) -> Status:
    """The combine rule of every status: a fail fails; only skips is a skip."""
    return Status.combine(c.status for c in checks)
