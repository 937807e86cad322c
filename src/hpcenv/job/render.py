"""The job script for a researcher's own command: ``hpcenv sbatch PROFILE -- CMD...``.

What the migrations wrote by hand, rendered from the profile: the cluster's
``#SBATCH`` lines (``sbatch.directives``), the environment ``hpcenv env`` prints
(modules, the profile's variables, the venv), then, in this order:

1. **rendezvous**: ``MASTER_ADDR`` (the first node), ``MASTER_PORT`` (from the job
   id), and torchrun's ``PET_*`` rendezvous variables (c10d on the first node, the
   job's node count), so ``torchrun --nproc-per-node 4 train.py`` needs no
   per-job flags (its own options still win);
2. **scratch**: ``TMPDIR=<[job] scratch>/<job id>`` made on every node; at exit each
   ``--copy-back DIR`` (``$TMPDIR/DIR``) is copied into the same path under the job's
   working directory, from every node, and TMPDIR is removed;
3. **chain** (``--chain N``): link ``HPCENV_CHAIN_LINK`` of ``HPCENV_CHAIN_MAX``; the
   next link is submitted at once (this script, ``--dependency=afterany:<this job>``,
   or ``singleton``) so it waits in the queue while this one runs, and is cancelled
   when CMD exits 0, when the gate fails, or not made at link N;
   ``--signal=B:USR1@<lead>`` asks CMD to checkpoint before the walltime;
4. **gate**: the venv exists, ``hpcenv preflight`` on every node, the ``--gate``
   probes across the allocation; the first failure ends the job, naming it, before
   CMD costs an hour;
5. **the command**: once per node (``srun`` one task per node; torchrun's shape),
   per task (``--per-task``: ``srun`` over every task), or on the head node of a Ray
   cluster over the allocation (``--ray``: ``hpcenv.slurm.ray_cluster``), in its own
   process group: SIGUSR1, SIGTERM, SIGINT and SIGHUP sent to the batch shell are
   passed on to that group, and the job's exit code is CMD's.

Every value from the profile or the command line is quoted (``output.shell_quote``); CMD is one bash
array of its words (``output.shell_join``), never re-split; ``#SBATCH`` values go through
``sbatch``'s checks. The script uses no other hpcenv at run time than the one that
rendered it (``sys.executable -m hpcenv``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hpcenv.job import command, containers, environment, jax_job, launch_config, launchers
from hpcenv.kit import registry
from hpcenv.kit.masking import MIN_VALUE_LEN, is_secret
from hpcenv.knowledge import network, wrappers
from hpcenv.models import walltime
from hpcenv.profile.schema import Profile
from hpcenv.slurm import sbatch, steps, survive
from hpcenv.utils import modes, redact
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import shell_join, shell_quote

LAUNCHES = ("node", "task", "ray")
#: The --gate word for the bad-node finder (``hpcenv probe nccl --pairs``) before CMD.
PAIRS_GATE = survive.PAIRS_GATE
DEPENDENCIES = ("afterany", "singleton")
#: The most links a chain (and requeues) may have: the job script counts them in bash's
#: integers, and a thousand walltimes is years of a cluster's time.
MAX_CHAIN = 1000

#: Seconds before the walltime at which a chained job's CMD gets SIGUSR1 (checkpoint).
DEFAULT_LEAD_S = 300


@dataclass(frozen=True, kw_only=True)
class CommandJob:
    """What ``hpcenv sbatch PROFILE [options] -- CMD`` asked for."""

    argv: tuple[str, ...]
    nodes: int = 1
    launch: str = "node"  # node | task | ray
    gate: tuple[str, ...] = ()  # probes run before CMD (after preflight)
    preflight: bool = True  # False: no gate at all (--no-gate)
    copy_back: tuple[str, ...] = ()
    chain: int = 1  # links; 1: no chain
    dependency: str = "afterany"
    lead_s: int | None = None  # --signal=B:USR1@lead; default DEFAULT_LEAD_S with a chain
    time: str | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    job_name: str | None = None
    venv: str | None = None  # --env: a venv directory instead of the profile's build
    request: sbatch.Request = sbatch.Request()  # --gpus, --partition, --account, ...
    hang_timeout_s: float | None = None  # --hang-timeout: the watchdog (slurm/watchdog.py)
    requeue_bad: int = 0  # --requeue-bad N: with --gate pairs (slurm/requeue.py)
    #: ``argv`` read once (``job/command.py``): every part of the job asks this one reading
    cmd: command.Command = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cmd", command.read(self.argv))


def _check(spec: CommandJob, profile: Profile) -> None:
    """Every option's value, each error naming the option and the fix."""
    if not spec.argv or not spec.argv[0]:
        raise BadInput("hpcenv sbatch: give the command after '--' (or a TARGET)")
    if spec.nodes < 1:
        raise BadInput(f"--nodes {spec.nodes}: must be at least 1")
    if spec.job_name is not None:
        sbatch.check_job_name(spec.job_name)
    if spec.launch not in LAUNCHES:
        raise BadInput(f"launch {spec.launch!r}: use one of {', '.join(LAUNCHES)}")
    bad = [p for p in spec.gate if p not in registry.NAMES and p != PAIRS_GATE]
    if bad:
        raise BadInput(
            f"--gate {','.join(bad)}: unknown probe; known: {', '.join(registry.NAMES)} "
            f"and {PAIRS_GATE} (the bad-node finder)"
        )
    _check_survival(spec)
    if spec.gate and not spec.preflight:
        raise BadInput("--gate and --no-gate: give one of them")
    if not 1 <= spec.chain <= MAX_CHAIN:
        raise BadInput(f"--chain {spec.chain}: give 1 to {MAX_CHAIN} links")
    if spec.dependency not in DEPENDENCIES:
        raise BadInput(f"--chain-dependency {spec.dependency!r}: use afterany or singleton")
    if spec.time is not None and (problem := walltime.problem(spec.time)):
        raise BadInput(f"--time {spec.time!r} {problem}")
    if spec.cpus_per_task is not None and spec.cpus_per_task < 1:
        raise BadInput(f"--cpus-per-task {spec.cpus_per_task}: must be at least 1")
    if spec.lead_s is not None and spec.lead_s < 1:
        raise BadInput(f"--checkpoint-lead {spec.lead_s}: must be at least 1 second")
    if spec.copy_back and not profile.job.scratch:
        raise BadInput(
            f"--copy-back needs node-local scratch: set [job] scratch in "
            f"{profile.path or profile.name} (TMPDIR of the job)"
        )
    for d in spec.copy_back:
        p = PurePosixPath(d)
        if not d or p.is_absolute() or ".." in p.parts or re.search(r"[\x00-\x1f\x7f]", d):
            raise BadInput(
                f"--copy-back {d!r}: give a relative directory under $TMPDIR without '..' "
                "(it is copied to the same path under the job's working directory)"
            )


def _check_survival(spec: CommandJob) -> None:
    """--gate pairs, --requeue-bad and --hang-timeout."""
    if PAIRS_GATE in spec.gate and spec.nodes < 2:
        raise BadInput(
            f"--gate {PAIRS_GATE} runs allreduces between pairs of nodes: give --nodes 2 or "
            "more (with 2 the pair's check alone, from 3 the finder can name a node)"
        )
    if not 0 <= spec.requeue_bad <= MAX_CHAIN:
        raise BadInput(f"--requeue-bad {spec.requeue_bad}: give 0 to {MAX_CHAIN}")
    if spec.requeue_bad and PAIRS_GATE not in spec.gate:
        raise BadInput(
            f"--requeue-bad needs --gate {PAIRS_GATE} (the bad-node finder names the nodes "
            "to exclude)"
        )
    if spec.hang_timeout_s is not None and spec.hang_timeout_s <= 0:
        raise BadInput(f"--hang-timeout {spec.hang_timeout_s:g}: must be more than 0 seconds")


def _lead(spec: CommandJob, time_limit: str) -> int | None:
    lead = spec.lead_s if spec.lead_s is not None else (DEFAULT_LEAD_S if spec.chain > 1 else None)
    if lead is None:
        return None
    limit = walltime.parse(time_limit) if time_limit else float("inf")
    if lead >= limit:
        raise BadInput(
            f"--checkpoint-lead {lead} s is not shorter than the walltime {time_limit}; "
            "give a shorter lead or a longer --time"
        )
    return lead


def job_name(profile: Profile, spec: CommandJob) -> str:
    """``hpcenv-<profile>-<program>`` (or ``--job-name``): letters, digits, '.', '_', '-'."""
    if spec.job_name:
        return spec.job_name
    program = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.cmd.name)[:40]
    return f"hpcenv-{profile.name}-{program or 'cmd'}"


def _describe(spec: CommandJob, form: containers.Form | None = None) -> str:
    if form is not None and form.from_batch:  # hook: the user's own srun/mpirun
        how = f"once from the batch step (your {form.launcher} spreads it)"
    else:
        how = {
            "node": "once per node (srun)",
            "task": "once per task (srun)",
            "ray": "on the head node of a Ray cluster over the allocation",
        }[spec.launch]
    gate = (
        "no gate"
        if not spec.preflight
        else "gate: preflight" + "".join(f", {p}" for p in spec.gate)
    )
    chain = f"; chained, up to {spec.chain} links" if spec.chain > 1 else ""
    if spec.requeue_bad:
        chain += f"; requeued without bad nodes up to {spec.requeue_bad} times"
    if spec.hang_timeout_s:
        chain += f"; hang watchdog after {spec.hang_timeout_s:g} s of silence"
    return f"{how}; {gate}{chain}"


def _tasks_per_node(profile: Profile, spec: CommandJob) -> int:
    """One task per GPU (two on a CPU node when a multi-rank probe gates the job)."""
    gate = ["nccl" if p == PAIRS_GATE else p for p in spec.gate]
    multi = next((p for p in gate if p in registry.MULTI_RANK), "")
    return sbatch.tasks_per_node(profile, spec.ntasks_per_node, multi, spec.request.gpus)


def per_node(profile: Profile, spec: CommandJob) -> int:
    """Processes a launcher starts on each node: the GPUs the job takes there, else its
    tasks."""
    return sbatch.gpus_per_node(profile, spec.request.gpus) or _tasks_per_node(profile, spec)


def shown_launch(
    profile: Profile,
    spec: CommandJob,
    venv: Path | None = None,
    configured: frozenset[str] = frozenset(),
    cwd: Path = Path("."),
) -> tuple[launchers.Launch, str] | None:
    """What each node's launcher will be given, with node-independent placeholders, and
    the DeepSpeed version read from ``venv`` ("" unknown); None without a launcher run
    once per node."""
    cmd = spec.cmd
    kind = cmd.kind
    if not kind or spec.launch != "node":
        return None
    if kind == "deepspeed":  # read where the command runs: uv run's project venv, else the job's
        environ = {**os.environ, "VIRTUAL_ENV": str(venv)} if venv else dict(os.environ)
        venv = launchers.command_venv(cmd, environ, cwd)
    version = launchers.installed_version(venv, "deepspeed") if kind == "deepspeed" else ""
    shown = launchers.plan(
        cmd,
        launchers.Allocation(
            nodes=spec.nodes, node_rank="<node>", per_node=per_node(profile, spec),
            master_addr="$MASTER_ADDR", master_port="$MASTER_PORT",
            hostfile="<hostfile>" if kind == "deepspeed" else "",
            hosts=tuple(f"<node {i}>" for i in range(spec.nodes)),
        ),
        configured,
        deepspeed=version,
    )  # fmt: skip
    return shown, version


def launcher_lines(
    profile: Profile, spec: CommandJob, log_dir: Path, shown: tuple[launchers.Launch, str] | None
) -> list[str]:
    """For a launcher in CMD: what each node's copy is told (said in the log), the
    hostfile DeepSpeed reads; nothing for other commands."""
    if shown is None:
        return []
    launch, version = shown
    kind = launch.kind
    n = per_node(profile, spec)
    hostfile = f"{shell_quote(str(log_dir))}/hostfile-$SLURM_JOB_ID"
    lines = [
        "",
        f"# --- the launcher: {kind} on every node learns its node rank and the first node",
        "# (python -m hpcenv.job.launchers adds what is missing; options you gave win)",
        f'export HPCENV_LAUNCH_NODES="$nodes" HPCENV_LAUNCH_PER_NODE={n}',
    ]
    if kind == "deepspeed":
        lines += [
            f"export HPCENV_LAUNCH_HOSTFILE={hostfile}",
            f'for host in "${{hosts[@]}}"; do echo "$host slots={n}"; done '
            '> "$HPCENV_LAUNCH_HOSTFILE"',
        ]
    said = launch.describe()
    if kind == "deepspeed":
        said += f" (DeepSpeed {version or 'version unknown here: the node reads it'})"
    return [*lines, f"echo {shell_quote('hpcenv: ' + said)}"]


def render(
    profile: Profile,
    spec: CommandJob,
    *,
    workdir: Path | None = None,
) -> sbatch.Job:
    """The job script running ``spec.argv`` on ``profile``'s cluster."""
    _check(spec, profile)
    launchers.check_fits(spec.cmd, spec.launch, spec.nodes)
    form = containers.read(spec.cmd)  # own srun/mpirun, a container
    containers.check(form, spec.launch)
    cwd = (workdir or Path.cwd()).absolute()
    found, configured = check_launch_config(profile, spec, cwd)
    log_dir = sbatch.logs_dir(profile, cwd)
    name = job_name(profile, spec)
    time_limit = spec.time or profile.slurm.time
    lead = _lead(spec, time_limit)
    extra: list[tuple[str, str | int, str]] = []
    if spec.cpus_per_task:
        extra.append(("cpus-per-task", spec.cpus_per_task, "--cpus-per-task"))
    if lead:
        extra.append(("signal", f"B:USR1@{lead}", "--checkpoint-lead"))
    venv = environment.venv_for(profile, spec.venv, must_exist=False)
    env = environment.for_profile(profile, nodes=spec.nodes, venv=venv, tmpdir=False)
    ref = sbatch.profile_ref(profile)
    hpcenv = [sys.executable, "-m", "hpcenv"]
    shown = shown_launch(profile, spec, venv, configured, cwd)
    dropped = shown[0].dropped if shown else ()
    jax = jax_verdict(profile, spec, venv=venv, cwd=cwd, form=form, values=env.values)
    lines = [
        "#!/bin/bash",
        f"# Rendered by 'hpcenv sbatch' for profile {profile.name}: the command at the end,",
        f"# {_describe(spec, form)}.",
        f"# venv: {_venv_words(venv, spec)}",
        *([f"# launch: {_one_line(form.describe())}"] if form.describe() else []),
        *(f"# launcher: {spec.cmd.kind} without {d}" for d in dropped),
        *(f"# jax: {_one_line(w)}" for w in (jax.says if jax else ())),
        *sbatch.directives(
            profile,
            name=name,
            nodes=spec.nodes,
            ntasks_per_node=_tasks_per_node(profile, spec),
            time=spec.time,
            log_dir=log_dir,
            cwd=cwd,
            extra=extra,
            request=spec.request,
        ),
        "",
        "set -euo pipefail",
        # sbatch gives the job hpcenv's private umask; CMD writes with the user's own
        # (hpcenv's steps in the job set theirs again: utils/modes.py)
        f"umask {modes.user_umask():04o}",
        "export HPCENV_JOB_START=${EPOCHREALTIME:-$(date +%s.%N)}  # for 'the command starts'",
        f"# --- the environment: what 'hpcenv env {profile.name} --nodes {spec.nodes}' prints",
        *environment.batch_lines(env),
    ]
    if form.describe():  # hook: the user's own srun/mpirun, a container
        lines.append(f"echo {shell_quote('hpcenv: ' + form.describe())} >&2")
    if not form.container:
        lines.append('echo "hpcenv: the job uses the venv $VIRTUAL_ENV" >&2')
    if spec.cpus_per_task:  # srun (Slurm >= 22.05) no longer inherits --cpus-per-task
        lines.append('export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"')
    lines += [
        "workdir=$PWD nodes=${SLURM_JOB_NUM_NODES:-1}",
        'mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        '[ "${#hosts[@]}" -gt 0 ] || { echo "hpcenv: scontrol gave no host" >&2; exit 1; }',
        *steps.on_nodes_lines(),
        "",
        "# --- rendezvous on the first node; torchrun reads PET_* (its own options win)",
        'export MASTER_ADDR="${hosts[0]}" MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))',
        'export PET_NNODES="$nodes" PET_RDZV_BACKEND=c10d PET_RDZV_ID="$SLURM_JOB_ID"',
        'export PET_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT"',
        "# torch.distributed's conventions for launchers hpcenv does not know (trainer CLIs",
        "# that start torchrun themselves); NODE_RANK is set on each node as the command starts",
        f'export NNODES="$nodes" GPUS_PER_NODE={per_node(profile, spec)} '
        f"WORLD_SIZE=$((nodes * {per_node(profile, spec)}))",
    ]
    if profile.job.scratch:
        copy = (
            'for d; do if [ -d "$TMPDIR/$d" ]; then mkdir -p -- "$0/$d" && '
            'cp -a -- "$TMPDIR/$d/." "$0/$d/"; fi; done'
        )
        dirs = " ".join(shell_quote(d) for d in spec.copy_back)
        lines += [
            "",
            "# --- scratch: TMPDIR on each node's local disk; at exit the --copy-back",
            "# directories under it go to the same path in the working directory, from",
            "# one node after the other (a scratch that is shared after all cannot race),",
            "# then it is removed",
            f'tmp={shell_quote(profile.job.scratch)}/"$SLURM_JOB_ID"',
            'on_nodes mkdir -p -- "$tmp"',
            "export TMPDIR=$tmp  # after mkdir: slurmstepd falls back to /tmp without it",
            "scratch_end() {",
        ]
        if spec.copy_back:
            lines += [
                '  for host in "${hosts[@]}"; do',
                '    if [ "$nodes" -gt 1 ]; then on=(srun --nodes=1 --ntasks=1 --overlap '
                '--nodelist="$host" --); else on=(); fi',
                f'    "${{on[@]}}" bash -c {shell_quote(copy)} "$workdir" {dirs} ||',
                '      echo "hpcenv: warning: copying back from $TMPDIR on $host failed" >&2',
                "  done",
            ]
        lines += [
            '  on_nodes rm -rf -- "$TMPDIR" || echo "hpcenv: warning: $TMPDIR not removed" >&2',
            "}",
            "trap scratch_end EXIT",
        ]
    own = f'{shell_quote(str(log_dir))}/{shell_quote(name)}-"$SLURM_JOB_ID"'
    if spec.hang_timeout_s or spec.requeue_bad:
        lines += [
            "",
            "# what ended the link if not the command (the watchdog, a requeue): for --wait",
            f"outcome={own}.outcome.json",
        ]
    lines += steps.chain_lines(spec)
    lines += ["", "# --- the command, word for word (secrets as references to your variables)"]
    lines += command_lines(spec.cmd, {**os.environ, **env.secret_values})
    lines += _container_lines(profile, spec, form)  # hook: containers
    lines += _gate_lines(spec, hpcenv, ref, form, sbatch.gpus_per_node(profile, spec.request.gpus))
    lines += survive.pairs_gate_lines(spec, hpcenv, ref, own)
    lines += launcher_lines(profile, spec, log_dir, shown)
    lines += jax_lines(jax)
    lines += [
        "",
        f"# --- the command, {_describe(spec, form).split(';')[0]}, in its own process group:",
        "# SIGUSR1/SIGTERM/SIGINT/SIGHUP sent to this script are passed on to it",
        *_wrap_launcher(spec),
        "cmd_pid=",
        "forward() {",
        "  trapped=1",
        '  [ -z "$cmd_pid" ] || kill -s "$1" -- "-$cmd_pid" 2>/dev/null || true',
        "}",
        'for sig in USR1 TERM INT HUP; do trap "forward $sig" "$sig"; done',
        "now=${EPOCHREALTIME:-$(date +%s.%N)}",
        'after=$(awk -v a="$HPCENV_JOB_START" -v b="$now" \'BEGIN { printf "%.1f", b - a }\')',
        'echo "hpcenv: the command starts (link $link of $HPCENV_CHAIN_MAX), $after s after the '
        'job started"',
        *survive.watchdog_setup(spec, own),
        "set -m  # job control: the command leads a process group of its own",
        *steps.launch_lines(
            spec.launch,
            log_dir,
            from_batch=form.from_batch,
            also_export=containers.node_rank_exports(form),
        ),
        "cmd_pid=$!",
        "set +m",
        *survive.watchdog_start(spec, own),
        "while :; do  # wait returns early when a signal was passed on; wait again",
        "  trapped=0 status=0",
        '  wait "$cmd_pid" || status=$?',
        '  [ "$trapped" = 1 ] || break',
        "done",
        'echo "hpcenv: the command exited with $status"',
        *survive.watchdog_end(spec),
        '[ "$status" -ne 0 ] || end_chain "the command succeeded"',
        'exit "$status"',
        "",
    ]
    return sbatch.Job(
        name=name,
        script="\n".join(lines),
        log_dir=log_dir,
        output_dir=log_dir,
        nodes=spec.nodes,
        venv=_venv_words(venv, spec),
        checks=_checks(profile, spec),
        notes=(
            *([form.describe()] if form.describe() else []),
            f"the job uses the venv {_venv_words(venv, spec)}"
            if not form.container
            else "hpcenv's venv is not used (the command runs in the image)",
            *(
                f"warning: {w}"
                for w in containers.warnings(
                    form, sbatch.gpus_per_node(profile, spec.request.gpus), spec.nodes
                )
            ),
            *(f"warning: {w}" for w in found.warnings),
            *found.notes,
            *(f"the launcher runs without {d}" for d in dropped),
            *(jax.says if jax else ()),
            *(f"warning: {w}" for w in (jax.warnings if jax else ())),
        ),
    )


def jax_verdict(
    profile: Profile,
    spec: CommandJob,
    *,
    venv: Path | None,
    cwd: Path,
    form: containers.Form,
    values: Mapping[str, str],
) -> jax_job.Verdict | None:
    """A JAX job's words and variables (``hpcenv.job.jax_job``), its task layout checked
    (``BadInput``, exit 2); None for another command, one in a container, under Ray or
    spread by the user's own srun/mpirun."""
    if form.container or form.from_batch or spec.launch == "ray":
        return None
    evidence = jax_job.read(spec.cmd, venv, cwd, {**os.environ, **values})
    if evidence is None:
        return None
    layout = jax_job.Layout(
        nodes=spec.nodes,
        tasks_per_node=_tasks_per_node(profile, spec) if spec.launch == "task" else 1,
        gpus_per_node=sbatch.gpus_per_node(profile, spec.request.gpus),
        binds=jax_job.binding_options(spec.request.args),
    )
    return jax_job.decide(evidence, layout)


def jax_lines(jax: jax_job.Verdict | None) -> list[str]:
    """What the job says of JAX in its log, and the variables it sets on the nodes."""
    if jax is None:
        return []
    lines = ["", "# --- jax: jax.distributed.initialize() reads SLURM itself (hpcenv.job.jax_job)"]
    lines += [f"echo {shell_quote('hpcenv: jax: ' + w)}" for w in jax.says]
    lines += [f"echo {shell_quote('hpcenv: warning: jax: ' + w)} >&2" for w in jax.warnings]
    lines += [f"export {name}={shell_quote(value)}" for name, value in jax.env]
    return lines


def _checks(profile: Profile, spec: CommandJob) -> tuple[str, ...]:
    """What the job checks on its nodes before the command (the gate), in order."""
    if not spec.preflight:
        return ()
    gpu = profile.platform.gpu or "the node's GPUs"
    return (
        "the venv exists",
        f"hpcenv preflight on every node, with the command (its launcher config, trainer "
        f"flags and files against {gpu})",
        *(f"probe {p}" for p in spec.gate if p != PAIRS_GATE),
        *(["the bad-node finder (nccl between pairs of nodes)"] if PAIRS_GATE in spec.gate else []),
    )


def _venv_words(venv: Path, spec: CommandJob) -> str:
    """Which venv the job uses, and why that one (one line: no newline from a path)."""
    why = "given by --env or --project" if spec.venv else "the profile's build"
    return _one_line(f"{venv} ({why})")


def _one_line(text: str) -> str:
    """``text`` for a comment of the script: a control character (a newline in a path or an
    image name from the command) as ``?``, so no value of the user's becomes a shell line."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", "?", text)


def check_launch_config(
    profile: Profile, spec: CommandJob, cwd: Path
) -> tuple[launch_config.Findings, frozenset[str]]:
    """The accelerate/DeepSpeed configuration CMD names, judged against this job before
    it waits in the queue (BadInput, exit 2, when it cannot work), and the launcher
    options it gives."""
    job = launch_config.Job(
        nodes=spec.nodes,
        per_node=per_node(profile, spec),
        compute_capability=profile.platform.compute_capability,
        gpu=profile.platform.gpu,
    )
    cfg = launch_config.read(spec.cmd, cwd, os.environ)
    _check_task_wrapper(profile, spec, cfg)
    return launch_config.verdict(cfg, job), launch_config.configured(cfg, spec.nodes)


def _check_task_wrapper(profile: Profile, spec: CommandJob, cfg: launch_config.Configs) -> None:
    """A script whose framework takes its processes from SLURM's tasks (Lightning:
    knowledge/wrappers.toml, passes = "tasks") needs one task per process: --per-task."""
    row = wrappers.by_import(set(cfg.imports))
    if row is None or row.passes != "tasks" or spec.launch != "node":
        return
    n = per_node(profile, spec)
    if spec.nodes * n > 1:
        raise BadInput(
            f"{spec.cmd.script} imports {'/'.join(sorted(cfg.imports & set(row.imports)))}: "
            f"{row.name} takes its world from SLURM's tasks (one process per task, "
            f"SLURM_NTASKS_PER_NODE = its devices), but the job runs it once per node; add "
            f"--per-task ({n} tasks per node) and Trainer(devices={n}, num_nodes={spec.nodes})"
        )


def _with_references(word: str, refs: Sequence[tuple[str, str]]) -> str:
    """``word`` for bash, each secret value in it a ``"${NAME}"`` reference and the rest
    single-quoted around them (adjacent pieces make one word)."""
    for value, name in refs:
        if value in word:
            parts = word.split(value)
            return f'"${{{name}}}"'.join(_with_references(part, refs) for part in parts)
    return shell_quote(word) if word else ""


def command_lines(cmd: command.Command, environ: Mapping[str, str]) -> list[str]:
    """``cmd=(...)``: CMD word for word. A secret's value inside a word (a secret-named
    variable of ``environ``) becomes a reference to that variable, which the job inherits
    (and checks it has): the script, which is printed and kept, never holds the value, and
    masking never has to rewrite what runs. A secret hpcenv cannot refer to (credentials in
    a URL, ``TOKEN=value``) is refused, naming the word."""
    refs = sorted(
        ((value, name) for name, value in environ.items()
         if is_secret(name) and len(value) >= MIN_VALUE_LEN and command.is_name(name)),
        key=lambda vn: len(vn[0]), reverse=True,
    )  # fmt: skip
    words: list[str] = []
    needed: list[str] = []
    for k, word in enumerate(cmd.words):
        used = [n for v, n in refs if v in word]
        needed += [n for n in used if n not in needed]
        words.append(_with_references(word, refs) if used else shell_quote(word))
        if redact.text(words[-1], environ) != words[-1]:
            raise BadInput(
                f"word {k + 1} of the command holds a secret hpcenv cannot refer to (URL "
                "credentials or NAME=value); pass it through an environment variable the job "
                'inherits, e.g. --token "$HF_TOKEN" (single-quoted in your shell)'
            )
    checks = [
        f': "${{{name}:?hpcenv: the command uses {name}; export it before sbatch}}"'
        for name in needed
    ]
    if cmd.assigns_first:  # VAR=value CMD: the variables for CMD, as bash does
        words.insert(0, "env")
    return [*checks, f"cmd=({' '.join(words)})"]


def _wrap_launcher(spec: CommandJob) -> list[str]:
    """A launcher run once per node goes through ``hpcenv.job.launchers`` on each node."""
    kind = spec.cmd.kind
    if not kind or spec.launch != "node":
        return []
    wrapper = shell_join([sys.executable, "-I", "-m", "hpcenv.job.launchers", "--"])
    return [f'cmd=({wrapper} "${{cmd[@]}}")  # each node adds its rank, then execs {kind}']


def _container_lines(profile: Profile, spec: CommandJob, form: containers.Form) -> list[str]:
    """A container's lines (``hpcenv.job.containers``): the job's variables and the host's
    network libraries passed the way its runtime takes them."""
    if not form.container:
        return []
    recipe = network.get(profile.env.recipe) if profile.env.recipe else None
    ofi = profile.platform.nccl_net == "ofi" or (recipe is not None and recipe.nccl_net == "ofi")
    names = containers.passed_names(list(profile.env_for(nodes=spec.nodes)), form)
    shift = 1 if spec.cmd.assigns_first else 0  # command_lines' 'env'
    return [
        *containers.env_lines(form, names, network=ofi),
        *containers.insert_lines(form, names, shift=shift),
    ]


def _gate_lines(
    spec: CommandJob, hpcenv: Sequence[str], ref: str, form: containers.Form, gpus: int = 0
) -> list[str]:
    if not spec.preflight:
        return ["", "# --- no gate (--no-gate)", 'echo "hpcenv: no gate"']
    lines = [
        "",
        "# --- gate: the venv, every node, the network, before the command; the first",
        "# failure ends the job here (and the chain), naming it",
        "gate() {",
        "  local what=$1 rc=0",
        "  shift",
        '  echo "hpcenv gate: $what"',
        '  "$@" || rc=$?',
        '  if [ "$rc" -ne 0 ]; then',
        '    echo "hpcenv: gate failed: $what (exit $rc); the command was not started" >&2',
        '    end_chain "the gate failed"',
        '    exit "$rc"',
        "  fi",
        "}",
        *(
            containers.gate_lines(form, gpus)  # hook: the image's needs instead of the venv
            if form.container
            else [
                'gate "venv $VIRTUAL_ENV (built? hpcenv build)" test -x "$VIRTUAL_ENV/bin/python"'
            ]
        ),
        # every command: its trainer flags, config files and launcher config are checked
        # again against each node's real GPUs (job/preflight.check_launcher_config)
        f'gate "preflight on $nodes node(s)" on_nodes {shell_join([*hpcenv, "preflight", ref])}'
        ' -- "${cmd[@]}"',
    ]
    probes = [p for p in spec.gate if p != PAIRS_GATE]
    if probes:
        probe = sbatch.probe_argv_for(ref, probes, spec.venv, json=False)
        lines.append(f"gate {shell_quote('probes ' + ','.join(probes))} {shell_join(probe)}")
    return lines


__all__ = ["DEPENDENCIES", "LAUNCHES", "CommandJob", "job_name", "render"]
