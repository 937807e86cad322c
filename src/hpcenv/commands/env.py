"""Print the environment a job needs on the profile's cluster: 'module load' lines, then
export lines for eval or source (shell-quoted), or JSON with --json. The venv's
activation, the profile's variables (the multi-node ones only for --nodes > 1), TMPDIR
on the node-local scratch, the build's fixes. A secret-named variable is never printed:
its line takes the value from the caller's environment (a value the profile gives it is
refused, as 'run' refuses it). Use it as
eval "$(hpcenv env PROFILE)"; 'hpcenv run PROFILE -- CMD' gives CMD the same."""

from __future__ import annotations

import argparse
import os

from hpcenv.commands import add_json_option, print_json, print_text


def add_job_env_options(parser: argparse.ArgumentParser) -> None:
    """Options ``env`` and ``run`` share (declared once)."""
    parser.add_argument("profile", help="profile name (envs/<name>.toml) or path")
    parser.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="nodes the job spans: multi-node variables only when > 1 "
        "(default: SLURM_JOB_NUM_NODES inside a job, else 1)",
    )
    parser.add_argument(
        "--env",
        metavar="VENV",
        default=None,
        help="a venv directory to activate instead of the profile's built one",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    add_job_env_options(parser)
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.job import environment
    from hpcenv.profile import schema

    prof = schema.load(args.profile)
    nodes = args.nodes if args.nodes is not None else environment.default_nodes(os.environ)
    venv = environment.venv_for(prof, args.env)
    job = environment.for_profile(prof, nodes=nodes, venv=venv)
    environment.check_secrets(job, os.environ)  # the rule `run` applies: they never disagree
    if args.json:
        print_json(job.to_json())
        return 0
    # the profile's name is letters, digits, '.', '_' and '-': safe on a comment line
    fixes = ", ".join(job.fixes) or "none"
    head = f"# hpcenv env: {prof.name} on {nodes} node(s); fixes in the venv: {fixes}"
    print_text("\n".join([head, *environment.shell_lines(job)]) + "\n")
    return 0
