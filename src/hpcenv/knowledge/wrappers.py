"""The commands that wrap a launcher (``wrappers.toml``): axolotl, llamafactory-cli,
torchtune's ``tune run``, trl, composer, Lightning scripts. Each row says which launcher
the wrapper runs on a node and how the job's node count, rank, rendezvous and processes
per node reach it; ``job/command.py`` recognises them, ``job/launchers.py`` acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from hpcenv.knowledge import tables

FILE = "wrappers.toml"
PASSES = ("options", "dashdash", "remaining", "env", "tasks")


@dataclass(frozen=True, kw_only=True)
class Wrapper:
    """One row of ``wrappers.toml``."""

    name: str
    program: tuple[str, ...]  # the program names that start it
    subcommands: tuple[str, ...] = ()  # the word after the program that trains ("": none)
    launcher: str  # accelerate | torchrun | composer | srun
    passes: str  # one of PASSES
    env: tuple[tuple[str, str], ...] = ()  # NAME, template ({nodes}, {node_rank}, ...)
    launcher_option: str = ""  # the wrapper's own option choosing another launcher
    choices: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  # a plain script importing one of these
    #: the wrapper's own spelling of a launcher option -> the launcher's (underscored)
    aliases: tuple[tuple[str, str], ...] = ()
    per_node_options: tuple[str, ...] = ()  # its own option for processes per node
    source: str


def _row(r: dict[str, Any]) -> Wrapper:
    passes = str(r["passes"])
    if passes not in PASSES:  # the file is ours: a typo is a bug, said where
        raise ValueError(f"{FILE}: wrapper {r.get('name')!r}: passes {passes!r} not in {PASSES}")
    return Wrapper(
        name=str(r["name"]),
        program=tuple(str(p) for p in r.get("program", ())),
        subcommands=tuple(str(s) for s in r.get("subcommands", ())),
        launcher=str(r["launcher"]),
        passes=passes,
        env=tuple((str(k), str(v)) for k, v in r.get("env", {}).items()),
        launcher_option=str(r.get("launcher_option", "")),
        choices=tuple(str(c) for c in r.get("choices", ())),
        imports=tuple(str(m) for m in r.get("imports", ())),
        aliases=tuple((str(k), str(v)) for k, v in r.get("aliases", {}).items()),
        per_node_options=tuple(str(o) for o in r.get("per_node_options", ())),
        source=str(r["source"]),
    )


@cache
def wrappers() -> tuple[Wrapper, ...]:
    """Every row, in the file's order."""
    return tuple(_row(r) for r in tables.read(FILE)["wrapper"])


def by_program(name: str, subcommand: str) -> Wrapper | None:
    """The wrapper started as ``name [subcommand]``; None when none is."""
    for w in wrappers():
        if name in w.program and (not w.subcommands or subcommand in w.subcommands):
            return w
    return None


def by_name(name: str) -> Wrapper:
    """The row named ``name`` (a name ``job/command.py`` took from the table)."""
    return next(w for w in wrappers() if w.name == name)


def by_import(modules: set[str]) -> Wrapper | None:
    """The wrapper a script importing ``modules`` runs under (Lightning)."""
    return next((w for w in wrappers() if modules.intersection(w.imports)), None)


__all__ = ["Wrapper", "by_import", "by_name", "by_program", "wrappers"]
