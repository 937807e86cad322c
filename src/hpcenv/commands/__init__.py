"""One module per ``hpcenv`` subcommand; ``cli.COMMANDS`` lists them (name and one-line
help, in ``--help``'s order).

``cli`` imports only the module of the command being run (none for ``hpcenv --help``
and ``--version``), so a command pays for what its own module imports. ``facts`` must
start fast: its module imports argparse and this package at the top and the rest inside
``run``, and ``hpcenv facts --json`` loads neither rich, packaging nor another command
(``tests/integration/cli/test_startup.py`` checks it).

A module defines ``configure(parser)`` and ``run(args) -> int``; its docstring is the
command's description. Shared options live here, and the
plain-output exits (``print_json``, ``print_text``), which mask secrets (``redact``)
like the rich consoles in ``report`` do: commands print nothing any other way.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from hpcenv.utils.output import print_json, print_text

__all__ = ["print_json", "print_text"]  # commands print through these


def add_facts_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--facts",
        metavar="FILE",
        help="use facts recorded with 'hpcenv facts --json > FILE' instead of this host's",
    )


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds greater than 0 (``nan``, ``inf``
    and ``0`` would disable the bound they set)."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds greater than 0")
    return value


def wait_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more (0: do not wait)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def add_project_python(parser: argparse.ArgumentParser) -> None:
    """``--python X.Y`` of ``plan``/``lock``/``build --project`` (``audit`` has its own)."""
    parser.add_argument(
        "--python",
        metavar="X.Y",
        help="--project: the project's Python, whatever its files say (it must be one the "
        "project's requires-python admits)",
    )


def add_selection_options(parser: argparse.ArgumentParser, scope: str) -> None:
    """uv's selection flags for a project's uv.lock (``audit``, ``build --project``);
    ``scope`` opens each help line (``uv.lock:``, ``--project:``)."""
    parser.add_argument(
        "--extra", action="append", default=[], metavar="NAME", help=f"{scope} include an extra"
    )
    parser.add_argument("--all-extras", action="store_true", help=f"{scope} include every extra")
    parser.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{scope} include a dependency group (besides the default groups)",
    )
    parser.add_argument(
        "--no-default-groups",
        action="store_true",
        help=f"{scope} leave out the project's default groups ([tool.uv] default-groups, else dev)",
    )


def selection_of(args: argparse.Namespace) -> Any:
    """The ``uv_lock.Selection`` of :func:`add_selection_options`' flags."""
    from hpcenv.project import uv_export  # not uv_lock: audit starts uv before that import

    return uv_export.Selection(
        extras=tuple(args.extra),
        all_extras=args.all_extras,
        groups=tuple(args.group),
        no_default_groups=args.no_default_groups,
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_html_option(parser: argparse.ArgumentParser, scope: str = "") -> None:
    """``--html FILE``: the report as one self-contained HTML page (``hpcenv report``)."""
    parser.add_argument(
        "--html",
        metavar="FILE",
        help=f"{scope}also write the report as one HTML file (NCCL charts, pair matrix, "
        "probe table; no script, nothing fetched)",
    )
