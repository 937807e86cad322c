"""Lock a profile's requirements for its platform: ``lockfiles/<profile>-<arch>.txt``.

``uv pip compile --generate-hashes`` for the target arch and Python (an aarch64
cluster can be locked from an x86 laptop with ``--declared`` or ``--facts``), torch
pinned with its variant label. ``--check`` only reports whether each lock still
matches its profile and was not edited by hand (its body digest; exit 4 when one
fails) and writes nothing.
"""

from __future__ import annotations

import argparse

from hpcenv.build import lockfiles as lock
from hpcenv.commands import add_json_option, print_json
from hpcenv.decide.plan import plan_for
from hpcenv.profile import schema as profile
from hpcenv.ui import report
from hpcenv.utils.errors import BuildFailed, HpcenvError

NAME = "lock"
HELP = "write lockfiles/<profile>-<arch>.txt with uv pip compile (--check: verify only)"
ORDER = 40


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
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    names = args.profiles or list(profile.available())
    rows = []
    failed = 0
    for name in names:
        declared = args.declared
        if not args.profiles and not args.facts:
            declared = profile.load(name).platform.arch != "any"
        row: dict[str, object] = {"profile": name}
        try:
            plan, facts = plan_for(name, args.facts, declared=declared)
            path = lock.lock_path(plan, facts)
            row["lockfile"] = str(path)
            why = lock.edited(path) or lock.mismatch(path, plan, facts)
            if args.check:
                row["ok"] = why is None
                row["reason"] = why or "matches"
            elif why is None:
                row["ok"] = True
                row["reason"] = "up to date"
            else:
                lock.compile_lock(plan, facts, path=path)
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
