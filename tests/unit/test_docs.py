"""The docs stay true to the tree: the concern map names modules that exist, every module
a docstring, a comment or a document names exists, and nothing cites a document that is
not in the repository."""

from __future__ import annotations

import re

from support import REPO

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
    skip = {REPO / "src" / "hpcenv" / "knowledge", REPO / "tests" / "unit" / "test_docs.py"}
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


#: ``hpcenv.pkg.module`` (dotted) and ``pkg/module.py`` (a path under src/hpcenv/) as the
#: docs and docstrings write them; ``tests/...`` paths name test files.
DOTTED = re.compile(r"`+(hpcenv(?:\.[a-z_]+)+)")
SRC_PATH = re.compile(r"(?<![\w/.-])((?:src/)?(?:hpcenv/)?(?:[a-z_]+/)+[a-z_]+\.py)\b")
#: paths in other repositories that start like one of ours (pytorch/test-infra's tools/)
FOREIGN = {"tools/scripts/generate_binary_build_matrix.py"}
PACKAGES = {p.name for p in (REPO / "src" / "hpcenv").iterdir() if p.is_dir()} | {"hpcenv"}
TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")


def _module_exists(dotted: str) -> bool:
    """``hpcenv.a.b`` is a package, a module, or a name defined in one (``hpcenv.a.b.f``)."""
    src = REPO / "src"
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        base = src.joinpath(*parts[:cut])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            rest = parts[cut:]
            if not rest:
                return True
            module = (
                base.with_suffix(".py")
                if base.with_suffix(".py").exists()
                else base / "__init__.py"
            )
            return re.search(rf"\b{re.escape(rest[0])}\b", module.read_text()) is not None
    return False


def _named_in(text: str) -> tuple[set[str], set[str], set[str]]:
    return set(DOTTED.findall(text)), set(SRC_PATH.findall(text)), set(TEST_PATH.findall(text))


def test_every_module_named_in_docstrings_and_docs_exists() -> None:
    """Moved or renamed modules leave no stale name behind: every ``hpcenv.x.y``, every
    ``pkg/module.py`` of src/hpcenv/ and every ``tests/...py`` named in the code's
    docstrings and comments, README.md and docs/*.md exists."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted((REPO / "src" / "hpcenv").rglob("*.py"))
    src = REPO / "src" / "hpcenv"
    stale = []
    for path in files:
        dotted, paths, tests = _named_in(path.read_text())
        where = path.relative_to(REPO)
        stale += [f"{where}: {d}" for d in sorted(dotted) if not _module_exists(d)]
        ours = {p for p in paths - FOREIGN if p.removeprefix("src/").split("/")[0] in PACKAGES}
        stale += [
            f"{where}: {p}"
            for p in sorted(ours)
            if not (REPO / p).exists()
            and not (src / p.removeprefix("src/").removeprefix("hpcenv/")).exists()
        ]
        stale += [f"{where}: {t}" for t in sorted(tests) if not (REPO / t).exists()]
    assert not stale, "names of modules that do not exist:\n" + "\n".join(stale)
