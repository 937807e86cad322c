"""The NCCL net plugin (aws-ofi-nccl) NCCL would open, found the way NCCL's loader does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: Where the loader finds libraries without LD_LIBRARY_PATH (Debian and RHEL layouts).
SYSTEM_LIB_DIRS = (
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)


def find_net_plugin(env: Mapping[str, str]) -> str | None:
    """The net plugin NCCL would open: NCCL_NET_PLUGIN (a path, a file name, or a short
    name as in ``libnccl-net-<name>.so``), else ``libnccl-net.so``, on LD_LIBRARY_PATH
    and then the system library directories. None when there is none."""
    wanted = env.get("NCCL_NET_PLUGIN", "")
    if "/" in wanted:
        return wanted if Path(wanted).is_file() else None
    names = [wanted, f"libnccl-net-{wanted}.so"] if wanted else ["libnccl-net.so"]
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(SYSTEM_LIB_DIRS)
    for d in dirs:
        for n in names:
            if (Path(d) / n).is_file():
                return str(Path(d) / n)
    return None


def plugin_api_versions(symbols: list[str], prefix: str = "ncclNetPlugin_v") -> list[int]:
    """Plugin API versions a net plugin exports (``ncclNetPlugin_v7`` ... -> [7, ...]),
    newest first, from its exported symbols (``hpcenv.kit.elf.exported_symbols``)."""
    found = set()
    for s in symbols:
        if s.startswith(prefix) and s[len(prefix) :].isdigit():
            found.add(int(s[len(prefix) :]))
    return sorted(found, reverse=True)
