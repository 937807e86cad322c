"""Probe results: a ``RankResult`` per rank, a ``ProbeResult`` per probe (``Status`` is the
kit's, ``hpcenv.kit.status``, shared with the probes and preflight).

Ranks report what they saw (each probe rank writes one JSON object); the
runner gathers them per rank and per host into one ``ProbeResult``, where the worst
status wins, and compares the facts the ranks report so that one node with another
driver or NCCL is named instead of showing up later as a hang or a wrong number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcenv.kit.status import Status

#: Facts every rank reports; a rank that differs from the others is flagged.
CONSISTENCY_KEYS = ("driver", "nccl_version", "gpu_count", "gpu_model", "modules", "torch")


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """What one rank of a probe reported (or what the runner made of its silence)."""

    rank: int
    host: str
    status: Status
    summary: str
    remedy: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], *, rank: int, host: str, where: str = ""
    ) -> RankResult:
        """A rank's JSON result; a status outside the four is an ``error``, and so is a
        result with a key of the wrong type (named, with ``where`` the file)."""
        problems: list[str] = []

        def typed(key: str, kind: type | tuple[type, ...], want: str, default: Any) -> Any:
            value = data.get(key)
            if value is None:
                return default
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                problems.append(f"key '{key}' is {type(value).__name__}, expected {want}")
                return default
            return value

        status_value = typed("status", str, "a string", "")
        try:
            status = Status(status_value)
        except ValueError:
            status = Status.ERROR
        out = cls(
            rank=typed("rank", int, "an integer", rank),
            host=typed("host", str, "a string", "") or host,
            status=status,
            summary=typed("summary", str, "a string", ""),
            remedy=typed("remedy", str, "a string", ""),
            details=dict(typed("details", dict, "an object", {})),
            metrics=dict(typed("metrics", dict, "an object", {})),
            facts=dict(typed("facts", dict, "an object", {})),
        )
        if problems:
            return cls(
                rank=rank,
                host=host,
                status=Status.ERROR,
                summary=f"rank {rank} wrote a malformed result"
                + (f" ({where})" if where else "")
                + f": {problems[0]}",
                remedy="the probe script broke its result contract; run it by hand and "
                "report the bug",
            )
        return out

    def serialize(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "host": self.host,
            "status": self.status.value,
            "summary": self.summary,
            "remedy": self.remedy,
            "details": dict(self.details),
            "metrics": dict(self.metrics),
            "facts": dict(self.facts),
        }
        if self.stderr_tail:
            out["stderr_tail"] = self.stderr_tail
        return out


@dataclass(frozen=True, kw_only=True)
class Inconsistency:
    """Ranks whose ``key`` fact differs from the majority's."""

    key: str
    value: Any
    majority: Any
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]

    def describe(self) -> str:
        ranks = ", ".join(str(r) for r in self.ranks)
        hosts = ", ".join(self.hosts)
        return (
            f"rank {ranks} on {hosts} has {self.key} {self.value!r} "
            f"while the other ranks have {self.majority!r}"
        )

    def serialize(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "majority": self.majority,
            "ranks": list(self.ranks),
            "hosts": list(self.hosts),
            "message": self.describe(),
        }


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def inconsistencies(ranks: Sequence[RankResult]) -> list[Inconsistency]:
    """Facts on which ranks disagree, naming the odd ones (the smaller groups).

    Ranks that reported no facts (they crashed or never started) are left out:
    their own status already says so. With a tie, the group holding the lowest
    rank counts as the majority.
    """
    found = []
    reporting = [r for r in ranks if r.facts]
    for key in CONSISTENCY_KEYS:
        groups: dict[Any, list[RankResult]] = {}
        for r in reporting:
            if key in r.facts:
                groups.setdefault(_freeze(r.facts[key]), []).append(r)
        if len(groups) < 2:
            continue
        ordered = sorted(groups.values(), key=lambda g: (-len(g), min(r.rank for r in g)))
        majority = ordered[0][0].facts[key]
        for odd in ordered[1:]:
            found.append(
                Inconsistency(
                    key=key,
                    value=odd[0].facts[key],
                    majority=majority,
                    ranks=tuple(r.rank for r in odd),
                    hosts=tuple(dict.fromkeys(r.host for r in odd)),
                )
            )
    return found


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """One probe over all its ranks: the worst status wins."""

    name: str
    status: Status
    summary: str
    remedy: str = ""
    ranks: tuple[RankResult, ...] = ()
    inconsistent: tuple[Inconsistency, ...] = ()
    seconds: float = 0.0

    @property
    def metrics(self) -> Mapping[str, Any]:
        """Rank 0's metrics (the one that reports for a collective), else the first's."""
        for r in sorted(self.ranks, key=lambda r: r.rank):
            if r.metrics:
                return r.metrics
        return {}

    @property
    def details(self) -> Mapping[str, Any]:
        for r in sorted(self.ranks, key=lambda r: r.rank):
            if r.details:
                return r.details
        return {}

    def by_host(self) -> dict[str, list[RankResult]]:
        hosts: dict[str, list[RankResult]] = {}
        for r in sorted(self.ranks, key=lambda r: r.rank):
            hosts.setdefault(r.host, []).append(r)
        return hosts

    def serialize(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "summary": self.summary,
            "remedy": self.remedy,
            "seconds": round(self.seconds, 3),
            "metrics": dict(self.metrics),
            "hosts": {
                host: {
                    "status": Status.combine(r.status for r in rs).value,
                    "ranks": [r.rank for r in rs],
                }
                for host, rs in self.by_host().items()
            },
            "inconsistent": [i.serialize() for i in self.inconsistent],
            "ranks": [r.serialize() for r in self.ranks],
        }


def gather(name: str, ranks: Sequence[RankResult], *, seconds: float = 0.0) -> ProbeResult:
    """Fold per-rank results into one: worst status wins; odd ranks' facts fail it."""
    ranks = tuple(sorted(ranks, key=lambda r: r.rank))
    odd = tuple(inconsistencies(ranks))
    status = Status.combine(r.status for r in ranks)
    if odd and status is not Status.ERROR:
        status = Status.FAIL
    if not ranks:
        return ProbeResult(
            name=name,
            status=Status.ERROR,
            summary="no rank reported",
            remedy="run the probe by hand to see why",
            seconds=seconds,
        )
    worst = [r for r in ranks if r.status is status] or list(ranks)
    if len(ranks) == 1:
        summary = ranks[0].summary
    elif status in (Status.PASS, Status.SKIP) or len(worst) == len(ranks):
        hosts = len({r.host for r in ranks})
        summary = f"{worst[0].summary} ({len(ranks)} ranks on {hosts} host{'s' * (hosts > 1)})"
    else:
        summary = "; ".join(
            r.summary
            if r.summary.startswith(f"rank {r.rank} ")
            else f"rank {r.rank} on {r.host}: {r.summary}"
            for r in worst
        )
    remedy = next((r.remedy for r in worst if r.remedy), "")
    if odd:
        summary = "; ".join([*(i.describe() for i in odd), summary])
        fix = (
            "make every node run the same stack: load the same modules and driver on all "
            "nodes, or exclude the odd node(s): "
            + ", ".join(dict.fromkeys(h for i in odd for h in i.hosts))
        )
        remedy = f"{fix}. {remedy}".strip() if remedy else fix
    return ProbeResult(
        name=name,
        status=status,
        summary=summary,
        remedy=remedy,
        ranks=ranks,
        inconsistent=odd,
        seconds=seconds,
    )


def overall(results: Iterable[ProbeResult]) -> Status:
    """The status of a whole run, by the one combine rule: any error or fail fails it,
    skips do not, and a run where everything skipped is a skip (not a pass)."""
    return Status.combine(r.status for r in results)


__all__ = [
    "Inconsistency",
    "ProbeResult",
    "RankResult",
    "Status",
    "gather",
    "inconsistencies",
    "overall",
]
