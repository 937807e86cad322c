"""One module per ``hpcenv`` subcommand; ``cli`` discovers them.

``cli`` imports only the module of the command being run (all of them only for
``hpcenv --help``), so a command pays for what its own module imports. ``facts`` must
start fast: its module imports argparse and this package at the top and the rest inside
``run``, and ``hpcenv facts --json`` loads neither rich, packaging nor another command
(``tests/test_facts.py`` checks it).

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
