"""Render the sbatch script that runs a probe (or all of them, or a build), or your own
command after '--', on the profile's cluster: its partition, GPU request syntax,
modules, environment and scratch. Prints the script; --submit writes it next to the
job logs (creating the log directory first) and submits it; --wait then waits for the
job and prints the report it wrote (with --json, stdout holds that JSON report and
nothing else).

With '-- CMD...' the job runs CMD (its words kept as given) after a gate (hpcenv preflight
on every node, then the --gate probes): once per node through srun, per task (--per-task),
or on the head node of a Ray cluster over the allocation (--ray); a CMD that is itself
srun/mpirun/mpiexec runs once from the batch step (never nested in hpcenv's srun); a CMD
in a container (pyxis, apptainer, podman, enroot) is gated on its runtime and image
instead of the venv and gets the job's variables inside; TMPDIR on node-local scratch with
--copy-back directories; --chain N resubmits it (up to N links) until CMD exits 0; --gate
pairs --requeue-bad N resubmits a link without the nodes the bad-node finder names;
--hang-timeout dumps a silent CMD's Python stacks and ends the link
(hpcenv.slurm.survive). A JAX job (python running a script that imports jax or calls
jax.distributed.initialize) is told in its header and log what initialize() reads of
SLURM, one task per node gets JAX_LOCAL_DEVICE_IDS for all its GPUs, and tasks per node
other than 1 or the GPUs per node exit 2 before the queue. --wait then waits for the
first link (following it to the job it was requeued as) and exits with CMD's code (10: the
watchdog ended it, 11: the bad-node finder named nodes and --requeue-bad was used up).
When the job fails, --wait also says why (what 'hpcenv explain JOBID' says of its logs:
the cause, the first failing line with its rank and node, the fix) and writes it into the
job's report.json as "explanation" (a job of your own command gets a report.json holding
it, which --json prints)."""

from __future__ import annotations

import argparse
import os
import pwd
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hpcenv.commands import add_html_option, print_json, print_text
from hpcenv.models import walltime
from hpcenv.profile import schema
from hpcenv.slurm import sbatch
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, HpcenvError, JobFailed

TAKES_COMMAND = True
T = TypeVar("T")

#: Options only a job running your command (``-- CMD``) takes.
COMMAND_OPTIONS = (
    "per_task", "ray", "gate", "no_gate", "copy_back", "chain", "chain_dependency",
    "checkpoint_lead", "cpus_per_task", "job_name", "hang_timeout", "requeue_bad",
)  # fmt: skip
#: Options only a TARGET takes.
TARGET_OPTIONS = ("pairs", "output_dir")


def configure(parser: argparse.ArgumentParser, *, with_command: bool = False) -> None:
    parser.usage = (
        "%(prog)s PROFILE TARGET [--nodes N] [options]\n"
        "       %(prog)s PROFILE [--nodes N] [options] -- CMD..."
    )
    parser.add_argument("profile", help="profile name (envs/<name>.toml) or path")
    parser.add_argument(
        "target",
        nargs="?" if with_command else None,
        help=f"what the job runs: {', '.join(sbatch.TARGETS)} ('probe': all); or give your "
        "command after '--' instead",
    )
    parser.add_argument("--nodes", type=int, default=1, help="nodes to ask for (default 1)")
    parser.add_argument(
        "--ntasks-per-node",
        type=int,
        default=None,
        help="tasks per node (default: one per GPU, or 1 on CPU profiles)",
    )
    parser.add_argument(
        "--time",
        default=None,
        help="walltime (SLURM's forms, e.g. 1-00:00:00); default: [slurm] time, or "
        "[slurm] build_time for a build",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="where the job writes <jobid>/report.json (default: job.log_dir)",
    )
    parser.add_argument(
        "--env",
        default=None,
        help="environment the job uses (default: the profile's built venv)",
    )
    parser.add_argument(
        "--project",
        default=None,
        metavar="DIR",
        help="the job uses the project's venv, as 'hpcenv build PROFILE --project DIR' "
        "made it (venvs/<profile>-<project>)",
    )
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="with target nccl and --nodes 2+: the bad-node finder (hpcenv probe nccl --pairs); "
        "the report lists the nodes to exclude",
    )
    own = parser.add_argument_group("your command (after --)")
    how = own.add_mutually_exclusive_group()
    how.add_argument("--per-task", action="store_true", help="run CMD once per task (srun)")
    how.add_argument(
        "--ray",
        action="store_true",
        help="start Ray over the allocation (every node's IP pinned, --num-cpus what the job "
        "asked for) and run CMD on the head node with RAY_ADDRESS set",
    )
    gate = own.add_mutually_exclusive_group()
    gate.add_argument(
        "--gate",
        default="",
        metavar="PROBE,...",
        help="probes to pass before CMD starts, after hpcenv preflight (e.g. nccl,torch); "
        "'pairs': the bad-node finder (probe nccl --pairs) over the allocation, --nodes 2+",
    )
    gate.add_argument("--no-gate", action="store_true", help="start CMD without any check")
    own.add_argument(
        "--copy-back",
        action="append",
        default=[],
        metavar="DIR",
        help="copy $TMPDIR/DIR to DIR in the working directory at the end (repeatable)",
    )
    own.add_argument(
        "--chain",
        type=int,
        default=1,
        metavar="N",
        help="resubmit the job until CMD exits 0, at most N links, 1000 at most "
        "(HPCENV_CHAIN_LINK)",
    )
    own.add_argument(
        "--chain-dependency",
        choices=("afterany", "singleton"),
        default="afterany",
        help="how the next link waits for this one (default afterany:<job id>)",
    )
    own.add_argument(
        "--checkpoint-lead",
        type=int,
        default=None,
        metavar="S",
        help="send CMD SIGUSR1 S seconds before the walltime (default 300 with --chain)",
    )
    own.add_argument(
        "--requeue-bad",
        type=int,
        default=0,
        metavar="N",
        help="with --gate pairs: when the finder names nodes, resubmit the link without them "
        "(--exclude, kept for the rest of the chain), at most N times (exit 11)",
    )
    own.add_argument(
        "--hang-timeout",
        default=None,
        metavar="DURATION",
        help="when CMD prints nothing for DURATION (90s, 10m, 1h; 5 s to 366 days; or does "
        "not touch "
        "$HPCENV_HEARTBEAT once it has), dump its Python stacks on every node into the log "
        "(py-spy), send SIGUSR1, end the link (exit 10); --chain goes on",
    )
    own.add_argument("--cpus-per-task", type=int, default=None, metavar="N")
    own.add_argument(
        "--job-name",
        default=None,
        metavar="NAME",
        help="one file name (no '/', '%%', '\\'): it names the job's script and logs",
    )
    ask = parser.add_argument_group("what the job asks SLURM for")
    ask.add_argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="GPUs per node, in the profile's request syntax (default: the whole node); "
        "tasks per node and the launcher's processes follow",
    )
    for option, what in sbatch.PASSTHROUGH:
        ask.add_argument(f"--{option}", default=None, metavar="VALUE", help=what)
    ask.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="any other sbatch option, written as given (repeatable), e.g. "
        "--sbatch-arg=--exclusive",
    )
    parser.add_argument("--submit", action="store_true", help="submit with sbatch")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="submit, wait for the job and print its report (time queued is not bounded; "
        "time running is, by the walltime + 10 min)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="stdout is JSON only (progress goes to stderr): the rendered job (script, venv, "
        "checks, notes, job_id once submitted); with --wait the job's report (your own "
        'command\'s: the job under "job", its state, and why it failed)',
    )
    add_html_option(parser, "with --wait: ")


def request_of(args: argparse.Namespace) -> sbatch.Request:
    """The GPUs and sbatch options given on the command line."""
    options = tuple(
        (option, value)
        for option, _ in sbatch.PASSTHROUGH
        if (value := getattr(args, option.replace("-", "_"))) is not None
    )
    return sbatch.Request(gpus=args.gpus, options=options, args=tuple(args.sbatch_arg))


def _venv(args: argparse.Namespace, prof: schema.Profile) -> str | None:
    """The venv the job uses: --env, the project's build (--project), else the profile's."""
    if args.project is None:
        return args.env  # type: ignore[no-any-return]
    if args.env is not None:
        raise BadInput("--env and --project both name the job's venv; give one of them")
    from hpcenv.commands.build import project_request
    from hpcenv.project.request import environment_name
    from hpcenv.project.uv_lock import DEFAULT_SELECTION
    from hpcenv.utils import paths

    request = project_request(args.project, DEFAULT_SELECTION)
    return str(paths.built_venv(environment_name(prof.name, request)))


def _render(args: argparse.Namespace, prof: schema.Profile) -> sbatch.Job:
    argv = args.command_argv
    args.env = _venv(args, prof)
    defaults = configure_defaults()
    request = request_of(args)
    if argv is not None:
        if args.target is not None:
            raise BadInput(f"give a TARGET ({args.target!r}) or a command after '--', not both")
        _refuse_given(args, defaults, TARGET_OPTIONS, "only for a TARGET, not your own command")
        from hpcenv.job import render as job

        spec = job.CommandJob(
            argv=tuple(argv),
            nodes=args.nodes,
            launch="ray" if args.ray else "task" if args.per_task else "node",
            gate=tuple(p for p in args.gate.split(",") if p),
            preflight=not args.no_gate,
            copy_back=tuple(args.copy_back),
            chain=args.chain,
            dependency=args.chain_dependency,
            lead_s=args.checkpoint_lead,
            time=args.time,
            ntasks_per_node=args.ntasks_per_node,
            cpus_per_task=args.cpus_per_task,
            job_name=args.job_name,
            venv=args.env,
            request=request,
            hang_timeout_s=_duration(args.hang_timeout),
            requeue_bad=args.requeue_bad,
        )
        return job.render(prof, spec)
    _refuse_given(
        args, defaults, COMMAND_OPTIONS, "only for your own command (after '--'), not a TARGET"
    )
    if args.time is not None and (problem := walltime.problem(args.time)):
        raise BadInput(f"--time {args.time!r} {problem}")
    from hpcenv.job import targets

    return targets.render(
        prof,
        args.target,
        nodes=args.nodes,
        ntasks_per_node=args.ntasks_per_node,
        output_dir=args.output_dir,
        venv=args.env,
        pairs=args.pairs,
        time_limit=args.time,
        request=request,
    )


def _duration(text: str | None) -> float | None:
    if text is None:
        return None
    from hpcenv.slurm import watchdog

    try:
        return watchdog.parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"--hang-timeout {text!r} {exc}") from None


def _refuse_given(
    args: argparse.Namespace, defaults: dict[str, object], options: tuple[str, ...], why: str
) -> None:
    """``BadInput`` naming those of ``options`` given (not at their default): ``why``."""
    given = [o for o in options if getattr(args, o) != defaults[o]]
    if given:
        raise BadInput(f"{', '.join('--' + o.replace('_', '-') for o in given)}: {why}")


def configure_defaults() -> dict[str, object]:
    """Every option's default (to tell which ones were given)."""
    parser = argparse.ArgumentParser()
    configure(parser)
    return vars(parser.parse_args(["profile", "target"]))


def _check_html(args: argparse.Namespace) -> None:
    """``--html`` writes the finished job's report: with ``--wait``, to a path it can write."""
    if args.html and not args.wait:
        raise BadInput("--html writes the finished job's report: use it with --wait")
    if args.html:
        from hpcenv.ui import html_report

        html_report.check_path(Path(args.html))


def run(args: argparse.Namespace) -> int:
    _check_html(args)
    prof = schema.load(args.profile)
    job = _render(args, prof)
    for note in job.notes:
        print_text(f"hpcenv sbatch: {note}\n", err=True)
    own = args.command_argv is not None
    if not (args.submit or args.wait):  # --wait implies --submit
        if args.json:
            print_json(job.as_json())
        else:
            print_text(job.script)
        return 0
    script = sbatch.write(job)
    started = time.monotonic()
    # Secrets are not in the script: sbatch hands its environment to the job.
    env = {**os.environ, **sbatch.secret_env(prof, nodes=args.nodes)}
    for carried in ("HPCENV_EXCLUDE", "HPCENV_REQUEUE"):  # a chain's own, never the shell's
        env.pop(carried, None)
    job_id = sbatch.submit(script, env=env, text=job.script)  # the script on stdin
    # --json keeps stdout for the report alone
    print_text(f"submitted job {job_id} ({script})\n", err=args.json)
    if not args.wait:
        if args.json:
            print_json(job.as_json(job_id))
        return 0
    # The bound is the job's own time limit (plus slack), counted only while it runs:
    # a busy queue may hold it PENDING for hours, which is not a reason to give up.
    limit = args.time or (prof.slurm.build_time if args.target == "build" else prof.slurm.time)
    timeout = walltime.seconds(limit or "24:00:00") + 600
    state = _wait(job, job_id, timeout, started)
    if own:
        return _own_outcome(
            job,
            job_id,
            state,
            timeout,
            started,
            as_json=args.json,
            net=prof.platform.nccl_net,
            html=args.html,
            prof=prof,
        )
    _, err = job.log_paths(job_id)
    report = _ignoring(sbatch.read_report, job, job_id)
    if not state.startswith("COMPLETED") and not isinstance(report, str):
        report = _explained(job, job_id, state, prof.platform.nccl_net) or report
    if isinstance(report, dict):
        _html(args.html, report, job_id, prof)
        print_json(report)
        excluded = report.get("exclude")
        if excluded and isinstance(excluded, list):  # the bad-node finder named some
            print_text(f"exclude these nodes: --exclude={','.join(map(str, excluded))}\n", err=True)
    elif report:
        print_text(report)
    else:
        print_text("\n".join(_tail(err)) + "\n", err=True)
    failed = sbatch.outcome(job_id, args.target, state, report, log=err)
    if failed is not None:
        raise failed
    return 0


def _html(
    html: str | None, report: dict[str, object], job_id: str, prof: schema.Profile | None
) -> None:
    """``--html FILE`` with ``--wait``: the job's report as one HTML page."""
    from hpcenv.commands import probe

    probe.write_html(html, dict(report), title=f"hpcenv job {job_id}", profile=prof)


def _ignoring(read: Callable[..., T], *args: Any, **kw: Any) -> T | None:
    """What ``read`` reads back from the job's directories, or None when the reading rule
    refused it (``fsio.read_yours``): said in one line, and the job's own state decides."""
    try:
        return read(*args, **kw)
    except BadInput as exc:
        print_text(f"hpcenv: {exc} (ignored)\n", err=True)
        return None


def _tail(path: Path, lines: int = 20) -> list[str]:
    """The last lines of the job's log, when it is the job's (the reading rule)."""
    text = _ignoring(fsio.read_tail, path, 64 << 10, yours=True) or ""
    return text.splitlines()[-lines:]


def _wait(job: sbatch.Job, job_id: str, timeout: float, started: float) -> str:
    state = sbatch.wait(job_id, timeout=timeout)
    out, _ = job.log_paths(job_id)
    print_text(
        f"job {job_id} ended {state} after {time.monotonic() - started:.1f} s; logs: {out}\n",
        err=True,
    )
    return state


def _explained(job: sbatch.Job, job_id: str, state: str, net: str) -> dict[str, object] | None:
    """Why the job failed (``hpcenv explain`` of its logs), said on stderr and kept in
    its report as ``explanation``; None when its logs cannot be read."""
    from hpcenv.slurm import failure

    logs = [p for p in job.log_paths(job_id) if p.is_file()]
    try:
        found = failure.explain_job(logs, job.report_path(job_id), expect_net=net)
        report = failure.record(job.report_path(job_id), found, job_id=job_id, state=state)
    except HpcenvError as exc:
        print_text(f"hpcenv: could not explain job {job_id}: {exc}\n", err=True)
        return None
    print_text(
        f"hpcenv: why job {job_id} failed (hpcenv explain {job_id}):\n{found.text()}", err=True
    )
    return report


def _follow(new_job: str | None, followed: set[str]) -> str | None:
    """``new_job`` when ``--wait`` may follow a requeue to it: not a job already followed
    (outcome files naming each other), and one SLURM says is yours (an outcome file only
    names a job; someone else's COMPLETED job says nothing of yours)."""
    if new_job is None:
        return None
    if new_job in followed:
        print_text(f"hpcenv: job {new_job} was followed already (a cycle); not again\n", err=True)
        return None
    me = pwd.getpwuid(os.geteuid()).pw_name
    owner = sbatch.job_owner(new_job)
    if owner != me:
        whose = f"belongs to {owner}" if owner else "is unknown to SLURM"
        print_text(f"hpcenv: job {new_job} {whose}, not to you ({me}); not followed\n", err=True)
        return None
    return new_job


def _own_outcome(
    job: sbatch.Job,
    job_id: str,
    state: str,
    timeout: float,
    started: float,
    *,
    as_json: bool,
    net: str,
    html: str | None = None,
    prof: schema.Profile | None = None,
) -> int:
    """Your command's job: 0 when it completed, its exit code when it failed (that of
    the first link of a chain), exit 9 when SLURM ended it (timeout, cancel, node),
    10 when the hang watchdog ended it, 11 when the bad-node gate ended it naming nodes
    with its requeues used up (what the job wrote in its outcome file). A link the gate
    requeued without the bad nodes is followed: the answer is the new job's."""
    from hpcenv.slurm import survive

    followed = {job_id}
    outcome = None
    while not state.startswith("COMPLETED"):
        outcome = _ignoring(survive.load_outcome, job.outcome_path(job_id))
        new_job = _follow(survive.requeued_to(outcome), followed)
        if new_job is None:
            break
        note = survive.outcome_error(outcome, job_id)
        print_text(f"hpcenv: {note}; following job {new_job}\n", err=True)
        followed.add(new_job)
        job_id = new_job
        state = _wait(job, job_id, timeout, started)
    if state.startswith("COMPLETED"):
        if as_json:
            print_json({"job": job.as_json(job_id), "state": state})
        return 0
    _, err = job.log_paths(job_id)
    print_text("\n".join(_tail(err)) + "\n", err=True)
    report = _explained(job, job_id, state, net)
    if report and html:
        _html(html, report, job_id, prof)
    if as_json:  # the report (why it failed) with the job it is about
        print_json({**(report or {}), "job": job.as_json(job_id), "state": state})
    if (why := survive.outcome_error(outcome, job_id)) is not None:
        raise why
    code = sbatch.exit_code(job_id) if state.startswith("FAILED") else None
    if code:
        print_text(f"hpcenv: job {job_id} failed with exit code {code}; see {err}\n", err=True)
        return code
    raise JobFailed(f"job {job_id} ended {state}; see {err}")
