"""Compatibility knowledge as data: the TOML files beside this module, typed and cached.

``cuda.toml`` (toolkit -> minimum driver), ``torch.toml`` (releases, variants per CPU
arch, GPU archs per variant) and ``packages.toml`` (flash-attn, vLLM). The code that
decides (``resolve``, ``flashattn``, ``audit``) only asks questions of these tables, so a
new torch release or a corrected driver number is a data edit with its source, not a
code change. Entries marked ``confirmed = false`` are leads (KNOWLEDGE.md calls them
unconfirmed or probable); they are used, and ``hpcenv`` says so where it matters.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]


# --- small value helpers --------------------------------------------------------------


def driver_key(driver: str) -> Version:
    """A driver string (``565.57.01``, ``570.26``) as a comparable version.

    Components compare numerically, so ``565.57.01 > 560.28.03`` and ``570.26 <
    570.124.06``. Raises ``InvalidVersion`` on text that is not dotted numbers.
    """
    return Version(driver.strip())


def cap_key(cap: str) -> tuple[int, int]:
    """``"9.0"`` -> (9, 0); ``"8.6"`` -> (8, 6)."""
    major, _, minor = cap.partition(".")
    return int(major), int(minor or 0)


def variant_cuda(variant: str) -> str | None:
    """``cu126`` -> ``"12.6"``, ``cu130`` -> ``"13.0"``; ``cpu`` -> None."""
    if not variant.startswith("cu") or not variant[2:].isdigit() or len(variant) < 5:
        return None
    digits = variant[2:]
    return f"{int(digits[:-1])}.{int(digits[-1])}"


def cuda_key(cuda: str) -> tuple[int, int]:
    return cap_key(cuda)


# --- records --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    version: str  # "12.6"
    min_driver: str  # GA minimum driver
    updates: tuple[str, ...]
    source: str
    confirmed: bool

    @property
    def major(self) -> int:
        return cuda_key(self.version)[0]


@dataclass(frozen=True, kw_only=True)
class MajorMinimum:
    major: int
    min_driver: str  # minor-version compatibility floor for the whole major
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class PlatformVariants:
    variants: tuple[str, ...]  # includes "cpu"
    pypi: str  # the variant `pip install torch` gets from PyPI on this arch
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class TorchRelease:
    minor: str  # "2.9"
    versions: tuple[str, ...]  # known patch releases, ascending
    cxx11abi: bool
    platforms: dict[str, PlatformVariants]  # CPU arch -> variants
    source: str


@dataclass(frozen=True, kw_only=True)
class ArchSet:
    variant: str
    cpu_arch: str
    torch: tuple[str, ...]  # torch minors
    sass: tuple[str, ...]  # compute capabilities with SASS
    ptx: tuple[str, ...]  # compute capabilities also shipped as PTX
    extra: tuple[str, ...]  # arch-specific targets (9.0a)
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class FlashAttnWheels:
    version: str
    machines: tuple[str, ...]
    cuda_majors: tuple[int, ...]
    torch_minors: tuple[str, ...]
    pythons: tuple[str, ...]
    abis: tuple[str, ...]
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class FlashAttnKnowledge:
    min_compute_capability: str
    gb_per_nvcc_thread: float
    default_nvcc_threads: int
    memory_fraction: float
    build_archs: tuple[str, ...]  # compute capabilities FLASH_ATTN_CUDA_ARCHS can name
    wheel_url: str
    wheel_name: str
    wheels: tuple[FlashAttnWheels, ...]
    sources: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class VllmRange:
    versions: str  # a specifier set
    min_compute_capability: str
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class Knowledge:
    toolkits: tuple[Toolkit, ...]  # ascending by version
    majors: dict[int, MajorMinimum]
    releases: tuple[TorchRelease, ...]  # ascending by minor
    archs: tuple[ArchSet, ...]
    flash_attn: FlashAttnKnowledge
    vllm: tuple[VllmRange, ...]

    # -- CUDA ----------------------------------------------------------------------

    def toolkit(self, cuda: str) -> Toolkit | None:
        return next((t for t in self.toolkits if t.version == cuda), None)

    def max_cuda_outright(self, driver: str) -> Toolkit | None:
        """The newest toolkit whose GA minimum driver ``driver`` meets, or None."""
        d = driver_key(driver)
        ok = [t for t in self.toolkits if driver_key(t.min_driver) <= d]
        return ok[-1] if ok else None

    def major_minimum(self, major: int) -> MajorMinimum | None:
        return self.majors.get(major)

    # -- torch ---------------------------------------------------------------------

    def known_versions(self) -> tuple[str, ...]:
        return tuple(v for r in self.releases for v in r.versions)

    def release_of(self, version: str) -> TorchRelease | None:
        try:
            v = Version(version)
        except InvalidVersion:
            return None
        minor = f"{v.major}.{v.minor}"
        return next((r for r in self.releases if r.minor == minor), None)

    def arch_set(self, variant: str, cpu_arch: str, torch_minor: str) -> ArchSet | None:
        for a in self.archs:
            if a.variant == variant and a.cpu_arch == cpu_arch and torch_minor in a.torch:
                return a
        return None

    # -- vLLM ----------------------------------------------------------------------

    def vllm_min_cc(self, version: str) -> VllmRange | None:
        """The vLLM range ``version`` falls in, or None where the data says nothing."""
        v = Version(version)
        return next((r for r in self.vllm if v in SpecifierSet(r.versions)), None)


# --- loading --------------------------------------------------------------------------


def _read(name: str) -> dict[str, Any]:
    text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = tomllib.loads(text)
    return data


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


@cache
def load() -> Knowledge:
    """All knowledge files, parsed once per process."""
    cuda = _read("cuda.toml")
    toolkits = sorted(
        (
            Toolkit(
                version=t["version"],
                min_driver=t["min_driver"],
                updates=_strs(t.get("updates", ())),
                source=t["source"],
                confirmed=bool(t.get("confirmed", True)),
            )
            for t in cuda["toolkit"]
        ),
        key=lambda t: cuda_key(t.version),
    )
    majors = {
        int(m["major"]): MajorMinimum(
            major=int(m["major"]),
            min_driver=m["min_driver"],
            source=m["source"],
            confirmed=bool(m.get("confirmed", True)),
        )
        for m in cuda["major"]
    }
    tdata = _read("torch.toml")
    releases = []
    for r in tdata["release"]:
        platforms = {
            arch: PlatformVariants(
                variants=_strs(r[arch]["variants"]),
                pypi=r[arch]["pypi"],
                source=r[arch]["source"],
                confirmed=bool(r[arch].get("confirmed", True)),
            )
            for arch in ("x86_64", "aarch64")
            if arch in r
        }
        releases.append(
            TorchRelease(
                minor=r["minor"],
                versions=tuple(sorted(_strs(r["versions"]), key=Version)),
                cxx11abi=bool(r["cxx11abi"]),
                platforms=platforms,
                source=r["source"],
            )
        )
    releases.sort(key=lambda r: Version(r.minor))
    archs = tuple(
        ArchSet(
            variant=a["variant"],
            cpu_arch=a["cpu_arch"],
            torch=_strs(a["torch"]),
            sass=_strs(a["sass"]),
            ptx=_strs(a.get("ptx", ())),
            extra=_strs(a.get("extra", ())),
            source=a["source"],
            confirmed=bool(a.get("confirmed", True)),
        )
        for a in tdata["archs"]
    )
    pkg = _read("packages.toml")
    fa = pkg["flash_attn"]
    flash = FlashAttnKnowledge(
        min_compute_capability=fa["min_compute_capability"],
        gb_per_nvcc_thread=float(fa["gb_per_nvcc_thread"]),
        default_nvcc_threads=int(fa["default_nvcc_threads"]),
        memory_fraction=float(fa["memory_fraction"]),
        build_archs=_strs(fa["build_archs"]),
        wheel_url=fa["wheel_url"],
        wheel_name=fa["wheel_name"],
        wheels=tuple(
            FlashAttnWheels(
                version=w["version"],
                machines=_strs(w["machines"]),
                cuda_majors=tuple(int(x) for x in w["cuda_majors"]),
                torch_minors=_strs(w["torch_minors"]),
                pythons=_strs(w["pythons"]),
                abis=_strs(w["abis"]),
                source=w["source"],
                confirmed=bool(w.get("confirmed", True)),
            )
            for w in fa.get("wheels", ())
        ),
        sources={k: str(v) for k, v in fa.items() if k.endswith("_source")},
    )
    vllm = tuple(
        VllmRange(
            versions=v["versions"],
            min_compute_capability=v["min_compute_capability"],
            source=v["source"],
            confirmed=bool(v.get("confirmed", True)),
        )
        for v in pkg["vllm"]
    )
    return Knowledge(
        toolkits=tuple(toolkits),
        majors=majors,
        releases=tuple(releases),
        archs=archs,
        flash_attn=flash,
        vllm=vllm,
    )


__all__ = [
    "ArchSet",
    "Knowledge",
    "TorchRelease",
    "cap_key",
    "driver_key",
    "load",
    "variant_cuda",
]
