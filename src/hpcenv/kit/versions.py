"""Release numbers compared the way the probes' tables write them (``>=2.21,<2.24``).

Only the first three numbers count and a local part (``+cu126``) is ignored: the
tables bound minor releases. hpcenv itself uses ``packaging`` for PEP 440 versions;
this is the standard-library reader for the target environment.
"""

from __future__ import annotations

import re


def key(text: str) -> tuple[int, ...]:
    """``2.23.4+cuda12.4`` -> ``(2, 23, 4)``; ``()`` when there is no number."""
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+", maxsplit=1)[0])[:3])


def in_range(version: str | tuple[int, ...], spec: str) -> bool:
    """``'>=2.21,<2.24'`` holds for ``2.23.4``: bounds compared at their own length
    (``<2.24`` excludes every 2.24.x). False for a spec it cannot read."""
    v = key(version) if isinstance(version, str) else version
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(>=|<)\s*([\d.]+)\s*", part)
        if not m:
            return False
        bound = key(m.group(2))
        head = v[: len(bound)]
        if (m.group(1) == ">=" and head < bound) or (m.group(1) == "<" and head >= bound):
            return False
    return True
