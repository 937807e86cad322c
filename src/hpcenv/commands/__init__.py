"""One module per ``hpcenv`` subcommand; ``cli`` discovers them.

Every command module is imported to build ``--help``, so a module imports only
argparse and this package at the top and its heavy modules (rich, packaging, torch
knowledge) inside ``run``: ``hpcenv facts --json`` must start fast.

A module defines ``NAME``, ``HELP``, optional ``ORDER`` (help listing order),
``configure(parser)`` and ``run(args) -> int``. Shared options live here.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_facts_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--facts",
        metavar="FILE",
        help="use facts recorded with 'hpcenv facts --json > FILE' instead of this host's",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
