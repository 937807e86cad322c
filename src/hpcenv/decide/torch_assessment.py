"""One variant of one torch release judged on one node (``Assessment``): what
``torch_variant.assess`` answers, what an audit reads (driver, GPU code) and what a torch
decision (``torch_decision``) is made of."""

from __future__ import annotations

from dataclasses import dataclass

from hpcenv.knowledge import ArchSet


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """Whether one variant of one torch release can run on one node, and why (not)."""

    variant: str
    cuda: str | None  # "12.6"; None for cpu
    min_driver: str | None  # GA minimum driver of that toolkit; None: unknown
    outright: bool  # driver >= min_driver
    minor_compat: bool  # not outright, but same-major minor-version compatibility holds
    major_min_driver: str | None
    archs: ArchSet | None
    missing: tuple[str, ...]  # compute capabilities the variant has no code for
    covered_by: tuple[str, ...]  # per GPU cap: how it is covered ("sm_90", "PTX 12.0")

    @property
    def arch_ok(self) -> bool:
        return self.archs is not None and not self.missing

    @property
    def runs(self) -> bool:
        return self.arch_ok and (self.outright or self.minor_compat)


__all__ = ["Assessment"]
