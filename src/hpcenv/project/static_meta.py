"""A project's dependencies read as data, never by running it.

``setup.cfg``'s ``[options] install_requires``/``python_requires``/``[options.extras_require]``
(configparser), and a ``setup.py`` whose ``setup(...)`` call gives them as literals: parsed
with :mod:`ast`, never executed. Simple module-level assignments (``REQUIRED = [...]``) are
followed, and a requirements file the ``setup.py`` reads with ``open("requirements.txt")``
is named (the reader reads it, inside the project only). Anything else is dynamic: the
answer says so in one line, and only uv, asked by the user (``--allow-build``) or by a build,
runs the project's code (in a copy).
"""

from __future__ import annotations

import ast
import configparser
from dataclasses import dataclass
from pathlib import Path

from hpcenv.project import containment, read_once

#: The ``setup()`` keywords read (everything else in the call is left alone).
_KEYS = ("install_requires", "python_requires", "extras_require")


@dataclass(frozen=True, kw_only=True)
class Static:
    """What a ``setup.py``/``setup.cfg`` declares. ``dynamic`` is set (one line, naming the
    file) when its requirements cannot be read without running it."""

    requirements: tuple[str, ...] = ()
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()
    requires_python: str | None = None
    requirement_files: tuple[Path, ...] = ()  # files setup.py reads into install_requires
    dynamic: str | None = None

    def extra(self, name: str) -> tuple[str, ...] | None:
        return dict(self.extras).get(name)


class _Dynamic(Exception):
    """A value that only running the file would give."""


def dynamic_line(path: Path) -> str:
    """The one line said for a project whose requirements only its code knows."""
    who = "setup.py" if path.name == "setup.py" else f"{path.name}'s build backend"
    return (
        f"{containment.shown(path)}: {who} computes its requirements; run `hpcenv build "
        "--project` or pass --allow-build to let uv run it (in a copy of the project)"
    )


def of_setup_cfg(path: Path) -> Static | None:
    """``setup.cfg``'s declared requirements; None when it declares none (no ``[options]``
    ``install_requires``)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_once.text(path, "setup.cfg"), source=str(path))
    except configparser.Error as exc:
        return Static(dynamic=f"{path}: not readable as setup.cfg ({type(exc).__name__})")
    if not parser.has_option("options", "install_requires"):
        return None
    extras: list[tuple[str, tuple[str, ...]]] = []
    if parser.has_section("options.extras_require"):
        for name, value in parser.items("options.extras_require"):
            extras.append((name, _cfg_list(value)))
    python = parser.get("options", "python_requires", fallback=None)
    reqs = _cfg_list(parser.get("options", "install_requires"))
    return Static(requirements=reqs, extras=tuple(extras), requires_python=python or None)


def _cfg_list(value: str) -> tuple[str, ...]:
    """setup.cfg's dangling list: one requirement a line (comments and blanks dropped)."""
    lines = (ln.split(" #", 1)[0].strip() for ln in value.splitlines())
    return tuple(ln for ln in lines if ln and not ln.startswith("#"))


def of_setup_py(path: Path) -> Static:
    """``setup.py``'s literal ``install_requires``/``python_requires``/``extras_require``
    (see the module docstring); ``dynamic`` set when any of them is computed."""
    text = read_once.text(path, "setup.py")
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Static(dynamic=f"{path}: not parseable as Python; {dynamic_line(path)}")
    call = _setup_call(tree)
    if call is None or any(k.arg is None for k in call.keywords):
        return Static(dynamic=dynamic_line(path))
    env = _module_literals(tree, path.parent)
    values: dict[str, object] = {}
    try:
        for kw in call.keywords:
            if kw.arg in _KEYS:
                values[kw.arg] = _value(kw.value, env, path.parent)
    except _Dynamic:
        return Static(dynamic=dynamic_line(path))
    return _static_of(values, path)


def _static_of(values: dict[str, object], path: Path) -> Static:
    reqs, files = _requirements(values.get("install_requires"), path)
    extras_raw = values.get("extras_require") or {}
    python = values.get("python_requires")
    if not isinstance(extras_raw, dict) or not (python is None or isinstance(python, str)):
        return Static(dynamic=dynamic_line(path))
    extras = []
    for name, lines in extras_raw.items():
        got, more = _requirements(lines, path)
        if got is None or more or not isinstance(name, str):
            return Static(dynamic=dynamic_line(path))
        extras.append((name, got))
    if reqs is None:
        return Static(dynamic=dynamic_line(path))
    return Static(
        requirements=reqs, extras=tuple(extras), requires_python=python, requirement_files=files
    )


def _requirements(value: object, path: Path) -> tuple[tuple[str, ...] | None, tuple[Path, ...]]:
    """(requirement lines, requirements files named), None when not a list of strings."""
    if value is None:
        return (), ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return None, ()
    lines: list[str] = []
    files: list[Path] = []
    for item in value:
        if isinstance(item, _File):
            files.append(item.path)
        elif isinstance(item, str):
            lines += [ln.strip() for ln in item.splitlines() if ln.strip()]
        else:
            return None, ()
    return tuple(lines), tuple(files)


@dataclass(frozen=True)
class _File:
    """The lines of a file setup.py reads (read later by the requirements reader)."""

    path: Path


def _setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "setup":
                return node
    return None


def _module_literals(tree: ast.Module, here: Path) -> dict[str, object]:
    """Module-level ``NAME = <literal or file read>`` (and ``with open(F) as f: NAME =
    f.read()...``), in order; a name assigned twice or computed is left out."""
    env: dict[str, object] = {}
    seen: set[str] = set()
    for stmt in tree.body:
        for target, value, handles in _assignments(stmt, here):
            if target in seen:
                env.pop(target, None)
                continue
            seen.add(target)
            try:
                env[target] = _value(value, {**env, **handles}, here)
            except _Dynamic:
                continue
    return env


def _assignments(stmt: ast.stmt, here: Path) -> list[tuple[str, ast.expr, dict[str, object]]]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return [(target.id, stmt.value, {})] if isinstance(target, ast.Name) else []
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return [(stmt.target.id, stmt.value, {})]
    if isinstance(stmt, ast.With):
        handles: dict[str, object] = {}
        for item in stmt.items:
            var = item.optional_vars
            opened = _opened(item.context_expr, {}, here)
            if isinstance(var, ast.Name) and opened is not None:
                handles[var.id] = opened
        out: list[tuple[str, ast.expr, dict[str, object]]] = []
        for inner in stmt.body:
            out += [(t, v, {**handles, **h}) for t, v, h in _assignments(inner, here)]
        return out
    return []


_READS = ("read", "readlines", "splitlines", "split", "strip")


def _value(node: ast.expr, env: dict[str, object], here: Path) -> object:
    """The value of ``node`` from literals, ``env`` and files read; ``_Dynamic`` otherwise."""
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Dynamic(node.id)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, env, here) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _Dynamic("**")
        pairs = zip(node.keys, node.values, strict=True)
        return {_value(k, env, here): _value(v, env, here) for k, v in pairs if k is not None}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, env, here), _value(node.right, env, here)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        raise _Dynamic("+")
    if isinstance(node, ast.ListComp):
        return _comprehension(node, env, here)
    read = _file_read(node, env, here)
    if read is not None:
        return [read]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise _Dynamic(type(node).__name__) from exc


def _comprehension(node: ast.ListComp, env: dict[str, object], here: Path) -> object:
    """``[line.strip() for line in <a file read>]`` (with an optional filter): the file."""
    if len(node.generators) != 1:
        raise _Dynamic("comprehension")
    source = _value(node.generators[0].iter, env, here)
    if isinstance(source, list) and len(source) == 1 and isinstance(source[0], _File):
        return source
    raise _Dynamic("comprehension")


def _file_read(node: ast.expr, env: dict[str, object], here: Path) -> _File | None:
    """``open(F)`` / ``f`` followed by ``.read()``, ``.readlines()``, ``.splitlines()`` ..."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr not in _READS:
            return None
        node = node.func.value
    if isinstance(node, ast.Name) and isinstance(env.get(node.id), _File):
        return env[node.id]  # type: ignore[return-value]
    return _opened(node, env, here)


def _opened(node: ast.expr, env: dict[str, object], here: Path) -> _File | None:
    """``open("requirements.txt")`` or ``open(os.path.join(HERE, "requirements.txt"))``
    (or ``Path(...)``/``io.open``/``codecs.open``): the file, relative to setup.py."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in ("open", "read_text"):
        return None
    parts = _path_parts(node.args[0])
    return _File(here.joinpath(*parts)) if parts else None


def _path_parts(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "join":
        consts = [a.value for a in node.args if isinstance(a, ast.Constant)]
        last_constant = isinstance(node.args[-1], ast.Constant) if node.args else False
        if consts and last_constant and all(isinstance(c, str) for c in consts):
            return [str(c) for c in consts]
    return None


__all__ = ["Static", "dynamic_line", "of_setup_cfg", "of_setup_py"]
