"""PEP 508 markers evaluated with *several* active extras, as uv evaluates its lock.

``packaging`` evaluates ``extra`` against one string. uv's universal ``uv.lock`` encodes
its conflicting extras and dependency groups as extras and combines them freely:
``extra == 'group-13-open-instruct-cuda12' and extra != 'group-13-open-instruct-cuda13'``,
where several of them may be active at once. uv's encoding (crates/uv-resolver,
``universal_marker.rs``): ``extra-<len>-<package>-<extra>``, ``group-<len>-<package>-<group>``
and ``project-<len>-<package>`` (package-level conflicts), ``<len>`` the length of the
normalised package name in bytes. Here ``extra == 'X'`` holds when ``X`` is active and
``extra != 'X'`` when it is not; every other comparison is handed to ``packaging``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lp>\()|(?P<rp>\))
        |(?P<str>'[^']*'|"[^"]*")
        |(?P<op>===|==|!=|<=|>=|~=|<|>)
        |(?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)


class MarkerError(ValueError):
    """A marker that does not parse, or whose comparison cannot be evaluated."""


def encode_extra(package: str, extra: str) -> str:
    name = canonicalize_name(package)
    return f"extra-{len(name)}-{name}-{canonicalize_name(extra)}"


def encode_group(package: str, group: str) -> str:
    name = canonicalize_name(package)
    return f"group-{len(name)}-{name}-{canonicalize_name(group)}"


def encode_project(package: str) -> str:
    name = canonicalize_name(package)
    return f"project-{len(name)}-{name}"


@dataclass(frozen=True, kw_only=True)
class _Atom:
    left: str  # as written: a variable name or a quoted string
    op: str
    right: str


#: A parsed marker: an atom, or ("and" | "or", [children])
_Node = _Atom | tuple[str, list["_Node"]]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise MarkerError(f"cannot parse marker {text!r} at {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise MarkerError(f"marker {self.text!r} ends too early")
        self.i += 1
        return tok

    def parse(self) -> _Node:
        node = self.disjunction()
        if self.peek() is not None:
            raise MarkerError(f"unexpected {self.peek()[1]!r} in marker {self.text!r}")  # type: ignore[index]
        return node

    def disjunction(self) -> _Node:
        parts = [self.conjunction()]
        while self.peek() == ("word", "or"):
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else ("or", parts)

    def conjunction(self) -> _Node:
        parts = [self.item()]
        while self.peek() == ("word", "and"):
            self.take()
            parts.append(self.item())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def item(self) -> _Node:
        if self.peek() == ("lp", "("):
            self.take()
            node = self.disjunction()
            if self.take() != ("rp", ")"):
                raise MarkerError(f"unbalanced parentheses in marker {self.text!r}")
            return node
        left = self.value()
        kind, op = self.take()
        if kind == "word" and op == "not":
            if self.take() != ("word", "in"):
                raise MarkerError(f"'not' without 'in' in marker {self.text!r}")
            op = "not in"
        elif not (kind == "op" or (kind == "word" and op == "in")):
            raise MarkerError(f"expected a comparison in marker {self.text!r}, got {op!r}")
        return _Atom(left=left, op=op, right=self.value())

    def value(self) -> str:
        kind, text = self.take()
        if kind not in ("str", "word") or text in ("and", "or", "in", "not"):
            raise MarkerError(f"expected a value in marker {self.text!r}, got {text!r}")
        return text


def _unquote(text: str) -> str | None:
    return text[1:-1] if text[:1] in "'\"" else None


class Evaluator:
    """Evaluates markers for one environment and one set of active (encoded) extras."""

    def __init__(self, environment: Mapping[str, str], active: Iterable[str] = ()) -> None:
        self.env = {k: v for k, v in environment.items() if k != "extra"}
        self.env["extra"] = ""
        self.active = frozenset(canonicalize_name(a) for a in active)
        self._parsed: dict[str, _Node] = {}
        self._atoms: dict[_Atom, bool] = {}

    def with_active(self, active: Iterable[str]) -> Evaluator:
        other = Evaluator(self.env, active)
        other._parsed = self._parsed  # parse trees do not depend on the extras
        return other

    def __call__(self, marker: str | None) -> bool:
        if marker is None or not marker.strip():
            return True
        tree = self._parsed.get(marker)
        if tree is None:
            tree = self._parsed[marker] = _Parser(marker).parse()
        return self._eval(tree)

    def _eval(self, node: _Node) -> bool:
        if isinstance(node, _Atom):
            return self._atom(node)
        kind, parts = node
        if kind == "and":
            return all(self._eval(p) for p in parts)
        return any(self._eval(p) for p in parts)

    def _atom(self, atom: _Atom) -> bool:
        for var, other in ((atom.left, atom.right), (atom.right, atom.left)):
            value = _unquote(other)
            if var == "extra" and value is not None and atom.op in ("==", "!="):
                present = canonicalize_name(value) in self.active
                return present if atom.op == "==" else not present
        known = self._atoms.get(atom)
        if known is None:
            try:
                known = Marker(f"{atom.left} {atom.op} {atom.right}").evaluate(self.env)
            except InvalidMarker as exc:
                raise MarkerError(str(exc)) from exc
            except (UndefinedComparison, UndefinedEnvironmentName, InvalidVersion) as exc:
                raise MarkerError(
                    f"{atom.left} {atom.op} {atom.right} cannot be evaluated ({exc})"
                ) from exc
            self._atoms[atom] = known
        return known


def check(marker: str) -> None:
    """Raise ``MarkerError`` when ``marker`` does not parse."""
    _Parser(marker).parse()
    try:
        Marker(marker)
    except InvalidMarker as exc:
        raise MarkerError(str(exc)) from exc


__all__ = ["Evaluator", "MarkerError", "check", "encode_extra", "encode_group", "encode_project"]
