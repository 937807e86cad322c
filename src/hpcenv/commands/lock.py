"""Lock a profile's requirements for its platform: ``lockfiles/<profile>-<arch>.txt``.

``uv pip compile --generate-hashes`` for the target arch and Python (an aarch64
cluster can be locked from an x86 laptop with ``--declared`` or ``--facts``), torch
pinned with its variant label. ``--check`` only reports whether each lock still
matches its profile and was not edited by hand (its body digest; exit 4 when one
fails) and writes nothing. ``--project PATH`` locks a user's project for the node instead
(hashed, for ``uv pip sync``), to ``--output FILE`` or stdout, never into ``lockfiles/``.
"""

from __future__ import annotations

import argparse

from hpcenv.build import lockfiles
from hpcenv.commands import add_json_option, print_json, print_text
from hpcenv.commands._inputs import plan_for
from hpcenv.profile import schema
from hpcenv.ui import report
from hpcenv.utils.errors import BadInput, BuildFailed, HpcenvError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "profiles", nargs="*", metavar="PROFILE", help="profiles to lock (default: every profile)"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--facts", metavar="FILE", help="lock for the node recorded in FILE")
    group.add_argument(
        "--declared",
        action="store_true",
        help="lock for the node the profile's [platform] declares "
        "(default for profiles with a fixed arch when no PROFILE is named)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="verify that each lock matches its profile; write nothing",
    )
    parser.add_argument(
        "--project",
        metavar="PATH",
        help="lock this project for the node instead (its uv.lock, or a requirements file, "
        "pyproject.toml, setup.py or environment.yml), with hashes, for 'uv pip sync'; "
        "written to --output (default: stdout), never into lockfiles/",
    )
    parser.add_argument("--output", metavar="FILE", help="--project: write the lock here")
    add_project_selection(parser)
    add_json_option(parser)


def add_project_selection(parser: argparse.ArgumentParser) -> None:
    from hpcenv.commands import add_project_python, add_selection_options

    add_selection_options(parser, "--project:")
    add_project_python(parser)
    parser.add_argument(
        "--with-profile-packages",
        action="store_true",
        help="--project: add the profile's [packages] install to the project",
    )


def run(args: argparse.Namespace) -> int:
    if args.project or args.output:
        return run_project(args)
    from hpcenv.commands import selection_of
    from hpcenv.project import uv_lock

    if selection_of(args) != uv_lock.DEFAULT_SELECTION or args.with_profile_packages or args.python:
        raise BadInput(
            "--python, --extra, --group, --no-default-groups and --with-profile-packages go "
            "with --project PATH"
        )
    names = args.profiles or list(schema.available())
    rows = []
    failed = 0
    for name in names:
        declared = args.declared
        if not args.profiles and not args.facts:
            declared = schema.load(name).platform.arch != "any"
        row: dict[str, object] = {"profile": name}
        try:
            plan, facts = plan_for(name, args.facts, declared=declared)
            path = lockfiles.lock_path(plan, facts)
            row["lockfile"] = str(path)
            why = lockfiles.edited(path) or lockfiles.mismatch(path, plan, facts)
            if args.check:
                row["ok"] = why is None
                row["reason"] = why or "matches"
            elif why is None:
                row["ok"] = True
                row["reason"] = "up to date"
            else:
                lockfiles.compile_lock(plan, facts, path=path)
                row["ok"] = True
                row["reason"] = f"written ({why})"
        except HpcenvError as exc:
            if len(names) == 1:
                raise
            row["ok"] = False
            row["reason"] = str(exc)
        failed += not row["ok"]
        rows.append(row)
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            mark = report.styled("ok", "green") if r["ok"] else report.styled("FAIL", "red")
            report.console.print(mark, f"{r['profile']}: {r.get('lockfile', '')} {r['reason']}")
    if failed:
        if len(names) == 1:
            raise BuildFailed(f"lock {names[0]}: {rows[0]['reason']}; run 'hpcenv lock {names[0]}'")
        return BuildFailed.exit_code
    return 0


def run_project(args: argparse.Namespace) -> int:
    """``lock PROFILE --project PATH [--output FILE]``: the project's set for the node
    (``install_set.project_plan``), hashed, with a header saying for what it was made."""
    import os
    import shlex
    import sys
    from pathlib import Path

    from hpcenv.commands import selection_of
    from hpcenv.commands.build import project_request
    from hpcenv.project import install_set, model
    from hpcenv.utils import fsio

    if not args.project:
        raise BadInput("--output goes with --project PATH")
    if len(args.profiles) != 1 or args.check:
        raise BadInput("lock --project takes one PROFILE (and no --check)")
    plan, facts = plan_for(args.profiles[0], args.facts, declared=args.declared, project=True)
    request = project_request(
        args.project, selection_of(args), None, args.with_profile_packages, args.python
    )
    on_node = model.on_node(request, plan, facts)
    wanted, text, install = install_set.project_plan(
        request, plan, facts, hashes=True, wanted=on_node.install_set
    )
    arch = lockfiles.target_arch(plan, facts)
    header = [
        f"# hpcenv lock {shlex.join(sys.argv[2:])}",
        f"# for profile {plan.profile} on {arch} ({lockfiles.target_platform(plan, facts)}), "
        f"Python {wanted.python.version}; torch {wanted.torch_before} -> {wanted.torch_after}",
        f"# install with: uv pip sync THIS_FILE (from {request.directory}: '.' is the project)",
    ]
    body = (
        "\n".join(header)
        + "\n"
        + lockfiles.credentials_as_references(
            text, (*wanted.indexes, *wanted.find_links), os.environ
        )
    )
    if args.output:
        fsio.write_text(Path(args.output), body)
    elif not args.json:
        print_text(body)
    if args.json:
        print_json(
            {"profile": plan.profile, "project": str(request.directory), "output": args.output,
             "python": wanted.python.version, "install": install}
        )  # fmt: skip
    elif args.output:
        report.err_console.print(f"{args.output}: {len(install)} packages for {arch}")
    return 0
