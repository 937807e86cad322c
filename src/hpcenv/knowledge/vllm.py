"""vLLM's minimum GPU compute capability per release, as the resolver and the probes read
it: ``vllm.toml``'s rows (written by ``hpcenv.knowledge.refresh.vllm``) folded into version
ranges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version


@dataclass(frozen=True, kw_only=True)
class VllmRange:
    versions: str  # a specifier set: ">=0.4.0,<0.20.0"
    min_compute_capability: str
    source: str
    confirmed: bool


def ranges(rows: Iterable[Mapping[str, Any]]) -> tuple[VllmRange, ...]:
    """Consecutive releases with the same minimum folded into one range (the last open)."""
    ordered = sorted(rows, key=lambda r: Version(str(r["version"])))
    out: list[VllmRange] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if (
            i < len(ordered)
            and ordered[i]["min_compute_capability"] == ordered[start]["min_compute_capability"]
        ):
            continue
        first = ordered[start]["version"]
        spec = f">={first}" + (f",<{ordered[i]['version']}" if i < len(ordered) else "")
        out.append(
            VllmRange(
                versions=spec,
                min_compute_capability=str(ordered[start]["min_compute_capability"]),
                source=(
                    f"CUDA_SUPPORTED_ARCHS in the CMakeLists.txt of the vLLM sdists {first} to "
                    f"{ordered[i - 1]['version']} (vllm.toml)"
                ),
                confirmed=True,
            )
        )
        start = i
    return tuple(out)


__all__ = ["VllmRange", "ranges"]
