"""Validate one profile and print it (every key, defaults filled in), or with --schema
print the table of every key a profile may set."""

from __future__ import annotations

import argparse
import dataclasses

from hpcenv.commands import add_json_option, print_json
from hpcenv.utils.errors import BadInput


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", nargs="?", metavar="NAME_OR_PATH")
    parser.add_argument("--schema", action="store_true", help="print the profile schema")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.profile import schema as profile
    from hpcenv.ui import report

    if args.schema:
        rows = profile.schema_rows()
        if args.json:
            print_json([dict(zip(("key", "type", "default", "doc"), r, strict=True)) for r in rows])
        else:
            report.print_schema(rows)
        return 0
    if not args.profile:
        raise BadInput("show: give a profile NAME or path, or --schema")
    p = profile.load(args.profile)
    data = dataclasses.asdict(p)
    data["path"] = str(p.path) if p.path else None
    if args.json:
        print_json(data)
    else:
        report.print_profile(p)
    return 0
