"""The package keeps one owner per question (docs/design.md, "Where each concern lives"),
read from the source with ``ast``: one module outside ``decide/`` asks for a torch build,
the project's Python has one rule, and ``build/swap.py`` only builds."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support import REPO

SRC = REPO / "src" / "hpcenv"
#: The torch decision's entries: ``decide/torch_choice.choose_torch`` and the resolver under it.
TORCH_ENTRIES = {"choose_torch", "try_resolve_torch", "resolve_torch"}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path))


def names_used(tree: ast.Module) -> set[str]:
    """Every name a module uses or imports (``x``, ``mod.x``, ``from mod import x``)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.add(node.name.rsplit(".", 1)[-1])
    return used


def imported_modules(rel: str, tree: ast.Module) -> set[str]:
    """The hpcenv modules ``rel`` imports (``from hpcenv.build import swap`` included)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_one_module_outside_decide_asks_for_a_torch() -> None:
    """audit, plan/lock/build --project and resolve all go through ``project/torch_wish.py``;
    inside ``decide/`` only ``torch_choice`` calls the resolver (``plan`` uses its entry)."""
    outside = {rel for rel, tree in modules() if not rel.startswith("decide/")
               and names_used(tree) & TORCH_ENTRIES}  # fmt: skip
    assert outside == {"project/torch_wish.py"}
    releases = {rel for rel, tree in modules() if not rel.startswith(("decide/", "knowledge/"))
                and "newest_with_variant" in names_used(tree)}  # fmt: skip
    assert releases <= {"project/torch_wish.py"}, releases
    resolver = {"try_resolve_torch", "resolve_torch"}
    inside = {rel for rel, tree in modules() if rel.startswith("decide/")
              and names_used(tree) & resolver}  # fmt: skip
    assert inside == {"decide/torch_variant.py", "decide/torch_choice.py"}


def test_the_project_python_has_one_rule() -> None:
    defined = [
        rel
        for rel, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "python_for"
    ]
    assert defined == ["project/request.py"]


def test_swap_only_builds() -> None:
    """``build/swap.py`` syncs the set, proves one CUDA stack and installs the project; what
    the project installs is decided in ``project/`` (which never imports ``build/``)."""
    swap = SRC / "build" / "swap.py"
    assert len(swap.read_text().splitlines()) < 300
    users = {rel for rel, tree in modules()
             if {"hpcenv.build.swap", "hpcenv.build.swap.sync_and_swap"}
             & imported_modules(rel, tree)}  # fmt: skip
    assert users <= {"build/builder.py"}, users
    for rel in ("commands/plan.py", "commands/lock.py", "commands/sbatch.py"):
        tree = ast.parse(Path(SRC / rel).read_text())
        assert not any(m.startswith("hpcenv.build.swap") for m in imported_modules(rel, tree))


def test_the_concern_map_names_the_owners() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    table = text.split("## Where each concern lives", 1)[1].split("\n## ", 1)[0]
    for module in ("decide/torch_choice.py", "project/torch_wish.py", "project/request.py",
                   "project/install_set.py"):  # fmt: skip
        assert f"`{module}`" in table, module
    assert "request.python_for" in table
