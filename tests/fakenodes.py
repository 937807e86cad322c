"""Facts of GPU nodes this build machine cannot have (it has no GPU).

``node(...)`` stands in for what ``hpcenv facts`` records on a real GPU node: a CPU
arch, an NVIDIA driver string and the GPUs' compute capabilities. The resolver, the
flash-attn decision and the plan only read these facts, so a recorded or constructed
node exercises exactly the code a real node would.
"""

from __future__ import annotations

import json
from pathlib import Path

from hpcenv.models.facts import Facts, Gpu, NvidiaFacts, to_json

NAMES = {
    "7.0": "Tesla V100-SXM2-32GB",
    "7.5": "Quadro RTX 6000",
    "8.0": "NVIDIA A100-SXM4-80GB",
    "8.6": "NVIDIA RTX A6000",
    "8.9": "NVIDIA L40S",
    "9.0": "NVIDIA GH200 120GB",
    "10.0": "NVIDIA B200",
    "12.0": "NVIDIA RTX PRO 6000",
}


def node(
    arch: str = "x86_64",
    driver: str | None = None,
    caps: tuple[str, ...] = (),
    *,
    cpus: int | None = 64,
    memory_gib: float | None = 512.0,
    python: str = "3.11.9",
) -> Facts:
    """A node with one GPU per entry of ``caps``; ``driver=None`` means no NVIDIA driver."""
    nvidia = None
    if driver is not None:
        gpus = tuple(
            Gpu(index=i, name=NAMES.get(c, f"GPU sm_{c}"), compute_capability=c, memory_mib=81920)
            for i, c in enumerate(caps)
        )
        nvidia = NvidiaFacts(driver_version=driver, cuda_driver_version=None, gpus=gpus)
    return Facts(
        hostname="stand-in",
        arch=arch,
        python=python,
        cpus=cpus,
        memory_gib=memory_gib,
        nvidia=nvidia,
        source="stand-in node",
    )


def write(facts: Facts, path: Path) -> Path:
    """Record ``facts`` as 'hpcenv facts --json' would, for CLI tests."""
    path.write_text(json.dumps(to_json(facts)))
    return path
