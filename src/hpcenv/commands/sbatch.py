"""Render the sbatch script that runs a probe (or all of them, or a build) on the
profile's cluster: its partition, GPU request syntax, modules, environment and
scratch. Prints the script; --submit writes it next to the job logs (creating the
log directory first) and submits it; --wait then waits for the job and prints
the report it wrote (with --json, stdout holds that JSON report and nothing else)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from hpcenv import fsio, profile
from hpcenv.commands import print_json, print_text
from hpcenv.slurm import sbatch, walltime

NAME = "sbatch"
HELP = "render (and --submit) the sbatch script running a probe or build on a cluster"
ORDER = 60


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", help="profile name (envs/<name>.toml) or path")
    parser.add_argument(
        "target", help=f"what the job runs: {', '.join(sbatch.TARGETS)} ('probe': all)"
    )
    parser.add_argument("--nodes", type=int, default=1, help="nodes to ask for (default 1)")
    parser.add_argument(
        "--ntasks-per-node",
        type=int,
        default=None,
        help="tasks per node (default: one per GPU, or 1 on CPU profiles)",
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
        help="environment the probes run in (default: the profile's built venv)",
    )
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="with target nccl and --nodes 2+: the bad-node finder (hpcenv probe nccl --pairs); "
        "the report lists the nodes to exclude",
    )
    parser.add_argument("--submit", action="store_true", help="submit with sbatch")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="submit, wait for the job and print its report (time queued is not bounded; "
        "time running is, by [slurm] time + 10 min)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="with --wait: stdout is the job's JSON report only (progress goes to stderr)",
    )


def run(args: argparse.Namespace) -> int:
    prof = profile.load(args.profile)
    job = sbatch.render(
        prof,
        args.target,
        nodes=args.nodes,
        ntasks_per_node=args.ntasks_per_node,
        output_dir=args.output_dir,
        venv=args.env,
        pairs=args.pairs,
    )
    if not (args.submit or args.wait):  # --wait implies --submit
        print_text(job.script)
        return 0
    script = sbatch.write(job)
    started = time.monotonic()
    # Secrets are not in the script: sbatch hands its environment to the job.
    env = {**os.environ, **sbatch.secret_env(prof, nodes=args.nodes)}
    job_id = sbatch.submit(script, env=env)
    # --json keeps stdout for the report alone
    print_text(f"submitted job {job_id} ({script})\n", err=args.json)
    if not args.wait:
        return 0
    # The bound is the job's own time limit (plus slack), counted only while it runs:
    # a busy queue may hold it PENDING for hours, which is not a reason to give up.
    state = sbatch.wait(job_id, timeout=walltime.seconds(prof.slurm.time or "24:00:00") + 600)
    report = sbatch.read_report(job, job_id)
    out, err = job.log_paths(job_id)
    print_text(
        f"job {job_id} ended {state} after {time.monotonic() - started:.1f} s; logs: {out}\n",
        err=True,
    )
    if isinstance(report, dict):
        print_json(report)
        excluded = report.get("exclude")
        if excluded and isinstance(excluded, list):  # the bad-node finder named some
            print_text(f"exclude these nodes: --exclude={','.join(map(str, excluded))}\n", err=True)
    elif report:
        print_text(report)
    else:
        tail = fsio.read_tail(err, 64 << 10).splitlines()[-20:]
        print_text("\n".join(tail) + "\n", err=True)
    failed = sbatch.outcome(job_id, args.target, state, report, log=err)
    if failed is not None:
        raise failed
    return 0
