"""Expand SLURM's compressed host lists: ``nid[001-004,010]``, ``gpu-[1-2]-[01-02]``.

``scontrol show hostnames`` is the authority where it exists (see ``allocation.hostnames``);
this expander is used when it does not (a login node without SLURM tools, a
recorded facts file) and is checked against scontrol in the SLURM tests.

Expansion is bounded: a list of more than ``MAX_HOSTS`` hosts, or a range of more
than ``limit`` ids (``id_range``: GPU ids, task ids), is bad input, counted before
anything is expanded, so ``nid[0-99999999999]`` or ``SLURM_JOB_GPUS=0-99999999`` is one
line at once, not a hang.
"""

from __future__ import annotations

import itertools
import math
import re

from hpcenv.utils.errors import BadInput

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: More hosts than any allocation has (the largest systems have ~10^4 nodes).
MAX_HOSTS = 100_000


def id_range(lo: int, hi: int, *, limit: int, what: str) -> range:
    """``lo..hi`` inclusive; BadInput naming ``what`` when it holds more than ``limit``."""
    if hi - lo + 1 > limit:
        raise BadInput(
            f"{what}: the range {lo}-{hi} holds {hi - lo + 1} ids, more than the {limit} "
            "any node or job has; fix the value"
        )
    return range(lo, hi + 1)


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
        ids = id_range(int(lo), int(hi), limit=MAX_HOSTS, what=f"host list {_short(nodelist)}")
        out.extend(str(n).zfill(width) for n in ids)
        if len(out) > MAX_HOSTS:
            raise _too_many(nodelist)
    return out


def _short(nodelist: str) -> str:
    return repr(nodelist if len(nodelist) <= 60 else f"{nodelist[:57]}...")


def _too_many(nodelist: str) -> BadInput:
    return BadInput(
        f"host list {_short(nodelist)} names more than {MAX_HOSTS} hosts; fix the value"
    )


def count(nodelist: str) -> int | None:
    """How many hosts ``nodelist`` names, without expanding it; None when this module
    cannot read it (SLURM may still)."""
    total = 0
    try:
        for part in _split_top(nodelist.strip()):
            size = 1
            for body in re.findall(r"\[([^\]]*)\]", part):
                n = 0
                for item in body.split(","):
                    m = _RANGE.match(item.strip())
                    if not m:
                        return None
                    n += int(m.group(2) or m.group(1)) - int(m.group(1)) + 1
                size *= max(n, 0)
            total += size
    except BadInput:
        return None
    return total


def check_size(nodelist: str) -> None:
    """BadInput when ``nodelist`` names more than MAX_HOSTS hosts (before anyone, scontrol
    included, expands it)."""
    n = count(nodelist)
    if n is not None and n > MAX_HOSTS:
        raise _too_many(nodelist)


def expand(nodelist: str) -> list[str]:
    """All host names of ``nodelist``, in SLURM's order (at most MAX_HOSTS)."""
    hosts: list[str] = []
    for part in _split_top(nodelist.strip()):
        pieces = re.split(r"(\[[^\]]*\])", part)
        choices = [
            _expand_bracket(p[1:-1], nodelist) if p.startswith("[") else [p] for p in pieces if p
        ]
        if len(hosts) + math.prod(len(c) for c in choices) > MAX_HOSTS:
            raise _too_many(nodelist)
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return hosts
