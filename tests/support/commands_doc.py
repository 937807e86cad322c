"""docs/commands.md's generated parts, from hpcenv's own argparse parsers: per command (and
per action: ``profile init``) its usage and one row per option with its help, between
``<!-- generated: hpcenv NAME -->`` and ``<!-- end generated -->``. The prose around them
and each command's ``JSON keys:`` line are written by hand.
``tests/unit/test_commands_doc.py`` fails when the file and the parsers differ; rewrite
the generated parts (a new command gets a section at the end) with

    .venv/bin/python tests/support/commands_doc.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "commands.md"
BEGIN = "<!-- generated: {name} -->"
END = "<!-- end generated -->"
BLOCK = re.compile(r"<!-- generated: (hpcenv [\w -]+?) -->\n.*?<!-- end generated -->", re.S)


class _Wide(argparse.HelpFormatter):
    """One line of usage however many options (a table cell, not a terminal)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100_000, max_help_position=100_000)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option(action: argparse.Action) -> str:
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return f"{names} {metavar}"


def parsers() -> dict[str, argparse.ArgumentParser]:
    """``hpcenv NAME`` (and ``hpcenv NAME ACTION``) -> its parser, in ``--help``'s order."""
    from hpcenv import cli

    out: dict[str, argparse.ArgumentParser] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = _Wide
        out[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, p in action.choices.items():
                    walk(f"{name} {sub}", p)

    for command in cli.COMMANDS:
        top = cli.build_parser(command)
        (sub,) = (a for a in top._actions if isinstance(a, argparse._SubParsersAction))
        walk(f"hpcenv {command}", sub.choices[command])
    return out


def block(name: str, parser: argparse.ArgumentParser) -> str:
    """The generated part of one command's section."""
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                rows.append(f"| `{choice.dest}` | {_cell(choice.help or '')} |")
            continue
        what = _option(action) if action.option_strings else (action.metavar or action.dest)
        helped = parser._get_formatter()._expand_help(action) if action.help else ""
        rows.append(f"| `{what}` | {_cell(helped)} |")
    table = "\n".join(["| argument | meaning |", "|---|---|", *rows]) if rows else ""
    about = [" ".join(p.split()) for p in (parser.description or "").split("\n\n") if p.strip()]
    lines = [BEGIN.format(name=name)]
    for paragraph in about:
        lines += [paragraph, ""]
    lines += ["```text", usage, "```"]
    if table:
        lines += ["", table]
    return "\n".join([*lines, END])


def render(text: str) -> str:
    """``text`` with every generated part rewritten; a command without a section gets
    one at the end."""
    found = parsers()
    seen = set()

    def fresh(match: re.Match[str]) -> str:
        name = match.group(1)
        seen.add(name)
        return block(name, found[name]) if name in found else match.group(0)

    out = BLOCK.sub(fresh, text)
    for name, parser in found.items():
        if name not in seen:
            out = out.rstrip("\n") + f"\n\n## {name}\n\n{block(name, parser)}\n\nJSON keys: none\n"
    return out


def main() -> int:
    sys.path.insert(0, str(REPO / "src"))
    DOC.write_text(render(DOC.read_text()))
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
