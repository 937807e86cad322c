"""Packages whose build imports torch (``[[torch_at_build]]`` of ``packages.toml``): the
ones ``hpcenv build`` installs with uv's ``--no-build-isolation-package NAME``, after torch
and their build requirements are in the venv (``hpcenv.build.torch_first``); and their
requirements per release (``dependency_metadata.toml``, read from their sdists by
``knowledge/refresh/dependency_metadata.py``), given to uv so that resolving a project
never builds them (``project/compile.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from hpcenv.knowledge import tables
from hpcenv.utils.names import canonicalize_name


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


@dataclass(frozen=True, kw_only=True)
class Metadata:
    """One release's requirements, as uv's ``dependency-metadata`` takes them."""

    name: str  # canonical
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str | None
    source: str


@cache
def _metadata() -> dict[str, tuple[Metadata, ...]]:
    out: dict[str, list[Metadata]] = {}
    for row in (tables.read_optional("dependency_metadata.toml") or {}).get("release", ()):
        name = canonicalize_name(row["name"])
        out.setdefault(name, []).append(
            Metadata(
                name=name,
                version=str(row["version"]),
                requires_dist=tuple(str(r) for r in row.get("requires_dist", ())),
                requires_python=row.get("requires_python"),
                source=str(row["source"]),
            )
        )
    return {n: tuple(rows) for n, rows in out.items()}


def dependency_metadata(names: Iterable[str]) -> list[Metadata]:
    """Every known release's requirements of the ``[[torch_at_build]]`` packages among
    ``names`` (any spelling)."""
    known = _metadata()
    wanted = sorted({canonicalize_name(x) for x in names} & set(rows()))
    return [m for n in wanted for m in known.get(n, ())]


def among(names: Iterable[str]) -> list[TorchAtBuild]:
    """The rows of ``names`` (any spelling), sorted by name."""
    known = rows()
    return [known[n] for n in sorted({canonicalize_name(x) for x in names}) if n in known]


__all__ = ["Metadata", "TorchAtBuild", "among", "dependency_metadata", "rows"]
