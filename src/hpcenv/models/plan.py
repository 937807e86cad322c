"""The plan as data: what a build will do and why. Printable, diffable, JSON.

``plan.make_plan(profile, facts)`` produces it (issue: resolver); ``build`` carries
it out. Everything the builder needs is here, so a plan made on a laptop from
recorded facts is exactly what the cluster node would do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from hpcenv.models.torch_choice import TorchChoice  # the plan holds one (Plan.torch)


@dataclass(frozen=True, kw_only=True)
class FlashAttnChoice:
    """``flash_attn`` object of the resolve contract, plus the build settings."""

    action: str  # "wheel" | "build" | "skip"
    reason: str
    version: str | None = None
    cuda_archs: tuple[str, ...] = ()  # FLASH_ATTN_CUDA_ARCHS, e.g. ("90",)
    max_jobs: int | None = None
    nvcc_threads: int | None = None
    wheel_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class Step:
    """One line of the plan a person reads: what, and why."""

    kind: str  # python | torch | packages | flash-attn | fix | env | module | index
    what: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    profile: str
    arch: str | None
    python: str
    torch: TorchChoice
    packages: tuple[str, ...]  # other requirements, PEP 508
    flash_attn: FlashAttnChoice
    fixes: tuple[str, ...]  # sitecustomize fixes to install, e.g. ("sm90a",)
    fix_settings: dict[str, str] = field(default_factory=dict)  # e.g. TORCH_CUDA_ARCH_LIST
    env: dict[str, str] = field(default_factory=dict)  # set in every job/probe
    multi_node_env: dict[str, str] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()  # wheelhouses
    torch_wheel: str | None = None  # a matching torch wheel found in a wheelhouse (site mirror)
    offline: bool = False
    steps: tuple[Step, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def serialize(self) -> dict[str, Any]:
        """The plan as ``plan --json`` and ``doctor --json`` print it: ``to_json`` plus the
        digest (masked where it is printed)."""
        return {**self.to_json(), "digest": self.digest()}

    def digest(self) -> str:
        """Content hash of everything that changes what gets built (not the prose)."""
        data = self.to_json()
        for key in ("steps", "warnings"):
            data.pop(key)
        data["torch"] = {k: data["torch"][k] for k in ("version", "backend", "index_url")}
        blob = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
