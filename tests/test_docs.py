"""The docs stay true to the tree: the concern map names modules that exist, and nothing
cites a document that is not in the repository."""

from __future__ import annotations

import re

from conftest import REPO

#: Documents that once lived outside the repository; their notes are in docs/design.md.
OUTSIDE = re.compile(r"DESIGN\.md|KNOWLEDGE\.md|docs/profiles\.md")


def test_the_concern_map_names_real_modules() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    table = text.split("## Where each concern lives", 1)[1].split("\n## ", 1)[0]
    named = set()
    for row in table.splitlines()[3:]:
        where = row.split("|")[2]
        named |= set(re.findall(r"`([\w/]+\.py|[\w]+/)`", where))
    assert len(named) > 30
    src = REPO / "src" / "hpcenv"
    for name in named:
        found = (src / name).exists() or (REPO / name).exists() or any(src.rglob(name))
        assert found, f"docs/design.md names {name}: not found"


def test_no_reference_to_documents_outside_the_repository() -> None:
    roots = ["src", "probes", "sitecustomize", "tests", "envs", "docs", "bench"]
    files = [REPO / "README.md", REPO / "noxfile.py"]
    for root in roots:
        files += [p for p in (REPO / root).rglob("*") if p.suffix in (".py", ".md", ".toml")]
    # hpcenv.knowledge's data files are being rewritten from the artifacts (their sources
    # will name those)
    skip = {REPO / "src" / "hpcenv" / "knowledge", REPO / "tests" / "test_docs.py"}
    cited = [
        f"{p.relative_to(REPO)}:{n}"
        for p in files
        if not any(s == p or s in p.parents for s in skip)
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not cited, cited


def test_the_readme_exit_code_table_names_each_command_that_documents_its_exit() -> None:
    """A subcommand whose docstring says "exit N when ..." is named in README's row for
    N, so a newcomer who meets that code finds it (``lock --check`` exits 4)."""
    import importlib
    import pkgutil

    import hpcenv.commands

    text = (REPO / "README.md").read_text()
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| (\d+) \| (.*) \|$", text.split("### Exit codes", 1)[1], re.M)
    }
    promised = []
    for info in pkgutil.iter_modules(hpcenv.commands.__path__):
        mod = importlib.import_module(f"hpcenv.commands.{info.name}")
        for code in re.findall(r"exit (\d+) when", " ".join((mod.__doc__ or "").split())):
            promised.append((info.name, code))
            assert f"hpcenv {info.name}" in rows.get(code, ""), (
                f"README's exit code {code} does not name 'hpcenv {info.name}'"
            )
    assert ("lock", "4") in promised
