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
    # and no command makes its own choice (audit's ``--python`` once did, past requires-python)
    chosen = {
        rel
        for rel, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "PythonChoice"
    }
    assert chosen == {"project/request.py"}, chosen


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


def test_every_wheel_fit_check_checks_its_fixes() -> None:
    """Every ``torch_fit.check`` outside its module passes ``runs`` (``runs_on``): a fix it
    names (another Python, another torch) runs on the node. ``plan`` and ``resolve`` once
    proposed torch 2.15.0 on the V100, which ``resolve --torch ==2.15.0`` refuses there."""
    unchecked = [
        f"{rel}:{node.lineno}"
        for rel, tree in modules()
        if rel != "decide/torch_fit.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "check"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch_fit"
        and not any(k.arg == "runs" for k in node.keywords)
    ]
    assert unchecked == []


def test_one_name_rule() -> None:
    """Issue 40: a package name is normalised by ``utils/names.canonicalize_name`` alone
    (packaging's rule, checked against packaging's on every name of the real locks); before,
    14 modules imported packaging's instead: two owners of one rule. And the project's
    commands read the one model (``project/model.py``); ``install_set.project_torch``, the
    build's second answer, is gone."""
    packaging_s = {
        rel
        for rel, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "packaging.utils"
        and any(a.name == "canonicalize_name" for a in node.names)
    }
    assert packaging_s == set(), packaging_s
    model = {
        rel for rel, tree in modules() if "hpcenv.project.model" in imported_modules(rel, tree)
    }
    assert {"build/builder.py", "build/swap.py", "commands/plan.py", "commands/lock.py"} <= model
    assert not {rel for rel, tree in modules() if "project_torch" in names_used(tree)}
