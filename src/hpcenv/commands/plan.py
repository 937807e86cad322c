"""Show the plan for a profile on a node: Python, torch version/variant/index, packages,
flash-attn action and its build settings, sitecustomize fixes, modules and environment,
each with its reason. Facts come from this host, --facts FILE (recorded on the cluster),
or --declared (the typical node the profile's [platform] section describes)."""

from __future__ import annotations

import argparse

from rich.table import Table

from hpcenv.commands import add_facts_option, add_json_option, print_json
from hpcenv.decide.plan import plan_for
from hpcenv.ui import report

NAME = "plan"
HELP = "show what a build of PROFILE would do on a node, and why"
ORDER = 31


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE", help="profile name or path to a .toml")
    add_facts_option(parser)
    parser.add_argument(
        "--declared",
        action="store_true",
        help="plan for the node the profile's [platform] declares (for a cluster, from anywhere)",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    plan, _ = plan_for(args.profile, args.facts, declared=args.declared)
    if args.json:
        print_json(plan.serialize())
        return 0
    table = Table(
        title=f"plan {plan.profile} ({plan.arch}, Python {plan.python}, digest {plan.digest()})",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("step", style="bold")
    table.add_column("what", overflow="fold")
    table.add_column("why", overflow="fold")
    for step in plan.steps:
        table.add_row(step.kind, step.what, step.why)
    report.console.print(table)
    for w in plan.warnings:
        report.console.print(report.styled(f"warning: {w}", "yellow"))
    return 0
