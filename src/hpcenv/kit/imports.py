"""Which modules a distribution provides, and importing them inside the target environment.

Used by the imports probe (every top-level module, then the compiled extensions) and by
the build's import check (``hpcenv.build.import_check``), which runs
``python -m hpcenv.kit.imports GROUP_JSON... [--preload MODULES_JSON]`` in the new
environment and reads one JSON line per group (:func:`main`): ``{"python", "torch",
"imports": {dist: module}, "failed": {dist: why}}``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata as md
import json
import os
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


def _preload(modules: list[str]) -> None:
    """Import ``modules`` (standard library ones the first group's import loads anyway),
    each that imports: a forked group then finds them loaded instead of importing them
    again in a process of its own."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            continue


def _forked(group: list[str]) -> tuple[int, int]:
    """``check(group)`` in a forked child (which dies with this process); returns its pid
    and the read end of the pipe its JSON answer comes through."""
    from hpcenv.kit import children

    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    code = 1
    try:
        os.close(read)
        children.die_with(parent)()
        data = json.dumps(check(group)).encode()
        while data:
            data = data[os.write(write, data) :]
        code = 0
    except BaseException:  # a package's sys.exit or a stop: said on stderr, as a process would
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _answer(pid: int, read: int) -> str | None:
    """The JSON line of a forked group; None when its process died before it answered."""
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    return data.decode() if data and status == 0 else None


def main(argv: list[str]) -> int:
    """``GROUP_JSON...`` (lists of distribution names), optionally ``--preload
    MODULES_JSON``: one JSON line per group, in order. The first group is imported in this
    process and each other one in a process forked from it once the preloaded modules are
    in, at the same time: what both import is imported once. A group whose process died
    answers ``null``, which is no answer (``hpcenv.build.import_check.parse``)."""
    preload: list[str] = []
    if "--preload" in argv:
        at = argv.index("--preload")
        preload = json.loads(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    groups = [json.loads(a) for a in argv]
    kids = []
    if len(groups) > 1:
        _preload(preload)
        kids = [_forked(group) for group in groups[1:]]
    lines = [json.dumps(check(groups[0]))]
    lines += [_answer(pid, read) or "null" for pid, read in kids]
    sys.stdout.flush()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
