"""Build a profile's environment with uv: lock, new venv beside the current one, sync,
flash-attn, fixes, import probe, then an atomic switch of ``venvs/<profile>``.

An unchanged rebuild does nothing. With ``--project PATH`` the project's own
``uv.lock`` is installed the way ``uv sync`` would (``--extra``, ``--group``,
``--no-default-groups``) with torch's build swapped for the node's variant of the same
version, resolved once into ``venvs/<profile>-<project>`` (or ``--name``); the
project's files are never modified.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from hpcenv.build import builder as build
from hpcenv.commands import (
    add_facts_option,
    add_json_option,
    add_selection_options,
    print_json,
    selection_of,
    wait_seconds,
)
from hpcenv.decide.plan import plan_for
from hpcenv.ui import report
from hpcenv.utils.errors import BadInput

NAME = "build"
HELP = "build (or update) a profile's environment; no-op when nothing changed"
ORDER = 41


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE")
    add_facts_option(parser)
    parser.add_argument(
        "--project",
        metavar="PATH",
        help="install this uv project (its uv.lock, as 'uv sync' would) with the torch build "
        "this node can run, into venvs/<profile>-<project>; the project's files are not touched",
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        help="--project: the environment's name (default <profile>-<project>)",
    )
    add_selection_options(parser, "--project:")
    parser.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    parser.add_argument(
        "--wait",
        type=wait_seconds,
        metavar="SECONDS",
        help="how long to wait for another build of the same environment "
        "(default: HPCENV_LOCK_TIMEOUT or 900)",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.build import swap
    from hpcenv.project import uv_lock as uvlock

    project = None
    selection = selection_of(args)
    if args.project:
        where = Path(args.project).absolute()
        if not (where / "pyproject.toml").is_file():
            raise BadInput(f"--project {args.project}: no pyproject.toml there")
        project = swap.ProjectRequest(directory=where, selection=selection, name=args.name)
    elif args.name or selection != uvlock.DEFAULT_SELECTION:
        raise BadInput("--name, --extra, --group and --no-default-groups go with --project PATH")
    plan, facts = plan_for(args.profile, args.facts)
    result = build.build(
        plan,
        facts,
        project=project,
        force=args.force,
        progress=report.BuildProgress()
        if not args.json and report.err_console.is_terminal
        else None,
        lock_timeout=args.wait,
    )
    if args.json:
        data = result.report.serialize()
        data["venv"] = str(result.venv)
        data["report_path"] = str(result.report_path) if result.report_path else None
        print_json(data)
    elif result.noop:
        report.console.print(
            f"{result.profile}: up to date ({result.venv} -> {result.target.name})"
        )
    else:
        report.console.print(
            f"{result.profile}: built {result.target.name} in {result.seconds:.1f} s; "
            f"{result.venv} switched (report: {result.report_path})"
        )
        for line in _project_lines(result.report.project):
            report.console.print(line)
    return 0


def _project_lines(done: Mapping[str, object] | None) -> list[str]:
    """What a project build decided: selection, Python and why, torch before and after,
    what the profile added or the project kept, and the warnings."""
    if not done:
        return []
    lines = [
        f"  audited: {done.get('selection')}",
        f"  python {done.get('python')}: {done.get('python_why')}",
        f"  torch {done.get('torch_before')} -> {done.get('torch_after')}",
    ]
    changes = done.get("changes")
    for change in changes if isinstance(changes, list) else []:
        after = change.get("after") or "left out"
        lines.append(f"  {change.get('name')}: {after} ({change.get('why')})")
    warnings = done.get("warnings")
    lines += [f"  warning: {w}" for w in (warnings if isinstance(warnings, list) else [])]
    return lines
