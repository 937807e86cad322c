"""torch releases: which variants exist per CPU arch, and the GPU code of each build.

Three files, each row with its ``source``:

- ``torch_pypi.toml`` (GENERATED from PyPI's wheels, ``hpcenv knowledge update``): every
  release hpcenv knows, the build PyPI carries per CPU arch and its GPU code;
- ``torch_index.toml`` (GENERATED from a PyTorch index or mirror, ``update --index``;
  absent while none was read): the variants the index publishes and their GPU code;
- ``torch_leads.toml`` (HAND-KEPT, ``confirmed = false``): what could only be read from
  PyTorch's build scripts (the index being unreachable from where the data is made):
  variant lists per minor from pytorch/test-infra's build matrix at each release's commit,
  GPU archs of index-only variants from pytorch/pytorch's build scripts.

Which row answers, most trusted first: for the variant list of (release, arch), the
index's, else the leads' for that minor plus PyPI's build and ``cpu``; for the GPU code of
(release, variant, arch), the index's wheel, PyPI's wheel, a lead, then the nearest
release whose wheel of that variant was read (``ArchSet.inferred_from`` names it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.version import InvalidVersion, Version

ARCHES = ("x86_64", "aarch64")


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


@dataclass(frozen=True, kw_only=True)
class ArchSet:
    """The GPU code of one torch build: (release, variant, CPU arch)."""

    variant: str
    cpu_arch: str
    torch: tuple[str, ...]  # releases (exact versions or minors) it was read for
    sass: tuple[str, ...]  # compute capabilities with machine code for the whole library
    ptx: tuple[str, ...]  # compute capabilities also shipped as PTX (driver JIT)
    partial: tuple[str, ...] = ()  # a few special kernels only (9.0a, one 8.9 kernel)
    ptx_isa: Mapping[str, str] = field(default_factory=dict)  # PTX arch -> PTX ISA version
    source: str
    confirmed: bool
    inferred_from: str | None = None  # the release whose build this was read from


@dataclass(frozen=True, kw_only=True)
class PlatformVariants:
    """One release on one CPU arch."""

    variants: tuple[str, ...]  # includes "cpu"
    pypi: str | None  # the variant `pip install torch` gets from PyPI; None: no PyPI wheel
    pythons: tuple[str, ...]  # "3.11", "3.13t"
    source: str
    confirmed: bool  # False: the variant list is a lead (or inferred), not read from an index
    inferred_from: str | None = None  # the release whose variant list this is
    cxx11abi: bool | None = None  # PyPI's wheel's C++ ABI (TorchConfig.cmake); None: unknown
    tags: tuple[str, ...] = ()  # PyPI's wheels' tags ("cp311-cp311-manylinux_2_28_x86_64")
    bundles_cudart: bool = False  # PyPI's CUDA build carries its CUDA runtime (1.8-1.13)


@dataclass(frozen=True, kw_only=True)
class TorchRelease:
    """One torch release (an exact version) hpcenv knows."""

    version: str  # "2.9.1"
    platforms: dict[str, PlatformVariants]  # CPU arch ->
    source: str

    @property
    def cxx11abi(self) -> bool | None:
        """The C++ ABI of the x86_64 wheels (flash-attn's official wheels are x86_64)."""
        plat = self.platforms.get("x86_64")
        return plat.cxx11abi if plat else None

    @property
    def minor(self) -> str:
        v = Version(self.version)
        return f"{v.major}.{v.minor}"

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version,)


def minor_of(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor}"


def variant_order(v: str) -> tuple[int, int]:
    """cpu first, then CUDA variants by number (cu118 < cu126 < cu130)."""
    digits = v[2:]
    return (0, 0) if not (v.startswith("cu") and digits.isdigit()) else (1, int(digits))


def _wheel_archset(row: Mapping[str, Any], confirmed: bool) -> ArchSet:
    return ArchSet(
        variant=row["variant"],
        cpu_arch=row["arch"],
        torch=(row["version"],),
        sass=_strs(row.get("sass", ())),
        ptx=_strs(row.get("ptx", ())),
        partial=_strs(row.get("partial", ())),
        ptx_isa={str(k): str(v) for k, v in row.get("ptx_isa", {}).items()},
        source=row["source"],
        confirmed=confirmed,
    )


@dataclass(frozen=True, kw_only=True)
class TorchData:
    """The merged torch tables (see the module docstring)."""

    releases: tuple[TorchRelease, ...]  # ascending by version
    wheels: tuple[ArchSet, ...]  # read from wheels (PyPI, index): confirmed
    leads: tuple[ArchSet, ...]  # hand-kept GPU archs of index-only variants
    variant_leads: Mapping[tuple[str, str], PlatformVariants]  # (release or minor, arch) ->

    def known_versions(self) -> tuple[str, ...]:
        return tuple(r.version for r in self.releases)

    def release_of(self, version: str) -> TorchRelease | None:
        """The release of exactly ``version`` (a local label is ignored), or None."""
        try:
            public = Version(version).public
        except InvalidVersion:
            return None
        return next((r for r in self.releases if r.version == public), None)

    def arch_set(self, variant: str, cpu_arch: str, torch: str) -> ArchSet | None:
        """The GPU code of ``variant`` of torch ``torch`` (an exact version, or a minor:
        its newest known release) on ``cpu_arch``; None when nothing says."""
        version = self._exact(torch)
        if version is None:
            return None
        for a in self.wheels:
            if a.variant == variant and a.cpu_arch == cpu_arch and version in a.torch:
                return a
        minor = minor_of(version)
        for a in self.leads:
            if a.variant == variant and a.cpu_arch == cpu_arch and minor in a.torch:
                return a
        return self.nearest_build(variant, cpu_arch, version)

    def nearest_build(self, variant: str, cpu_arch: str, version: str) -> ArchSet | None:
        """The GPU code of the nearest release (by version; a tie goes to the newer) whose
        ``variant`` wheel for ``cpu_arch`` was read, marked as inferred."""
        read = [a for a in self.wheels if a.variant == variant and a.cpu_arch == cpu_arch]
        if not read:
            return None
        order = sorted({v for a in read for v in a.torch} | {version}, key=Version)
        at = order.index(version)

        def distance(a: ArchSet) -> tuple[int, int]:
            i = order.index(a.torch[0])
            return abs(i - at), -i

        best = min(read, key=distance)
        return replace(
            best,
            confirmed=False,
            inferred_from=best.torch[0],
            source=f"inferred from torch {best.torch[0]}'s {variant} build ({best.source})",
        )

    def _exact(self, torch: str) -> str | None:
        try:
            v = Version(torch)
        except InvalidVersion:
            return None
        if len(v.release) >= 3:
            return v.public
        minor = f"{v.major}.{v.minor}"
        same = [r.version for r in self.releases if r.minor == minor]
        return same[-1] if same else f"{minor}.0"

    def listed_lead(self, version: str, cpu_arch: str) -> PlatformVariants | None:
        """The variant list a lead gives for exactly ``version`` (a ``release`` row of
        ``torch_leads.toml``: PyTorch's own page for that release), or None. Never a
        neighbour's list: which variants a release published is not inferred."""
        return self.variant_leads.get((version, cpu_arch))


def build(
    pypi: Mapping[str, Any], index: Mapping[str, Any] | None, leads: Mapping[str, Any]
) -> TorchData:
    """Merge the three files' tables (parsed TOML) into ``TorchData``."""
    pypi_rows = list(pypi.get("wheel", ()))
    index_rows = list((index or {}).get("wheel", ()))
    index_platforms = {(p["version"], p["arch"]): p for p in (index or {}).get("platform", ())}
    variant_leads: dict[tuple[str, str], PlatformVariants] = {}
    for lead in leads.get("variants", ()):
        for arch in ARCHES:
            if arch in lead:
                # a `release` row (one exact release) or a `minor` row (its releases)
                variant_leads[(lead.get("release") or lead["minor"], arch)] = PlatformVariants(
                    variants=_strs(lead[arch]),
                    pypi=None,
                    pythons=(),
                    source=lead["source"],
                    confirmed=False,
                )
    by_version: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in pypi_rows:
        by_version.setdefault(row["version"], {})[row["arch"]] = row
    for version, _arch in index_platforms:
        by_version.setdefault(version, {})
    releases = []
    for version in sorted(by_version, key=Version):
        rows = by_version[version]
        platforms: dict[str, PlatformVariants] = {}
        for arch in ARCHES:
            row = rows.get(arch)
            pypi_variant = row["variant"] if row else None
            pythons = _strs(row.get("pythons", ())) if row else ()
            idx = index_platforms.get((version, arch))
            if idx is not None:
                names = set(_strs(idx["variants"]))
                source, confirmed = str(idx["source"]), True
            elif (
                lead := variant_leads.get((version, arch))
                or variant_leads.get((minor_of(version), arch))
            ) is not None:
                names = set(lead.variants)
                source, confirmed = lead.source, False
            elif row is None:
                continue
            else:
                names = set()
                source, confirmed = "PyPI's wheel only (no index or lead lists more)", False
            if pypi_variant:
                names.add(pypi_variant)
            names.add("cpu")
            platforms[arch] = PlatformVariants(
                variants=tuple(sorted(names, key=variant_order)),
                pypi=pypi_variant,
                pythons=pythons,
                source=source,
                confirmed=confirmed,
                cxx11abi=row.get("cxx11abi") if row else None,
                tags=_strs(row.get("tags", ())) if row else (),
                bundles_cudart=bool(row.get("bundles_cudart")) if row else False,
            )
        releases.append(
            TorchRelease(
                version=version,
                platforms=platforms,
                source="; ".join(str(r["source"]) for r in rows.values()) or "index listing",
            )
        )
    wheels = [_wheel_archset(r, True) for r in index_rows]
    wheels += [_wheel_archset(r, True) for r in pypi_rows if r["variant"] != "cpu"]
    lead_archs = tuple(
        ArchSet(
            variant=a["variant"],
            cpu_arch=a["cpu_arch"],
            torch=_strs(a["torch"]),
            sass=_strs(a["sass"]),
            ptx=_strs(a.get("ptx", ())),
            partial=_strs(a.get("partial", ())),
            source=a["source"],
            confirmed=False,
        )
        for a in leads.get("archs", ())
    )
    return TorchData(
        releases=tuple(releases),
        wheels=tuple(wheels),
        leads=lead_archs,
        variant_leads=variant_leads,
    )


__all__ = ["ArchSet", "PlatformVariants", "TorchData", "TorchRelease", "build", "variant_order"]
