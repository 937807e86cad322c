"""libfabric's providers as ``fi_info -l`` lists them (``name:`` lines, each followed by
a ``version:`` line)."""

from __future__ import annotations

import re

#: How long ``fi_info -l`` may take: libfabric loads every provider (0.3 s on a laptop,
#: seconds on a node whose NIC provider probes hardware).
FI_INFO_TIMEOUT_S = 30.0

_PROVIDER = re.compile(r"^([A-Za-z0-9_;.-]+):\s*$")


def parse_fi_info_list(text: str) -> tuple[str, ...]:
    """Provider names from ``fi_info -l`` output, in order, each once."""
    names: list[str] = []
    for line in text.splitlines():
        m = _PROVIDER.match(line)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return tuple(names)
