"""What a failed job died of, as data: ``failures.toml`` beside this module (hand-kept,
a source per cause), typed, compiled and cached.

A ``Cause`` is one known failure: the regular expressions that show it in a log line,
its tier (which cause wins when a log shows several), the cause and the fix in words
(with the named groups of the pattern as placeholders), where the message comes from,
and a real example of it. The ``Catalog`` adds what the matcher needs around the causes:
the literal keys every matching line contains (the prefilter that makes a 1 GB log
cheap), the rank/node prefixes of a line, the cascade that follows a failure, and the
patterns of a failing line hpcenv does not know. ``decide/explain.py`` asks these tables.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

FILE = "failures.toml"


def _runs(items: Any) -> list[str]:
    """The runs of literal characters every match of the parsed pattern ``items`` holds:
    consecutive literals at its top level and inside its groups (not in a branch, a
    repeat or a class, which may match without them)."""
    from re import _parser  # type: ignore[attr-defined]

    runs, run = [], ""
    for op, av in items:
        if op is _parser.LITERAL:
            run += chr(av)
            continue
        runs.append(run)
        run = ""
        if op is _parser.SUBPATTERN and not av[1] & re.IGNORECASE:
            runs += _runs(av[3])
    return [*runs, run]


@functools.lru_cache(maxsize=4096)
def anchor(pattern: re.Pattern[str]) -> str:
    """The longest literal every match of ``pattern`` contains ("" when none is known):
    ``anchor in line`` (a substring search in C) before the regex, so a line with none
    of a pattern's words costs no regex search."""
    if pattern.flags & re.IGNORECASE:
        return ""
    try:
        from re import _parser  # type: ignore[attr-defined]

        return max(_runs(_parser.parse(pattern.pattern, pattern.flags)), key=len, default="")
    except Exception:  # an internal module of CPython: without it, no anchor
        return ""


def gate(catalog: Catalog) -> re.Pattern[str] | None:
    """One search for the anchors of every pattern a line meets (prefixes aside): a line
    with none of them can match none, and is passed by without a regex each. None when a
    pattern has no anchor (every line must then meet the patterns)."""
    patterns = [*catalog.in_line, *catalog.world, *catalog.cascade, *catalog.unknown]
    patterns += [p for cause in catalog.causes for p in cause.patterns]
    words = {anchor(p) for p in patterns}
    if "" in words:
        return None
    return re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))


def search(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``, after the cheap check that its anchor is in ``text``."""
    word = anchor(pattern)
    return pattern.search(text) if not word or word in text else None


@dataclass(frozen=True, kw_only=True)
class Cause:
    id: str
    tier: int
    patterns: tuple[re.Pattern[str], ...]
    cause: str  # one line; placeholders: the patterns' named groups, {rank}, {node}
    fix: str
    source: str  # a public issue thread, the docs or the source of the message
    example: str  # the message as its source shows it
    after: int = 0  # following lines read for ``fields`` (a multi-line summary)
    after_key: bytes = b""  # the key of the summary's first line (those lines get ``after``)
    fields: tuple[re.Pattern[str], ...] = ()
    group_by: str = ""  # a named group: the lines of the same value are one event

    def match(self, text: str) -> re.Match[str] | None:
        for pattern in self.patterns:
            if m := search(pattern, text):
                return m
        return None


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """SLURM's own verdict on a job (a job state), as the cause it names."""

    state: str
    cause_id: str
    tier: int
    cause: str  # placeholders: {job_id} {state} {exit_code} {nodes} {reason}
    fix: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Catalog:
    keys: tuple[bytes, ...]  # every line a pattern matches contains one of these
    prefixes: tuple[re.Pattern[str], ...]  # rank/node prefixes, removed in order
    world: tuple[re.Pattern[str], ...]  # the number of ranks, where a line says it
    cascade: tuple[re.Pattern[str], ...]  # what follows a failure: never its cause
    unknown: tuple[re.Pattern[str], ...]  # a failing line of an unknown failure
    causes: tuple[Cause, ...]
    in_line: tuple[re.Pattern[str], ...] = ()  # a rank or local rank named in a line's words
    traceback_key: bytes = b""  # a Python traceback's header
    traceback_lines: int = 0  # lines read after it for its exception line
    verdicts: tuple[Verdict, ...] = ()  # SLURM's job states that name a cause
    carries: re.Pattern[str] | None = None  # the error a cascade line carries (``inner``)

    def verdict(self, state: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.state == state), None)

    def after(self) -> dict[bytes, int]:
        """The lines to read after a line with each summary key (a traceback's too)."""
        found = {c.after_key: c.after for c in self.causes if c.after and c.after_key}
        if self.traceback_key:
            found[self.traceback_key] = max(found.get(self.traceback_key, 0), self.traceback_lines)
        return found


def _compile(patterns: list[str], where: str) -> tuple[re.Pattern[str], ...]:
    try:
        return tuple(re.compile(p) for p in patterns)
    except re.error as exc:  # a data bug, caught by the tests
        raise ValueError(f"{FILE}: {where}: {exc}") from exc


def _cause(row: dict[str, Any]) -> Cause:
    where = f"cause {row.get('id')!r}"
    return Cause(
        id=str(row["id"]),
        tier=int(row["tier"]),
        patterns=_compile(list(row["patterns"]), where),
        cause=str(row["cause"]),
        fix=str(row["fix"]),
        source=str(row["source"]),
        example=str(row["example"]),
        after=int(row.get("after", 0)),
        after_key=str(row.get("after_key", "")).encode(),
        fields=_compile(list(row.get("fields", [])), where),
        group_by=str(row.get("group_by", "")),
    )


def _verdicts(table: dict[str, Any], causes: tuple[Cause, ...]) -> tuple[Verdict, ...]:
    fixes = {c.id: c.fix for c in causes}
    source = str(table.get("source", ""))
    return tuple(
        Verdict(
            state=state,
            cause_id=str(row["cause_id"]),
            tier=int(row["tier"]),
            cause=str(row["cause"]),
            fix=str(row.get("fix") or fixes.get(row["cause_id"], "")),
            source=source,
        )
        for state, row in table.items()
        if isinstance(row, dict)
    )


def parse(data: dict[str, Any]) -> Catalog:
    """The catalog of a parsed ``failures.toml``."""
    unknown = data["unknown"]
    keys = [*data["prefilter"]["keys"], *unknown.get("keys", [])]
    causes = tuple(_cause(row) for row in data["cause"])
    return Catalog(
        keys=tuple(dict.fromkeys(k.encode() for k in keys)),
        prefixes=_compile(list(data["prefix"]["patterns"]), "prefix"),
        in_line=_compile(list(data["prefix"].get("in_line", [])), "prefix.in_line"),
        world=_compile(list(data["world"]["patterns"]), "world"),
        cascade=_compile(list(data["cascade"]["patterns"]), "cascade"),
        unknown=_compile(list(unknown["patterns"]), "unknown"),
        causes=causes,
        verdicts=_verdicts(data.get("slurm_state", {}), causes),
        carries=_compile([data["cascade"]["carries"]], "cascade")[0]
        if data["cascade"].get("carries")
        else None,
        traceback_key=str(unknown.get("traceback_key", "")).encode(),
        traceback_lines=int(unknown.get("traceback_lines", 0)),
    )


@cache
def load() -> Catalog:
    """The shipped catalog (read once)."""
    text = resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8")
    return parse(tomllib.loads(text))
