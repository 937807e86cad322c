"""Show the plan for a profile on a node: Python, torch version/variant/index, packages,
flash-attn action and its build settings, sitecustomize fixes, modules and environment,
each with its reason. Facts come from this host, --facts FILE (recorded on the cluster),
or --declared (the typical node the profile's [platform] section describes). With
--project PATH also the project's install set for that node (resolved, nothing installed):
every package as name==version and each change with its reason. The project is read as
data: its code never runs (a setup.py or build backend that computes its requirements is
named; --allow-build lets uv run it in a copy) and nothing outside it is read."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hpcenv.commands import (
    add_facts_option,
    add_json_option,
    add_project_python,
    add_selection_options,
    print_json,
    selection_of,
)
from hpcenv.commands._inputs import plan_for

if TYPE_CHECKING:
    from hpcenv.models.plan import Plan


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE", help="profile name or path to a .toml")
    add_facts_option(parser)
    parser.add_argument(
        "--declared",
        action="store_true",
        help="plan for the node the profile's [platform] declares (for a cluster, from anywhere)",
    )
    add_project_options(parser)
    add_json_option(parser)


def add_project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project",
        metavar="PATH",
        help="also resolve this project for the node (its uv.lock, or a requirements file, "
        "pyproject.toml, setup.py or environment.yml): exactly what 'build --project' installs",
    )
    add_selection_options(parser, "--project:")
    add_project_python(parser)
    parser.add_argument(
        "--with-profile-packages",
        action="store_true",
        help="--project: add the profile's [packages] install to the project",
    )
    parser.add_argument(
        "--allow-build",
        action="store_true",
        help="--project: let uv run a setup.py or build backend that computes its "
        "requirements (in a copy of the project); without it the project's code never runs",
    )


def project_json(args: argparse.Namespace, plan: Plan, facts: Any) -> dict[str, Any] | None:
    """``--project``: the project's set for the node (``install_set.project_plan``); the build
    and project modules are imported only then (``plan PROFILE`` alone stays fast)."""
    if not args.project:
        chosen = args.extra or args.all_extras or args.group or args.no_default_groups
        if chosen or args.with_profile_packages or args.allow_build or args.python:
            from hpcenv.utils.errors import BadInput

            raise BadInput(
                "--python, --extra, --group, --no-default-groups, --with-profile-packages "
                "and --allow-build go with --project PATH"
            )
        return None
    from hpcenv.commands.build import project_request
    from hpcenv.project import install_set, model

    selection = selection_of(args)
    request = project_request(
        args.project, selection, None, args.with_profile_packages, args.python
    )
    on_node = model.on_node(request, plan, facts)
    wanted, _, install = install_set.project_plan(
        request, plan, facts, allow_build=args.allow_build, offline_ok=True,
        wanted=on_node.install_set,
    )  # fmt: skip
    return {
        "directory": str(request.directory),
        "selection": wanted.selection,
        "python": wanted.python.version,
        "python_why": wanted.python.why,
        "torch_before": wanted.torch_before,
        "torch_after": wanted.torch_after,
        "variant": wanted.variant,
        "resolved": bool(install),
        "install": install,
        "changes": [
            {"name": c.name, "before": c.before, "after": c.after, "why": c.why}
            for c in wanted.changes
        ],
        "warnings": list(wanted.warnings),
        # the one model, as data: the torch decision, companions, GPU verdicts, unknowns
        "model": on_node.serialize(),
    }


def run(args: argparse.Namespace) -> int:
    plan, facts = plan_for(
        args.profile, args.facts, declared=args.declared, project=bool(args.project)
    )
    project = project_json(args, plan, facts)
    if args.json:
        data = plan.serialize()
        if project is not None:
            data["project"] = project
        print_json(data)
        return 0
    print_plan(plan)
    if project is not None:
        print_project(project)
    return 0


def print_plan(plan: Plan) -> None:
    from rich.table import Table

    from hpcenv.ui import report

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


def print_project(project: dict[str, Any]) -> None:
    from rich.table import Table

    from hpcenv.ui import report

    table = Table(
        title=f"project {project['directory']}: {project['selection']}, Python "
        f"{project['python']} ({project['python_why']})",
        title_justify="left",
        show_lines=False,
    )
    table.add_column("package", style="bold")
    table.add_column("installed", overflow="fold")
    table.add_column("why", overflow="fold")
    changes = {c["name"]: c for c in project["changes"]}
    for line in project["install"]:
        name = line.split("==", 1)[0].split(" @ ", 1)[0].strip()
        change = changes.pop(name, None) or changes.pop(name.lower().replace("_", "-"), None)
        table.add_row(name, line, change["why"] if change else "")
    for name, change in changes.items():
        table.add_row(name, change["after"] or "left out", change["why"])
    report.console.print(table)
    for w in project["warnings"]:
        report.console.print(report.styled(f"warning: {w}", "yellow"))
