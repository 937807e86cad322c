"""Look up torch releases hpcenv's data lacks, on the PyTorch index and PyPI (optional).

The resolver calls a ``Lookup`` only when a torch spec names a release the data does not
have (next month's 2.16, or an old 2.0.1). It is bounded: one listing page per source,
a short timeout, no wheel downloads; what is unreachable is recorded, never raised, so
the resolver can fall back to inference (the ``--offline`` behaviour).

- the PyTorch index or site mirror (``<base>/torch/``, or ``<base>/<variant>/torch/`` for
  the variants asked about): which releases exist and their variants per CPU arch;
- PyPI (``<pypi>/pypi/torch/json``): which releases exist and for which CPU arches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from hpcenv.knowledge.releases import variant_order
from hpcenv.utils.errors import BadInput

if TYPE_CHECKING:  # imported when a lookup runs: urllib, ssl and email cost every plan ~20 ms
    from hpcenv.knowledge import listing

PYPI_ENV = "HPCENV_PYPI_URL"
DEFAULT_PYPI = "https://pypi.org"
TIMEOUT_S = 5.0


def pypi_base(environ: dict[str, str] | None = None) -> str:
    """$HPCENV_PYPI_URL or https://pypi.org (a PyPI mirror or a test's stand-in)."""
    env = os.environ if environ is None else environ
    return (env.get(PYPI_ENV) or DEFAULT_PYPI).rstrip("/")


@dataclass(frozen=True, kw_only=True)
class Listed:
    """A release an index or PyPI lists."""

    version: str
    variants: dict[str, tuple[str, ...]]  # CPU arch -> variants the PyTorch index lists
    pypi_arches: tuple[str, ...]  # CPU arches PyPI has a wheel for
    source: str  # what listed it


@dataclass(frozen=True, kw_only=True)
class Found:
    releases: tuple[Listed, ...] = ()  # matching the spec, newest first
    consulted: tuple[str, ...] = ()  # pages that answered
    unreachable: tuple[str, ...] = field(default=())  # "URL: why"


@dataclass(frozen=True, kw_only=True)
class Lookup:
    """Where to look, and how long to wait for each page."""

    index_base: str | None
    pypi: str | None = DEFAULT_PYPI
    timeout: float = TIMEOUT_S

    def __call__(self, spec: SpecifierSet, known: Iterable[str], variants: Iterable[str]) -> Found:
        """Releases matching ``spec`` that are not in ``known``; ``variants`` are the
        per-variant pages to try on a mirror without a ``<base>/torch/`` page."""
        from hpcenv.knowledge import listing

        have = set(known)
        index: dict[str, dict[str, set[str]]] = {}
        pypi: dict[str, set[str]] = {}
        consulted: list[str] = []
        unreachable: list[str] = []

        def listed(read: Callable[[], listing.Listing]) -> tuple[listing.WheelFile, ...]:
            try:
                got = read()
            except BadInput as exc:
                unreachable.append(str(exc))
                return ()
            consulted.extend(p.split("#")[0] for p in got.pages)
            return tuple(w for w in got.files if not w.yanked)

        if self.index_base:
            base = self.index_base
            for w in listed(lambda: listing.index_files(base, variants, timeout=self.timeout)):
                index.setdefault(w.version, {}).setdefault(w.arch, set()).add(w.variant or "cpu")
        if self.pypi:
            url = self.pypi
            for w in listed(lambda: listing.pypi_files(url, timeout=self.timeout)):
                pypi.setdefault(w.version, set()).add(w.arch)
        releases = []
        for version in sorted(set(index) | set(pypi), key=Version, reverse=True):
            if version in have or version not in spec:
                continue
            where = []
            if version in index:
                where.append(f"the PyTorch index {self.index_base}")
            if version in pypi:
                where.append(f"PyPI ({self.pypi})")
            releases.append(
                Listed(
                    version=version,
                    variants={
                        a: tuple(sorted(v, key=variant_order))
                        for a, v in index.get(version, {}).items()
                    },
                    pypi_arches=tuple(sorted(pypi.get(version, ()))),
                    source=" and ".join(where),
                )
            )
        return Found(
            releases=tuple(releases), consulted=tuple(consulted), unreachable=tuple(unreachable)
        )


__all__ = ["Found", "Listed", "Lookup", "pypi_base"]
