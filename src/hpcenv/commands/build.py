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
from pathlib import Path
from typing import TYPE_CHECKING

from hpcenv.build import builder
from hpcenv.commands import (
    add_facts_option,
    add_json_option,
    add_project_python,
    add_selection_options,
    print_json,
    selection_of,
    wait_seconds,
)
from hpcenv.commands._inputs import plan_for
from hpcenv.ui import report
from hpcenv.utils.errors import BadInput

if TYPE_CHECKING:
    from hpcenv.build.results import ProjectInstall
    from hpcenv.project.request import ProjectRequest
    from hpcenv.project.uv_lock import Selection


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE")
    add_facts_option(parser)
    parser.add_argument(
        "--project",
        metavar="PATH",
        help="install this project (a directory, or its dependency file) with the torch build "
        "this node can run, into "
        "venvs/<profile>-<project>: its uv.lock as 'uv sync' would, or (without a lock) its "
        "pyproject.toml, setup.py/setup.cfg, requirements.txt or environment.yml resolved for "
        "the node; the project's files are not touched",
    )
    parser.add_argument(
        "--with-profile-packages",
        action="store_true",
        help="--project: add the profile's [packages] install to the project (default: the "
        "project's packages alone)",
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        help="--project: the environment's name (default <profile>-<project>)",
    )
    add_selection_options(parser, "--project:")
    add_project_python(parser)
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
    from hpcenv.project import uv_lock

    project = None
    selection = selection_of(args)
    if args.project:
        project = project_request(
            args.project, selection, args.name, args.with_profile_packages, args.python
        )
    elif (
        args.name
        or args.python
        or selection != uv_lock.DEFAULT_SELECTION
        or args.with_profile_packages
    ):
        raise BadInput(
            "--name, --python, --extra, --group, --no-default-groups and "
            "--with-profile-packages go with --project PATH"
        )
    plan, facts = plan_for(args.profile, args.facts, project=project is not None)
    result = builder.build(
        plan,
        facts,
        project=project,
        force=args.force,
        progress=None if args.json else report.BuildProgress(),
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
        if isolated := result.report.no_build_isolation:
            report.console.print(
                f"  built without build isolation (setup.py imports torch): "
                f"{', '.join(isolated.packages)}, against torch {isolated.torch}"
            )
    return 0


def project_request(
    path: str,
    selection: Selection,
    name: str | None = None,
    with_profile: bool = False,
    python: str | None = None,
) -> ProjectRequest:
    """``--project PATH`` as a ``ProjectRequest`` (``project/request.py``): a directory with
    a ``uv.lock`` or a dependency file; a file names its directory."""
    from hpcenv.project import readers
    from hpcenv.project.request import ProjectRequest

    where = Path(path).absolute()
    file = None
    if where.is_file():
        where, file = where.parent, where
        if readers.kind_of(file) is None:
            raise BadInput(
                f"--project {path}: not a project directory or dependency file (a requirements "
                "file, pyproject.toml, setup.py, setup.cfg or environment.yml)"
            )
    if not where.is_dir():
        raise BadInput(f"--project {path}: no such directory")
    if file is None and not (where / "uv.lock").is_file() and not readers.find_in(where):
        raise BadInput(
            f"--project {path}: no uv.lock, pyproject.toml, setup.py, setup.cfg, "
            "requirements.txt or environment.yml there"
        )
    return ProjectRequest(
        directory=where,
        selection=selection,
        name=name,
        with_profile_packages=with_profile,
        file=file,
        python=_python_arg(python),
    )


def _python_arg(python: str | None) -> str | None:
    """``--python X.Y`` checked: ``3.12`` or ``3.12.3``."""
    import re

    if python is not None and not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", python):
        raise BadInput(f"--python {python!r}: not a Python version; write e.g. 3.12")
    return python


def _project_lines(done: ProjectInstall | None) -> list[str]:
    """What a project build decided: selection, Python and why, torch before and after,
    what the profile added or the project kept, and the warnings."""
    if done is None:
        return []
    lines = [
        f"  audited: {done.selection}",
        f"  python {done.python}: {done.python_why}",
        f"  torch {done.torch_before} -> {done.torch_after}",
    ]
    for change in done.changes:
        lines.append(f"  {change.name}: {change.after or 'left out'} ({change.why})")
    lines += [f"  {s}" for s in done.copy_skipped]
    lines += [f"  warning: {w}" for w in done.warnings]
    return lines
