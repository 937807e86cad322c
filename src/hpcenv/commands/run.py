"""Run CMD (after '--') in the profile's built environment: the environment
'hpcenv env PROFILE' prints, applied (modules loaded through bash when the profile
has any). hpcenv becomes CMD (exec): CMD's exit code is hpcenv's and every signal
sent to hpcenv reaches CMD. 127: CMD not found; 126: not executable."""

from __future__ import annotations

import argparse

from hpcenv.commands.env import add_job_env_options

TAKES_COMMAND = True


def configure(parser: argparse.ArgumentParser, *, with_command: bool = False) -> None:
    parser.usage = "%(prog)s PROFILE [--nodes N] [--env VENV] -- CMD..."
    add_job_env_options(parser)


def run(args: argparse.Namespace) -> int:
    import os

    from hpcenv.job import command, environment
    from hpcenv.profile import schema
    from hpcenv.utils.errors import BadInput

    if not args.command_argv:
        raise BadInput(f"hpcenv run: give the command after '--': hpcenv run {args.profile} -- CMD")
    prof = schema.load(args.profile)
    nodes = args.nodes if args.nodes is not None else environment.default_nodes(os.environ)
    venv = environment.venv_for(prof, args.env)
    job = environment.for_profile(prof, nodes=nodes, venv=venv)
    environment.make_tmpdir(job)
    argv = list(args.command_argv)
    if command.read(argv).assigns_first:  # VAR=value CMD: the variables for CMD, as bash does
        argv.insert(0, "env")
    environment.exec_command(job, argv, environment.caller_environ())
