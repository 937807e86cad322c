"""The bad-node finder: allreduce between pairs of nodes, and which nodes to exclude.

Before a long job the question is "which node is bad?". One allreduce over the whole
allocation only says that something is slow or broken (a collective runs at the pace
of its slowest link); bisecting by hand takes hours. ``hpcenv probe nccl --pairs``
(inside an allocation) and ``hpcenv sbatch PROFILE nccl --nodes N --pairs`` do this:

1. a quick check of every node on its own, all nodes at once: the nccl probe on that
   node's ranks alone with small sizes (torch, CUDA and NCCL start, every element right);
2. rounds of pairs (``schedule``): a round pairs disjoint nodes, so its pairs run at the
   same time, each an srun step pinned to its two nodes, one rank on each, with its own
   timeout. ``DEFAULT_ROUNDS`` rounds of the circle method (round-robin tournaments) give
   every node two or three different partners (with an odd count one node sits out
   each round), so the rounds stay few however many nodes there are;
3. each pair's bus bandwidth at one size, the largest (``--largest-only``: no sweep),
   the first allreduce checked element by element, three timed;
4. the verdict (``verdicts``), the documented rule: a node's score is the busbw of its
   best pair (a pair that failed, hung or returned wrong values counts 0). A node is
   excluded when its own check fails, or when its score is under ``SLOW_FRACTION``
   (half) of the median score. A slow or broken node drags down every pair it is in,
   while each of its partners did better with someone else: it alone is excluded.
   With two nodes there is one pair and nothing to compare: a slow pair excludes no one
   (its failure still fails the run).

The report (``PairsReport.serialize``) has every pair and check as evidence, and a
top-level ``"exclude"`` list of hosts, ready for ``sbatch --exclude``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcenv.kit import threads
from hpcenv.models.results import ProbeResult, Status
from hpcenv.runner import probes as runner
from hpcenv.slurm.srun import SrunLauncher
from hpcenv.utils.errors import BadInput

#: Rounds of pairs (every node gets up to this many partners).
DEFAULT_ROUNDS = 3
#: A node whose best pair is under this fraction of the median node's is excluded.
SLOW_FRACTION = 0.5
#: Sizes of the per-node check: small, it checks the stack, not the bandwidth.
CHECK_SIZES = "1K:1M"
#: A pair times one size: the checked warmup allreduce, then these timed ones (a slow
#: node's pairs are the finder's longest steps; 3 timings of a large message suffice).
PAIR_ITERS = ("--warmup", "1", "--iters", "3")

RULE = (
    f"a node is excluded when its own check fails, or when the busbw of its best pair "
    f"is under {SLOW_FRACTION:g} x the median of the nodes' best (a failed, hung or wrong "
    f"pair counts 0)"
)

Pair = tuple[str, str]


def schedule(hosts: Sequence[str], rounds: int = DEFAULT_ROUNDS) -> list[list[Pair]]:
    """Rounds of disjoint pairs (circle method): no pair twice, every node in every round
    but one per round when the count is odd; at most ``rounds`` rounds."""
    if len(set(hosts)) != len(hosts):
        raise BadInput(f"--pairs: a host appears twice in {', '.join(hosts)}")
    if rounds < 1:
        raise BadInput(f"--pair-rounds {rounds}: must be at least 1")
    ring: list[str | None] = [*hosts, None] if len(hosts) % 2 else list(hosts)
    n = len(ring)
    out = []
    for _ in range(min(rounds, n - 1)):
        pairs = [(ring[k], ring[n - 1 - k]) for k in range(n // 2)]
        out.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]  # the first stays, the others turn
    return out


@dataclass(frozen=True, kw_only=True)
class PairRun:
    """One pair's allreduce: its round, its hosts, the probe's result."""

    hosts: Pair
    round: int
    result: ProbeResult

    @property
    def busbw_gbps(self) -> float:
        """busbw at the largest size; 0 unless the pair passed (failed, hung, wrong)."""
        if self.result.status is not Status.PASS:
            return 0.0
        return float(self.result.metrics.get("busbw_gbps_at_max") or 0.0)

    def serialize(self) -> dict[str, Any]:
        m = self.result.metrics
        return {
            "hosts": list(self.hosts),
            "round": self.round,
            "status": self.result.status.value,
            "busbw_gbps": self.busbw_gbps,
            "algbw_gbps": m.get("algbw_gbps_at_max"),
            "bytes": m.get("max_bytes"),
            "wrong": m.get("wrong"),
            "seconds": round(self.result.seconds, 3),
            "summary": self.result.summary,
        }


@dataclass(frozen=True, kw_only=True)
class NodeVerdict:
    """What the finder concluded about one node, and why."""

    host: str
    check: Status
    best_busbw_gbps: float | None
    partners: tuple[str, ...]
    exclude: bool
    why: str

    def serialize(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "check": self.check.value,
            "best_busbw_gbps": self.best_busbw_gbps,
            "partners": list(self.partners),
            "exclude": self.exclude,
            "why": self.why,
        }


def verdicts(
    hosts: Sequence[str], checks: Mapping[str, ProbeResult], pairs: Sequence[PairRun]
) -> tuple[list[NodeVerdict], float]:
    """Each node's verdict by ``RULE``, and the median of the nodes' best busbw."""
    best: dict[str, float | None] = {}
    for h in hosts:
        bws = [p.busbw_gbps for p in pairs if h in p.hosts]
        best[h] = max(bws) if bws else None
    scores = [s for s in best.values() if s is not None]
    median = statistics.median(scores) if scores else 0.0
    out = []
    for h in hosts:
        check = checks[h].status if h in checks else Status.SKIP
        score = best[h]
        mine = [p for p in pairs if h in p.hosts]
        partners = tuple(next(x for x in p.hosts if x != h) for p in mine)
        evidence = ", ".join(f"{x} {p.busbw_gbps:.3g}" for x, p in zip(partners, mine, strict=True))
        if check.failed:
            exclude, why = True, f"its own check failed: {checks[h].summary}"
        elif score is not None and median > 0 and score < SLOW_FRACTION * median:
            exclude = True
            why = (
                f"best pair busbw {score:.3g} GB/s < {SLOW_FRACTION:g} x median "
                f"{median:.3g} GB/s (pairs: {evidence})"
            )
        elif score is None:
            exclude, why = False, "in no pair"
        else:
            exclude = False
            why = f"best pair busbw {score:.3g} GB/s, median {median:.3g} (pairs: {evidence})"
        out.append(
            NodeVerdict(
                host=h,
                check=check,
                best_busbw_gbps=score,
                partners=partners,
                exclude=exclude,
                why=why,
            )
        )
    return out, median


@dataclass(frozen=True, kw_only=True)
class PairsReport:
    """Everything the finder ran and concluded."""

    rounds: tuple[tuple[Pair, ...], ...]
    checks: Mapping[str, ProbeResult]
    pairs: tuple[PairRun, ...]
    nodes: tuple[NodeVerdict, ...]
    median_gbps: float
    seconds: float

    @property
    def exclude(self) -> list[str]:
        return [v.host for v in self.nodes if v.exclude]

    @property
    def status(self) -> Status:
        """Fails when a node is excluded, a pair failed or a check failed."""
        seen = [*(c.status for c in self.checks.values()), *(p.result.status for p in self.pairs)]
        return Status.FAIL if self.exclude else Status.combine(seen)

    def results(self) -> list[ProbeResult]:
        """Every check and pair as a probe result of its own (``nccl node1``,
        ``nccl node1+node2``), for the table, the ranks' evidence and JUnit."""
        return [*self.checks.values(), *(p.result for p in self.pairs)]

    def exclude_option(self) -> str:
        return f"--exclude={','.join(self.exclude)}" if self.exclude else ""

    def serialize(self) -> dict[str, Any]:
        return {
            "rule": RULE,
            "rounds": [[list(p) for p in r] for r in self.rounds],
            "pairs": [p.serialize() for p in self.pairs],
            "nodes": [v.serialize() for v in self.nodes],
            "median_best_busbw_gbps": self.median_gbps,
            "seconds": round(self.seconds, 3),
            "exclude_option": self.exclude_option(),
        }


Job = tuple[str, runner.ProbeSpec, SrunLauncher, Path]


def _parallel(
    jobs: Sequence[Job], on_done: Callable[[ProbeResult], None] | None
) -> list[ProbeResult]:
    """Run probes at once (steps on disjoint nodes), each with its own timeout; each
    result is named by its job's label (``nccl node1``, ``nccl node1+node2``)."""

    def one(job: Job) -> ProbeResult:
        label, spec, launcher, result_dir = job
        result = runner.run_probe(spec, launcher=launcher, result_dir=result_dir)
        result = dataclasses.replace(result, name=label)
        if on_done is not None:
            on_done(result)
        return result

    return threads.map_threads(one, jobs, len(jobs))


def find(
    target: runner.Target,
    launcher: SrunLauncher,
    *,
    result_dir: Path,
    timeout_s: float | None = None,
    sizes: str | None = None,
    rounds: int = DEFAULT_ROUNDS,
    on_done: Callable[[ProbeResult], None] | None = None,
) -> PairsReport:
    """Check every node, run the rounds of pairs, and judge the nodes."""
    hosts = list(launcher.layout.hosts)
    if len(hosts) < 2:
        raise BadInput(
            f"--pairs needs an allocation of 2 or more nodes (this one has {len(hosts)}: "
            f"{', '.join(hosts)}); submit with 'hpcenv sbatch PROFILE nccl --nodes N --pairs'"
        )
    plan = schedule(hosts, rounds)
    started = time.monotonic()
    timeout = timeout_s or target.timeout_s
    config = target.config
    prof = target.profile

    def spec(nodes: int, ranks: int, args: list[str]) -> runner.ProbeSpec:
        """The nccl probe on ``nodes`` nodes (the profile's multi-node env above 1)."""
        return runner.ProbeSpec(
            name="nccl", python=target.python, args=tuple(args), ranks=ranks,
            timeout_s=timeout, config=config, env=prof.env_for(nodes=nodes) if prof else {},
        )  # fmt: skip

    per_node = launcher.layout.per_node
    check_args = ["--sizes", CHECK_SIZES]
    check_jobs = [
        (f"nccl {h}", spec(1, per_node, check_args), launcher.on([h]), result_dir / f"node-{h}")
        for h in hosts
    ]
    checks = dict(zip(hosts, _parallel(check_jobs, on_done), strict=True))
    pair_args = ["--largest-only", *PAIR_ITERS, *(["--sizes", sizes] if sizes else [])]
    runs: list[PairRun] = []
    for number, pairs in enumerate(plan, start=1):
        jobs = [
            (
                f"nccl {'+'.join(p)}",
                spec(2, 2, pair_args),
                launcher.on(p, per_node=1),
                result_dir / f"pair-{'-'.join(p)}",
            )
            for p in pairs
        ]
        for p, result in zip(pairs, _parallel(jobs, on_done), strict=True):
            runs.append(PairRun(hosts=p, round=number, result=result))
    nodes, median = verdicts(hosts, checks, runs)
    return PairsReport(
        rounds=tuple(tuple(r) for r in plan),
        checks=checks,
        pairs=tuple(runs),
        nodes=tuple(nodes),
        median_gbps=median,
        seconds=time.monotonic() - started,
    )


__all__ = [
    "DEFAULT_ROUNDS",
    "RULE",
    "SLOW_FRACTION",
    "NodeVerdict",
    "PairRun",
    "PairsReport",
    "find",
    "schedule",
    "verdicts",
]
