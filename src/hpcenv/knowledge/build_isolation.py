"""Packages whose build imports torch (``[[torch_at_build]]`` of ``packages.toml``): the
ones ``hpcenv build`` installs with uv's ``--no-build-isolation-package NAME``, after torch
and their build requirements are in the venv (``hpcenv.build.torch_first``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from packaging.utils import canonicalize_name

from hpcenv.knowledge import tables


@dataclass(frozen=True, kw_only=True)
class TorchAtBuild:
    """One package whose ``setup.py`` imports torch, with what else its build imports."""

    name: str  # canonical
    build_requires: tuple[str, ...]
    source: str


@cache
def rows() -> dict[str, TorchAtBuild]:
    """``{canonical name: row}``, read once per process."""
    out: dict[str, TorchAtBuild] = {}
    for row in tables.read("packages.toml").get("torch_at_build", ()):
        name = canonicalize_name(row["name"])
        out[name] = TorchAtBuild(
            name=name,
            build_requires=tuple(str(r) for r in row.get("build_requires", ())),
            source=str(row["source"]),
        )
    return out


def among(names: Iterable[str]) -> list[TorchAtBuild]:
    """The rows of ``names`` (any spelling), sorted by name."""
    known = rows()
    return [known[n] for n in sorted({canonicalize_name(x) for x in names}) if n in known]


__all__ = ["TorchAtBuild", "among", "rows"]
