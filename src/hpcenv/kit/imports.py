"""Which modules a distribution provides, and importing them inside the target environment.

Used by the imports probe (every top-level module, then the compiled extensions) and by
the build's import check (``hpcenv.build.import_check``), which runs
``python -m hpcenv.kit.imports NAMES_JSON`` in the new environment and reads one JSON
line: ``{"python", "torch", "imports": {dist: module}, "failed": {dist: why}}``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata as md
import json
import sys
from typing import Any


def import_names(dist: md.Distribution) -> list[str]:
    """Top-level modules a distribution provides: its ``top_level.txt``, else from its
    ``RECORD`` the packages (a directory holding ``__init__.py``) and the single-file
    modules (``.py`` or a compiled extension). Private names (``_x``) are left out."""
    text = dist.read_text("top_level.txt")
    if text:
        names = [n.strip() for n in text.splitlines() if n.strip() and not n.startswith("_")]
        if names:
            return names
    names = []
    for f in dist.files or []:
        parts = f.parts
        if not parts or parts[0].endswith((".dist-info", ".data")) or parts[0] == "..":
            continue
        top = parts[0]
        if len(parts) == 1:
            if top.endswith(".py"):
                top = top[:-3]
            elif any(top.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES):
                top = top.split(".")[0]
            else:
                continue
        elif parts[1] != "__init__.py":
            continue
        if top.startswith("_") or not top.isidentifier():
            continue
        if top not in names:
            names.append(top)
    return names


def main_module(dist: md.Distribution, name: str) -> str:
    """The module named like the distribution (``flash-attn`` -> ``flash_attn``), else its
    first one, else the name itself."""
    want = name.replace("-", "_").replace(".", "_").lower()
    tops = sorted(import_names(dist))
    return next((t for t in tops if t.lower() == want), tops[0] if tops else want)


def check(names: list[str]) -> dict[str, Any]:
    """Import each distribution's main module in this interpreter."""
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "torch": None,
        "imports": {},
        "failed": {},
    }
    for name in names:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            result["failed"][name] = "not installed"
            continue
        module = main_module(dist, name)
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure to import is the finding
            result["failed"][name] = f"import {module}: {type(exc).__name__}: {exc}"
        else:
            result["imports"][name] = module
    torch = sys.modules.get("torch")
    if torch is not None:
        result["torch"] = getattr(torch, "__version__", None)
    return result


if __name__ == "__main__":
    print(json.dumps(check(json.loads(sys.argv[1]))))
