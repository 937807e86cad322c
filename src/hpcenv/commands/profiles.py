"""List the cluster profiles hpcenv finds ($HPCENV_ENVS, ./envs, the shipped ones),
validating each."""

from __future__ import annotations

import argparse

from hpcenv.commands import add_json_option, print_json
from hpcenv.utils.errors import BadInput


def configure(parser: argparse.ArgumentParser) -> None:
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.profile import schema
    from hpcenv.ui import report

    rows = []
    bad = 0
    for name, path in schema.available().items():
        try:
            p = schema.load_path(path)
            rows.append(
                {
                    "name": name,
                    "path": str(path),
                    "ok": True,
                    "description": p.profile.description,
                    "error": None,
                }
            )
        except BadInput as exc:
            bad += 1
            rows.append(
                {"name": name, "path": str(path), "ok": False, "description": "", "error": str(exc)}
            )
    if args.json:
        print_json(rows)
    else:
        report.print_profiles(rows)
    return 2 if bad else 0
