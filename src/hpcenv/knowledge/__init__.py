"""Compatibility knowledge as data: the TOML files beside this module, typed and cached.

GENERATED from artifacts by ``hpcenv knowledge update`` (do not edit; rerun it):
``torch_pypi.toml`` (PyPI's torch wheels: builds, Pythons, GPU code read from the
wheels), ``torch_index.toml`` (a PyTorch index's variants and wheels, when one was read),
``vllm.toml`` (vLLM's minimum compute capability from its sdists),
``torch_companions.toml`` (torchvision/torchaudio paired with each torch release, from the
``Requires-Dist: torch`` of their own wheels).

HAND-KEPT, reviewed, every row with its source: ``cuda.toml`` (toolkit -> minimum
driver, NVIDIA's release notes), ``torch_leads.toml`` (what only PyTorch's build scripts
say; ``confirmed = false``), ``gpus.toml`` (which GPUs NVIDIA's forward compatibility
covers), ``packages.toml`` (flash-attn), ``network.toml`` (network recipes: the NCCL and
libfabric variables per interconnect, read by ``knowledge/network.py``), ``failures.toml``
(what a failed job died of: message patterns, cause, fix, source; ``knowledge/failures.py``). See
``docs/knowledge.md`` for where each row comes from and how to refresh. The code that
decides (``resolve``, ``flashattn``, ``audit``) only asks questions of these tables;
``hpcenv`` says so where it uses an unconfirmed row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from hpcenv.knowledge import companions as companion_data
from hpcenv.knowledge import releases, tables
from hpcenv.knowledge import vllm as vllm_data
from hpcenv.knowledge.companions import CompanionData
from hpcenv.knowledge.releases import ArchSet, PlatformVariants, TorchData, TorchRelease
from hpcenv.knowledge.vllm import VllmRange
from hpcenv.utils import answers

if TYPE_CHECKING:  # imported where used: a lock audited again asks packaging nothing
    from packaging.specifiers import SpecifierSet

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
    min_driver: str | None  # GA minimum driver; None: no source gives it (13.4, 13.5)
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
    #: the oldest GPU the major's toolkit compiles for ("7.5" for 13), and its source
    min_compute_capability: str | None = None
    cc_source: str = ""


@dataclass(frozen=True, kw_only=True)
class GpuPackage:
    """What one GPU package's own documentation says it needs beyond its CUDA major's
    floors (``packages.toml`` ``[[gpu_package]]``): JAX's CUDA plugins."""

    names: tuple[str, ...]
    cuda_major: int
    min_driver: str
    min_compute_capability: str
    fix: str  # the install that runs where this one cannot ("" : none named)
    source: str
    confirmed: bool


@dataclass(frozen=True, kw_only=True)
class FlashAttnWheels:
    """The official wheels of one flash-attn release (its publish workflow's matrix)."""

    version: str
    machines: tuple[str, ...]
    cuda_tags: dict[int, str]  # torch's CUDA major -> the tag in the wheel name ("12", "118")
    torch_minors: tuple[str, ...]
    pythons: tuple[str, ...]
    abis: tuple[str, ...]
    exclude: tuple[dict[str, str], ...]  # {"torch": "2.4", "python": "3.13"}
    source: str
    confirmed: bool

    def excluded(self, *, torch: str, python: str, cuda_major: int) -> bool:
        have = {"torch": torch, "python": python, "cuda": str(cuda_major)}
        return any(all(have.get(k) == v for k, v in ex.items()) for ex in self.exclude)


@dataclass(frozen=True, kw_only=True)
class FlashAttnKnowledge:
    min_compute_capability: str
    gb_per_job: float  # peak memory of one build job at default_nvcc_threads
    default_nvcc_threads: int
    memory_fraction: float
    build_archs: tuple[str, ...]  # compute capabilities FLASH_ATTN_CUDA_ARCHS can name
    wheel_url: str
    wheel_name: str
    wheels: tuple[FlashAttnWheels, ...]
    sources: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class ForwardCompat:
    """Which GPUs NVIDIA's forward-compatibility package (cuda-compat) supports."""

    datacenter: tuple[str, ...]  # name tokens of data center GPUs ("A100", "GH200", "Tesla")
    package: str  # "cuda-compat-{major}-{minor}"
    source: str
    confirmed: bool

    def covers(self, gpu_name: str) -> bool:
        """Whether ``gpu_name`` (as NVML reports it) is a data center part."""
        tokens = {t.upper() for t in re.split(r"[\s\-_/]+", gpu_name) if t}
        return bool(tokens & {d.upper() for d in self.datacenter})


@dataclass(frozen=True, kw_only=True)
class Knowledge:
    toolkits: tuple[Toolkit, ...]  # ascending by version
    majors: dict[int, MajorMinimum]
    torch: TorchData
    flash_attn: FlashAttnKnowledge
    vllm: tuple[VllmRange, ...]
    vllm_versions: tuple[str, ...]  # the vLLM releases vllm.toml has a row for
    forward_compat: ForwardCompat
    companions: CompanionData = companion_data.EMPTY  # torchvision/torchaudio per torch
    gpu_packages: tuple[GpuPackage, ...] = ()  # packages.toml [[gpu_package]]

    @property
    def releases(self) -> tuple[TorchRelease, ...]:
        return self.torch.releases

    # -- CUDA ----------------------------------------------------------------------

    def toolkit(self, cuda: str) -> Toolkit | None:
        return next((t for t in self.toolkits if t.version == cuda), None)

    def max_cuda_outright(self, driver: str) -> Toolkit | None:
        """The newest toolkit whose GA minimum driver ``driver`` meets, or None."""
        d = driver_key(driver)
        ok = [t for t in self.toolkits if t.min_driver and driver_key(t.min_driver) <= d]
        return ok[-1] if ok else None

    def major_minimum(self, major: int) -> MajorMinimum | None:
        return self.majors.get(major)

    def gpu_package(self, name: str) -> GpuPackage | None:
        """What ``name``'s own documentation says it needs (None: nothing beyond its CUDA
        major's floors)."""
        return next((g for g in self.gpu_packages if name in g.names), None)

    # -- torch ---------------------------------------------------------------------

    def known_versions(self) -> tuple[str, ...]:
        """Every torch release hpcenv has data for, ascending."""
        return self.torch.known_versions()

    def release_of(self, version: str) -> TorchRelease | None:
        """The release of exactly ``version``, or None when hpcenv does not know it."""
        return self.torch.release_of(version)

    def newest_with_variant(self, wanted: SpecifierSet, variant: str, cpu_arch: str) -> str | None:
        """The newest release in ``wanted`` that published ``variant`` for ``cpu_arch``
        (what conda installs for ``pytorch>=1.13`` beside ``pytorch-cuda=11.7``), or None."""
        for release in reversed(self.releases):
            plat = release.platforms.get(cpu_arch)
            if plat and variant in plat.variants and wanted.contains(release.version, True):
                return release.version
        return None

    def arch_set(self, variant: str, cpu_arch: str, torch: str) -> ArchSet | None:
        """GPU code of ``variant`` of torch ``torch`` (exact version or minor) on ``cpu_arch``."""
        return self.torch.arch_set(variant, cpu_arch, torch)

    # -- vLLM ----------------------------------------------------------------------

    def vllm_min_cc(self, version: str) -> VllmRange | None:
        """The vLLM range ``version`` falls in, or None where the data says nothing (each
        range's answer kept for a lock's next audit: ``utils/answers``)."""
        return next((r for r in self.vllm if _in_range(version, r.versions)), None)


def _in_range(version: str, versions: str) -> bool:
    """Whether ``version`` is in the specifier set ``versions`` (``>=0.10,<0.11``)."""

    return answers.in_specifier(versions, version)


# --- loading --------------------------------------------------------------------------


def _read(name: str) -> dict[str, Any]:
    return tables.read(name)


def _read_optional(name: str) -> dict[str, Any] | None:
    return tables.read_optional(name)


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


@cache
def load() -> Knowledge:
    """All knowledge files, read once per process (``tables``: parsed once per change)."""
    cuda = _read("cuda.toml")
    toolkits = sorted(
        (
            Toolkit(
                version=t["version"],
                min_driver=t.get("min_driver"),
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
            min_compute_capability=m.get("min_compute_capability"),
            cc_source=str(m.get("cc_source", "")),
        )
        for m in cuda["major"]
    }
    torch = releases.build(
        _read("torch_pypi.toml"), _read_optional("torch_index.toml"), _read("torch_leads.toml")
    )
    pkg = _read("packages.toml")
    fa = pkg["flash_attn"]
    flash = FlashAttnKnowledge(
        min_compute_capability=fa["min_compute_capability"],
        gb_per_job=float(fa["gb_per_job"]),
        default_nvcc_threads=int(fa["default_nvcc_threads"]),
        memory_fraction=float(fa["memory_fraction"]),
        build_archs=_strs(fa["build_archs"]),
        wheel_url=fa["wheel_url"],
        wheel_name=fa["wheel_name"],
        wheels=tuple(
            FlashAttnWheels(
                version=w["version"],
                machines=_strs(w["machines"]),
                cuda_tags={int(k): str(v) for k, v in w["cuda_tags"].items()},
                torch_minors=_strs(w["torch_minors"]),
                pythons=_strs(w["pythons"]),
                abis=_strs(w["abis"]),
                exclude=tuple({str(k): str(v) for k, v in e.items()} for e in w.get("exclude", ())),
                source=w["source"],
                confirmed=bool(w.get("confirmed", True)),
            )
            for w in fa.get("wheels", ())
        ),
        sources={k: str(v) for k, v in fa.items() if k.endswith("_source")},
    )
    vllm_rows = _read("vllm.toml")["release"]
    vllm = vllm_data.ranges(vllm_rows)
    fc = _read("gpus.toml")["forward_compat"]
    forward = ForwardCompat(
        datacenter=_strs(fc["datacenter"]),
        package=fc["package"],
        source=fc["source"],
        confirmed=bool(fc.get("confirmed", True)),
    )
    gpu_packages = tuple(
        GpuPackage(
            names=_strs(g["names"]),
            cuda_major=int(g["cuda_major"]),
            min_driver=str(g["min_driver"]),
            min_compute_capability=str(g["min_compute_capability"]),
            fix=str(g.get("fix", "")),
            source=g["source"],
            confirmed=bool(g.get("confirmed", True)),
        )
        for g in pkg.get("gpu_package", ())
    )
    return Knowledge(
        gpu_packages=gpu_packages,
        toolkits=tuple(toolkits),
        majors=majors,
        torch=torch,
        flash_attn=flash,
        vllm=vllm,
        vllm_versions=tuple(str(r["version"]) for r in vllm_rows),
        forward_compat=forward,
        companions=companion_data.build(_read_optional(companion_data.FILE)),
    )


__all__ = [
    "ArchSet",
    "CompanionData",
    "ForwardCompat",
    "GpuPackage",
    "Knowledge",
    "PlatformVariants",
    "TorchRelease",
    "cap_key",
    "driver_key",
    "load",
    "variant_cuda",
]
