"""torchvision/torchaudio paired with each torch release, as the decisions read it:
``torch_companions.toml``'s rows (written by ``hpcenv.knowledge.refresh.companions`` from the
companions' own wheels) as typed records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FILE = "torch_companions.toml"
NAMES = ("torchvision", "torchaudio")


@dataclass(frozen=True, kw_only=True)
class Released:
    """One companion release and the torch requirement its wheel's METADATA carries."""

    name: str  # "torchvision"
    version: str  # "0.28.0"
    requires: str | None  # "==2.13.0" as written; None: its METADATA names no torch
    source: str  # the wheel read: URL#sha256


@dataclass(frozen=True, kw_only=True)
class Pairing:
    """One torch release's companions: per name the release paired with it, or the reason
    there is none."""

    torch: str  # "2.13.0"
    paired: tuple[Released, ...]
    missing: tuple[tuple[str, str], ...]  # (name, why none)

    def companion(self, name: str) -> Released | None:
        return next((r for r in self.paired if r.name == name), None)

    def reason(self, name: str) -> str | None:
        return next((why for n, why in self.missing if n == name), None)


@dataclass(frozen=True, kw_only=True)
class CompanionData:
    pairs: tuple[Pairing, ...]  # ascending by torch release
    released: tuple[Released, ...]  # every companion release read

    def pairing(self, torch: str) -> Pairing | None:
        """The row of exactly torch ``torch`` (a public version, ``2.6.0``), or None."""
        return next((p for p in self.pairs if p.torch == torch), None)

    def release(self, name: str, version: str) -> Released | None:
        return next((r for r in self.released if r.name == name and r.version == version), None)

    def span(self) -> str:
        """``1.8.0 to 2.15.0``: the torch releases the data has rows for."""
        if not self.pairs:
            return "none"
        return f"{self.pairs[0].torch} to {self.pairs[-1].torch}"


EMPTY = CompanionData(pairs=(), released=())


def _pairing(row: Mapping[str, Any]) -> Pairing:
    torch = str(row["version"])
    paired = []
    missing = []
    for name in NAMES:
        version = row.get(name)
        if version is None:
            missing.append((name, str(row.get(f"{name}_none", f"no {name} row"))))
            continue
        requires = str(row.get(f"{name}_requires", "")).removeprefix("torch")
        paired.append(
            Released(
                name=name,
                version=str(version),
                requires=requires or None,
                source=str(row.get(f"{name}_source", FILE)),
            )
        )
    return Pairing(torch=torch, paired=tuple(paired), missing=tuple(missing))


def build(data: Mapping[str, Any] | None) -> CompanionData:
    """The typed data of ``torch_companions.toml`` (``EMPTY`` when the file is absent)."""
    if not data:
        return EMPTY
    pairs = tuple(_pairing(row) for row in data.get("torch", ()))
    released = tuple(
        Released(
            name=str(r["package"]),
            version=str(r["version"]),
            requires=str(r["requires"]) if r.get("requires") else None,
            source=str(r["source"]),
        )
        for r in data.get("read", ())
    )
    return CompanionData(pairs=pairs, released=released)


__all__ = ["EMPTY", "FILE", "CompanionData", "Pairing", "Released", "build"]
