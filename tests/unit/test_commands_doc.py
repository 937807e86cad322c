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
