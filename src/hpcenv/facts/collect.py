"""Collect the facts of this node: pure reads, no torch import, a few cheap subprocesses.

``collect()`` reads this host; ``load(path)`` reads facts recorded on another node
(``hpcenv facts --json > FILE``; ``models/facts.py`` is their data, without I/O);
``for_args(path)`` returns recorded facts when a ``--facts FILE`` was given and this
host's otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from hpcenv.models.facts import Facts, from_json
from hpcenv.utils import fsio


def glibc_version() -> str | None:
    value = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if value and value.startswith("glibc "):
        return value.split()[1]
    return None


def memory_gib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", meminfo.read_text(), re.M)
    except OSError:
        return None
    return round(int(m.group(1)) / 1024 / 1024, 1) if m else None


def loaded_modules(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(m for m in env.get("LOADEDMODULES", "").split(":") if m)


#: Seconds facts gives a helper (nvidia-smi, fi_info) before it counts as hung; both run
#: at the same time, so a node where both hang costs this once.
HELPER_TIMEOUT_S = 5.0


def collect(
    env: Mapping[str, str] | None = None, *, network: bool = True, with_scratch: bool = False
) -> Facts:
    """The facts of this host.

    ``fi_info -l`` is the slowest read (libfabric loads every provider, ~0.3 s): it is
    cached (``hpcenv.facts.fabric``), and when it runs it runs in a thread while the NVIDIA
    driver and the rest are read. ``network=False`` skips it and the plugin search
    (building needs no network facts, and a no-op build must be fast): the network
    facts are then unknown. ``with_scratch`` adds the node-local scratch candidates
    (``hpcenv.facts.scratch``; ``hpcenv facts --scratch``).
    """
    # the readers are imported here: a command given --facts FILE (audit, plan) reads JSON only
    import platform
    import socket

    from hpcenv.facts import allocation, fabric, nvidia, scratch
    from hpcenv.kit import threads
    from hpcenv.kit.netplugin import find_net_plugin
    from hpcenv.models.facts import NetworkFacts

    env = os.environ if env is None else env
    providers: list[tuple[str, ...] | None] = [None]
    net_problems: list[str] = []

    def read_providers() -> None:
        providers[0] = fabric.providers(env, timeout=HELPER_TIMEOUT_S, problems=net_problems)

    reader = threads.start(read_providers) if network else None
    problems: list[str] = []
    nv = nvidia.read(problems)
    if reader is not None:
        reader.join()
    return Facts(
        hostname=socket.gethostname(),
        arch=platform.machine(),
        glibc=glibc_version(),
        python=platform.python_version(),
        cpus=os.cpu_count(),
        memory_gib=memory_gib(),
        nvidia=nv,
        slurm=allocation.from_env(env),
        network=NetworkFacts(libfabric_providers=providers[0], nccl_net_plugin=find_net_plugin(env))
        if network
        else NetworkFacts(),
        modules=loaded_modules(env),
        scratch=scratch.candidates(env) if with_scratch else None,
        warnings=tuple(problems + net_problems),
        source="this host",
    )


def load(path: str | Path) -> Facts:
    """Facts recorded in a JSON file (``hpcenv facts --json > FILE``)."""
    p = Path(path)
    data = fsio.load_json(p, "facts file", "record facts with 'hpcenv facts --json > FILE'")
    return from_json(data, str(p))


def for_args(path: str | Path | None) -> Facts:
    """Recorded facts when ``--facts FILE`` was given, else this host's."""
    return load(path) if path else collect()
