"""Say which torch build a resolved lock (uv.lock, or a requirements file from 'uv pip
compile') or an installed venv holds - local label, else the nvidia-cuda-runtime version
it pulls, else CPU - and whether this node (or --facts FILE) can run it, with the fix.
Exit code 3 when it cannot (or when it is CPU-only on a GPU node), 0 when it can."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from hpcenv import audit, facts, report
from hpcenv.commands import add_facts_option, add_json_option, print_json
from hpcenv.errors import NoCompatibleBuild

NAME = "audit"
HELP = "check which torch build a lock or venv holds and whether this node can run it"
ORDER = 32


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="LOCK_OR_VENV", help="uv.lock, requirements, or venv")
    add_facts_option(parser)
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    found = facts.for_args(args.facts)
    result = audit.audit(args.target, found)
    if args.json:
        print_json(result.to_json())
    else:
        table = Table(
            title=f"audit {result.source} ({result.kind})", show_header=False, title_justify="left"
        )
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        table.add_row("torch", Text(f"{result.torch_version}: {result.build}"))
        table.add_row("evidence", Text(result.evidence))
        table.add_row("verdict", Text(result.message, style="green" if result.ok else "red"))
        if result.fix:
            table.add_row("fix", Text(result.fix))
        for w in result.warnings:
            table.add_row("warning", Text(w, style="yellow"))
        report.console.print(table)
    if not result.ok:
        fix = f"; fix: {result.fix}" if result.fix else ""
        raise NoCompatibleBuild(f"{result.message}{fix}")
    return 0
