"""SLURM time limits (``--time``): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.

One parser: ``problem`` checks a profile's ``[slurm] time`` when it loads, and
``seconds`` bounds how long ``hpcenv sbatch --wait`` waits for a running job.
"""

from __future__ import annotations

import re

from hpcenv.utils.errors import BadInput

#: SLURM's time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (sbatch(1) --time).
_SLURM_TIME = re.compile(
    r"(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+))?(?::(?P<ds>\d+))?|"
    r"(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?)"
)

FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. '00:20:00' or '1-12')"


def parse(value: str) -> float:
    """A SLURM time limit in seconds; ``inf`` for 0, INFINITE and UNLIMITED (no limit).
    ValueError when ``value`` is none of SLURM's forms."""
    if value.upper() in ("INFINITE", "UNLIMITED"):
        return float("inf")
    m = _SLURM_TIME.fullmatch(value)
    if not m:
        raise ValueError(value)
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        secs = g["d"] * 86400 + g["dh"] * 3600 + g.get("dm", 0) * 60 + g.get("ds", 0)
    elif "c" in g:
        secs = g["a"] * 3600 + g["b"] * 60 + g["c"]
    else:
        secs = g["a"] * 60 + g.get("b", 0)
    return float(secs) if secs else float("inf")


def problem(value: str) -> str | None:
    """Why ``value`` is not a SLURM time (the profile's validator), or None."""
    if value == "":  # no --time line: the partition's default limit
        return None
    try:
        parse(value)
    except ValueError:
        return f"is not a SLURM time; write {FORMS}"
    return None


def seconds(value: str) -> float:
    """``parse`` for a value from a profile: ``BadInput`` naming the key and the forms."""
    try:
        return parse(value)
    except ValueError as exc:
        raise BadInput(f"slurm.time = {value!r} {problem(value)}") from exc
