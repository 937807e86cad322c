"""Build a profile's environment with uv: lock, new venv beside the current one, sync,
flash-attn, fixes, import probe, then an atomic switch of ``venvs/<profile>``.

An unchanged rebuild does nothing. With ``--project PATH`` the project's own
``uv.lock`` is synced instead (its files are never modified) and torch is swapped
for the planned variant of the same version.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape

from hpcenv import build, report
from hpcenv.commands import add_facts_option, add_json_option, print_json
from hpcenv.errors import BadInput
from hpcenv.plan import plan_for

NAME = "build"
HELP = "build (or update) a profile's environment; no-op when nothing changed"
ORDER = 41


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE")
    add_facts_option(parser)
    parser.add_argument(
        "--project",
        metavar="PATH",
        help="sync this project's uv.lock and swap its torch for the planned variant",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    parser.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="how long to wait for another build of the same environment "
        "(default: HPCENV_LOCK_TIMEOUT or 900)",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    project = None
    if args.project:
        project = Path(args.project).absolute()
        if not (project / "pyproject.toml").is_file():
            raise BadInput(f"--project {args.project}: no pyproject.toml there")
    plan, facts = plan_for(args.profile, args.facts)
    result = build.build(
        plan,
        facts,
        project=project,
        force=args.force,
        show_progress=not args.json and sys.stderr.isatty(),
        lock_timeout=args.wait,
    )
    if args.json:
        data = dict(result.report)
        data["venv"] = str(result.venv)
        data["report_path"] = str(result.report_path) if result.report_path else None
        print_json(data)
    elif result.noop:
        report.console.print(
            escape(f"{result.profile}: up to date ({result.venv} -> {result.target.name})")
        )
    else:
        report.console.print(
            escape(
                f"{result.profile}: built {result.target.name} in {result.seconds:.1f} s; "
                f"{result.venv} switched (report: {result.report_path})"
            )
        )
    return 0
