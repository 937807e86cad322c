"""Say which torch build a uv.lock, a requirements file, a pyproject.toml without a lock,
a setup.py/setup.cfg, a conda environment.yml, an installed venv or a container image (a
rootfs directory, podman:IMAGE: project/image.py) holds - local label,
else the nvidia-cuda-runtime version it pulls, else CPU - and whether this node (or --facts
FILE, or a profile's declared node with --declared PROFILE) can run it and every other
GPU package in it (JAX's plugins, CuPy, vLLM, flash-attn, anything pulling a CUDA runtime
wheel or naming a CUDA major), with resolve's fix and warnings; a set without torch is
judged by its GPU packages alone.
A hand-written file is first resolved for the node with uv (cached by content and target),
from the requirements its files declare as data: a repo's code never runs (a setup.py or
build backend that computes its requirements is named; --allow-build lets uv run it, in a
copy of the project), and nothing outside the project is read.
A uv.lock is read the way 'uv sync' installs it: the fork for the node and Python, the
project's default groups, and uv's --extra/--all-extras/--group/--no-default-groups.
Exit code 3 when it cannot run (or is CPU-only on a GPU node), 2 on bad input, 0 when it
can; --json prints JSON in every case."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hpcenv.commands import (
    add_facts_option,
    add_json_option,
    add_selection_options,
    print_json,
    selection_of,
)

if TYPE_CHECKING:
    from hpcenv.project.audit import Audit
    from hpcenv.project.uv_export import Selection


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="LOCK_OR_VENV",
        help="uv.lock, venv, requirements file (compiled or hand-written), pyproject.toml, "
        "setup.py/setup.cfg or conda environment.yml (hand-written files are resolved for "
        "the node with uv first), or a container image: a rootfs/sandbox directory, or "
        "podman:IMAGE (mounted with 'podman image mount')",
    )
    add_facts_option(parser)
    parser.add_argument(
        "--declared",
        metavar="PROFILE",
        help="audit for the node a profile declares in [platform] (no facts file needed; CI)",
    )
    add_selection_options(parser, "uv.lock:")
    parser.add_argument(
        "--python",
        metavar="X.Y",
        help="judge the project for this Python, whatever its files say (it must be one the "
        "project's requires-python admits; default: a lock's .python-version, conda's python=, "
        "else the node's if requires-python admits it)",
    )
    parser.add_argument(
        "--allow-build",
        action="store_true",
        help="let uv run a setup.py or build backend that computes its requirements (in a "
        "copy of the project); without it, a repo's code never runs and only requirements "
        "written as data are read",
    )
    parser.add_argument(
        "--gpu-code",
        action="store_true",
        help="also read the GPU code (SASS/PTX) of each GPU package's wheel for the node from "
        "its index by HTTP range requests (cached by sha256): a GPU it carries no code for is "
        "named",
    )
    parser.add_argument("--junit", metavar="FILE", help="write the verdict as JUnit XML (CI)")
    parser.add_argument(
        "--summary",
        metavar="FILE",
        help='append the verdict as Markdown (e.g. "$GITHUB_STEP_SUMMARY" in a GitHub job)',
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.utils.errors import HpcenvError, NoCompatibleBuild

    try:
        result, node = _audit(args)
    except HpcenvError as exc:
        _ci_reports(args, None, str(exc))
        if args.json:
            error = {"source": args.target, "ok": False, "error": str(exc)}
            print_json({**error, "exit_code": exc.exit_code})
        raise
    _ci_reports(args, result, None)
    if args.json:
        print_json(result.to_json())
    else:
        _print(result, node)
    if not result.ok:
        fix = f"; fix: {result.fix}" if result.fix else ""
        raise NoCompatibleBuild(f"{result.message}{fix}")
    return 0


def _print(result: Audit, node: str) -> None:
    """The table for people (rich is imported here only: --json does not pay for it)."""
    from rich.table import Table
    from rich.text import Text

    from hpcenv.ui import report

    table = Table(
        title=f"audit {result.source} ({result.kind})", show_header=False, title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("node", Text(node))
    if result.selection:
        table.add_row("audited", Text(result.selection))
    if result.python_why:
        table.add_row("python", Text(f"{result.python}: {result.python_why}"))
    if result.resolved:
        table.add_row("resolved", Text(result.resolved))
    torch = f"{result.torch_version}: {result.build}" if result.torch_version else "none"
    table.add_row("torch", Text(torch))
    table.add_row("evidence", Text(result.evidence))
    table.add_row("verdict", Text(result.message, style="green" if result.ok else "red"))
    if result.fix:
        table.add_row("fix", Text(result.fix))
    for line in result.packages:
        table.add_row("package", Text(line))
    for w in result.warnings:
        table.add_row("warning", Text(w, style="yellow"))
    for note in result.notes:
        table.add_row("note", Text(note))
    report.console.print(table)


def _audit(args: argparse.Namespace) -> tuple[Audit, str]:
    from hpcenv.project import uv_export
    from hpcenv.utils.errors import BadInput

    if args.declared and args.facts:
        raise BadInput("give either --facts FILE or --declared PROFILE, not both")
    from hpcenv.project import image

    selection = selection_of(args)
    with image.opened(args.target) as target:  # podman:NAME mounted for the audit
        args = argparse.Namespace(**{**vars(args), "target": target})
        with uv_export.early(args.target, selection):  # uv reads the lock beside the imports
            return _audit_for(args, selection)


def _audit_for(args: argparse.Namespace, selection: Selection) -> tuple[Audit, str]:
    from hpcenv.facts import collect
    from hpcenv.project import audit

    if args.declared:
        from hpcenv.profile import schema  # only here: a lock audit needs no profile

        prof = schema.load(args.declared)
        found = schema.declared_facts(prof)
        node = f"profile {prof.name}'s declared node"
    else:
        found = collect.for_args(args.facts)
        node = f"the node in {args.facts}" if args.facts else "this node"
    result = audit.audit(
        args.target,
        found,
        selection=selection,
        python=args.python,
        node=node,
        allow_build=args.allow_build,
        gpu_code=args.gpu_code,
    )
    return result, node


def _ci_reports(args: argparse.Namespace, result: Audit | None, error: str | None) -> None:
    """``--junit`` (one testcase: pass, fail, or error for bad input) and ``--summary``."""
    if not (args.junit or args.summary):
        return
    from pathlib import Path

    from hpcenv.kit.status import Status
    from hpcenv.models.results import ProbeResult
    from hpcenv.ui import junit
    from hpcenv.utils import fsio

    where = f"--declared {args.declared}" if args.declared else (args.facts or "this node")
    name = f"audit {args.target} ({where})"
    if result is None:
        status, summary, remedy = Status.ERROR, error or "", ""
    else:
        status = Status.PASS if result.ok else Status.FAIL
        summary, remedy = result.message, result.fix or ""
    if args.junit:
        case = ProbeResult(name=name, status=status, summary=summary, remedy=remedy)
        junit.write(Path(args.junit), [case], suite_name="hpcenv audit")
    if args.summary:
        mark = {Status.PASS: "runs", Status.FAIL: "cannot run", Status.ERROR: "error"}[status]
        rows = [("verdict", f"**{mark}**: {summary}")]
        if remedy:
            rows.append(("fix", remedy))
        if result is not None:
            torch = f"{result.torch_version} ({result.build})" if result.torch_version else "none"
            rows += [("torch", torch)]
            rows += [("audited", result.selection)] if result.selection else []
            rows += [("warning", w) for w in result.warnings]
        pipe = "\\|"  # a | inside a Markdown table cell
        cells = "".join(f"| {k} | {v.replace('|', pipe)} |\n" for k, v in rows)
        fsio.append_text(Path(args.summary), f"### hpcenv {name}\n\n| | |\n|---|---|\n{cells}\n")
