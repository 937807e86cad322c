"""docs/commands.md matches the command line: each command's (and action's) usage,
description and options, as hpcenv's argparse parsers give them, are the generated parts of
the file. After adding or changing an option, regenerate them with
``.venv/bin/python tests/support/commands_doc.py``."""

from __future__ import annotations

from support.commands_doc import DOC, parsers, render


def test_docs_commands_md_matches_the_parsers() -> None:
    text = DOC.read_text()
    assert render(text) == text, (
        "docs/commands.md differs from hpcenv's argparse parsers: run "
        "'.venv/bin/python tests/support/commands_doc.py' and review the diff"
    )


def test_every_command_and_action_has_a_section() -> None:
    text = DOC.read_text()
    names = list(parsers())
    assert "hpcenv probe" in names and "hpcenv profile init" in names
    for name in names:
        assert f"\n## {name}\n" in text and f"<!-- generated: {name} -->" in text, name


def test_a_changed_option_is_seen() -> None:
    """The check above can fail: a row dropped, or help reworded, is written back."""
    text = DOC.read_text()
    row = "| `--ranks N` | ranks of multi-rank probes (default: GPUs, else 2) |\n"
    assert row in text
    assert render(text.replace(row, "")) == text
    assert render(text.replace("print JSON for scripts", "print JSON")) == text


def test_the_readme_is_short_with_one_line_per_command() -> None:
    """README is what a newcomer reads in five minutes: under 200 lines, its command table
    one row per command (the reference is docs/commands.md)."""
    from hpcenv import cli

    text = (DOC.parents[1] / "README.md").read_text()
    assert len(text.splitlines()) < 200
    table = text.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    rows = [r for r in table.splitlines()[2:] if r.startswith("| `hpcenv ")]
    named = [r.split("`")[1].split()[1] for r in rows]
    assert sorted(named) == sorted(cli.COMMANDS), named
    assert all(len(r) < 200 for r in rows)
