"""Check a job's node before the long run: CUDA_VISIBLE_DEVICES against the
allocation, GPUs visible against allocated, scratch on local storage with enough
free space, the log directory, loaded modules, GPU memory and uncorrected ECC
errors. Exits 8 when a check fails. With --facts FILE the node checks read the
recorded facts (and not this shell's environment). With '-- CMD' the accelerate or
DeepSpeed config CMD names is checked too, against this node's GPUs and allocation (the
gate of 'hpcenv sbatch -- CMD' passes its command)."""

from __future__ import annotations

import argparse

from rich.table import Table

from hpcenv.commands import add_facts_option, add_json_option, print_json
from hpcenv.facts import collect
from hpcenv.job import preflight
from hpcenv.kit.status import Status
from hpcenv.profile import schema
from hpcenv.ui import report
from hpcenv.utils.errors import PreflightFailed

TAKES_COMMAND = True

STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.SKIP: "yellow"}


def configure(parser: argparse.ArgumentParser, *, with_command: bool = False) -> None:
    parser.usage = "%(prog)s PROFILE [--facts FILE] [--json] [-- CMD...]"
    parser.add_argument("profile", help="profile name (envs/<name>.toml) or path")
    add_facts_option(parser)
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    prof = schema.load(args.profile)
    found = collect.for_args(args.facts)
    ctx = preflight.context(prof, found, {} if args.facts else None)
    checks = preflight.run(ctx, args.command_argv)
    overall = preflight.status(checks)
    if args.json:
        print_json(
            {
                "profile": prof.name,
                "host": found.hostname,
                "status": overall.value,
                "checks": [c.serialize() for c in checks],
            }
        )
    else:
        table = Table(title=f"preflight: {prof.name} on {found.hostname}", title_justify="left")
        for col in ("check", "status", "reason", "fix"):
            table.add_column(col)
        for c in checks:
            table.add_row(c.name, report.styled(c.status.value, STYLE[c.status]), c.reason, c.fix)
        report.console.print(table)
    failed = [c.name for c in checks if c.status is Status.FAIL]
    if failed:
        raise PreflightFailed(f"preflight failed: {', '.join(failed)} (see the fix column)")
    return 0
