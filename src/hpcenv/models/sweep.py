"""NCCL allreduce sweeps read from probe results (the ``nccl`` probe's
``details.sizes`` rows, ``probes/nccl_probe.py``): one ``Series`` per result (``nccl``,
``nccl node1``, ``nccl node1+node2``), for the terminal's sweep table (``ui/report.py``)
and the HTML report's charts (``ui/html_report.py``). Reads serialized results (a report
file or ``ProbeResult.serialize``), so a report from another machine reads the same."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Point:
    """One message size of a sweep (``probes/nccl_probe.py``'s rows)."""

    nbytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int = 0  # elements wrong over all ranks (nccl-tests' #wrong)


@dataclass(frozen=True, kw_only=True)
class Series:
    """One NCCL result's sweep: a node's own check, a pair, or a plain ``probe nccl``."""

    label: str
    hosts: tuple[str, ...]
    status: str
    points: tuple[Point, ...]


def results_of(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The probe results a report holds (``results`` of probe and a job, ``probes`` of
    doctor)."""
    for key in ("results", "probes"):
        value = report.get(key)
        if isinstance(value, list):
            return [r for r in value if isinstance(r, Mapping)]
    return []


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _points(rows: Any) -> tuple[Point, ...]:
    out = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, Mapping):
            continue
        nbytes, t = number(row.get("bytes")), number(row.get("time_us"))
        alg, bus = number(row.get("algbw_gbps")), number(row.get("busbw_gbps"))
        if nbytes is None or nbytes <= 0 or alg is None or bus is None:
            continue
        wrong = number(row.get("wrong"))
        out.append(
            Point(
                nbytes=int(nbytes),
                time_us=t or 0.0,
                algbw_gbps=alg,
                busbw_gbps=bus,
                wrong=int(wrong or 0),
            )
        )
    return tuple(sorted(out, key=lambda p: p.nbytes))


def _rank_number(rank: Mapping[str, Any]) -> int:
    value = rank.get("rank")
    return value if isinstance(value, int) else 1 << 30


def series(report: Mapping[str, Any]) -> list[Series]:
    """Each NCCL result's sweep, from its lowest rank that recorded one (a collective's
    sizes and times are the same on every rank; rank 0 reports)."""
    out = []
    for r in results_of(report):
        name = str(r.get("name", ""))
        if name != "nccl" and not name.startswith("nccl "):
            continue
        ranks = [x for x in r.get("ranks") or () if isinstance(x, Mapping)]
        ranks.sort(key=_rank_number)
        for rank in ranks:
            details = rank.get("details")
            points = _points(details.get("sizes") if isinstance(details, Mapping) else None)
            if points:
                hosts = tuple(str(h) for h in (r.get("hosts") or {}))
                status = str(r.get("status", ""))
                out.append(Series(label=name, hosts=hosts, status=status, points=points))
                break
    return out


def size_text(nbytes: float) -> str:
    """``1K``, ``64M``, ``1G``: a message size as nccl-tests' users read it."""
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:g}{unit}" if value == int(value) else f"{value:.3g}{unit}"
    return f"{nbytes:g}B"
