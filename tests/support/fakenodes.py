"""Facts of GPU nodes this build machine cannot have (it has no GPU), and stand-ins for
what such a node runs: `nvidia-smi` (``fake_smi``), a site's Lmod tree (``modulefile_tree``).

``node(...)`` stands in for what ``hpcenv facts`` records on a real GPU node: a CPU
arch, an NVIDIA driver string and the GPUs' compute capabilities. The resolver, the
flash-attn decision and the plan only read these facts, so a recorded or constructed
node exercises exactly the code a real node would.
"""

from __future__ import annotations

import json
import stat
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


def fake_smi(bin_dir: Path, gpus: list[str], driver: str = "565.57.01", cuda: str = "12.7") -> Path:
    """A stand-in for ``nvidia-smi`` on a GPU node (this machine has none): answers the
    --query-gpu call with one CSV line per GPU and the bare call with the banner."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    rows = "\n".join(gpus)
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) cat <<'EOF'\n{rows}\nEOF\n;;\n"
        f"  *) echo '| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda} |';;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def modulefile_tree(root: Path, names: list[str]) -> Path:
    """A test modulefile tree (Lua modulefiles Lmod reads) standing in for a site's."""
    for name in names:
        path = root / f"{name}.lua"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'whatis("{name}: a test module")\n')
    return root
