"""Expand SLURM's compressed host lists: ``nid[001-004,010]``, ``gpu-[1-2]-[01-02]``.

``scontrol show hostnames`` is the authority where it exists (see ``allocation.hostnames``);
this expander is used when it does not (a login node without SLURM tools, a
recorded facts file) and is checked against scontrol in the SLURM tests.
"""

from __future__ import annotations

import itertools
import re

from hpcenv.errors import BadInput

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(nodelist: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in nodelist:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise BadInput(f"host list {nodelist!r}: unbalanced ']'")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise BadInput(f"host list {nodelist!r}: unbalanced '['")
    parts.append("".join(current))
    return [p for p in parts if p]


def _expand_bracket(body: str, nodelist: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise BadInput(f"host list {nodelist!r}: bad range {item!r} (expected N or N-M)")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        if int(hi) < int(lo):
            raise BadInput(f"host list {nodelist!r}: range {item!r} runs backwards")
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def expand(nodelist: str) -> list[str]:
    """All host names of ``nodelist``, in SLURM's order."""
    hosts: list[str] = []
    for part in _split_top(nodelist.strip()):
        pieces = re.split(r"(\[[^\]]*\])", part)
        choices = [
            _expand_bracket(p[1:-1], nodelist) if p.startswith("[") else [p] for p in pieces if p
        ]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return hosts
