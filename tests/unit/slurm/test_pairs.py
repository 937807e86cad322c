"""The bad-node finder's schedule and rule (``hpcenv.slurm.pairs``), on results as the
runner makes them; the real runs across nodes are in ``test_multinode.py``."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hpcenv.models.results import ProbeResult, RankResult, Status
from hpcenv.slurm import pairs
from hpcenv.utils.errors import BadInput


@pytest.mark.parametrize("n", range(2, 12))
def test_rounds_are_disjoint_pairs_never_repeated_and_few(n: int) -> None:
    hosts = [f"nid{k:03d}" for k in range(n)]
    plan = pairs.schedule(hosts)
    assert len(plan) == min(pairs.DEFAULT_ROUNDS, n - 1 if n % 2 == 0 else n)
    seen: set[frozenset[str]] = set()
    for r in plan:
        in_round = [h for p in r for h in p]
        assert len(in_round) == len(set(in_round))  # disjoint: the round runs at once
        assert len(r) == n // 2  # everyone plays, one sits out when n is odd
        for p in r:
            assert frozenset(p) not in seen
            seen.add(frozenset(p))
    partners = {h: sum(h in p for r in plan for p in r) for h in hosts}
    assert min(partners.values()) >= (1 if n == 2 else 2), partners


def test_three_nodes_get_every_pair_and_all_rounds_when_asked() -> None:
    plan = pairs.schedule(["node1", "node2", "node3"])
    every = [frozenset(p) for r in plan for p in r]
    assert len(every) == 3 and set(every) == {
        frozenset(p) for p in itertools.combinations(["node1", "node2", "node3"], 2)
    }
    eight = pairs.schedule([f"n{k}" for k in range(8)], rounds=100)
    assert len(eight) == 7 and len({frozenset(p) for r in eight for p in r}) == 28
    with pytest.raises(BadInput, match="appears twice"):
        pairs.schedule(["a", "b", "a"])
    with pytest.raises(BadInput, match="--pair-rounds 0"):
        pairs.schedule(["a", "b"], rounds=0)


def _with_metrics(status: Status, busbw: float, summary: str) -> ProbeResult:
    """A probe result as the runner gathers it from rank 0's metrics."""
    rank = RankResult(
        rank=0, host="x", status=status, summary=summary or status.value,
        metrics={"busbw_gbps_at_max": busbw, "max_bytes": 8 << 20, "wrong": 0},
    )  # fmt: skip
    return ProbeResult(name="nccl", status=status, summary=rank.summary, ranks=(rank,))


def _runs(bw: dict[tuple[str, str], float | Status]) -> list[pairs.PairRun]:
    out = []
    for k, (hosts, v) in enumerate(bw.items()):
        result = (
            _with_metrics(v, 0.0, "hung")
            if isinstance(v, Status)
            else _with_metrics(Status.PASS, v, "")
        )
        out.append(pairs.PairRun(hosts=hosts, round=k + 1, result=result))
    return out


CHECKS_OK = {h: _with_metrics(Status.PASS, 1.0, "") for h in ("node1", "node2", "node3", "node4")}


def test_a_slow_node_and_only_it_is_excluded() -> None:
    hosts = ["node1", "node2", "node3"]
    runs = _runs({("node2", "node3"): 0.011, ("node1", "node3"): 0.012, ("node1", "node2"): 0.6})
    nodes, median = pairs.verdicts(hosts, CHECKS_OK, runs)
    assert median == 0.6
    assert [v.host for v in nodes if v.exclude] == ["node3"]
    node3 = nodes[2]
    assert node3.best_busbw_gbps == 0.012 and node3.partners == ("node2", "node1")
    assert node3.why == (
        "best pair busbw 0.012 GB/s < 0.5 x median 0.6 GB/s (pairs: node2 0.011, node1 0.012)"
    )


def test_a_node_whose_pairs_hang_is_excluded_its_partners_are_not() -> None:
    hosts = ["node1", "node2", "node3", "node4"]
    runs = _runs({
        ("node1", "node4"): Status.FAIL, ("node2", "node3"): 0.5,
        ("node1", "node3"): Status.FAIL, ("node4", "node2"): 0.5,
        ("node1", "node2"): Status.ERROR, ("node3", "node4"): 0.5,
    })  # fmt: skip
    nodes, _ = pairs.verdicts(hosts, CHECKS_OK, runs)
    assert [v.host for v in nodes if v.exclude] == ["node1"]
    assert nodes[0].best_busbw_gbps == 0.0


def test_a_failed_node_check_excludes_it_whatever_its_pairs() -> None:
    checks = {**CHECKS_OK, "node2": _with_metrics(Status.FAIL, 0.0, "#wrong 3 element(s)")}
    runs = _runs({("node1", "node2"): 0.6, ("node1", "node3"): 0.6, ("node2", "node3"): 0.6})
    nodes, _ = pairs.verdicts(["node1", "node2", "node3"], checks, runs)
    assert [(v.host, v.why) for v in nodes if v.exclude] == [
        ("node2", "its own check failed: #wrong 3 element(s)")
    ]


def test_two_nodes_cannot_say_which_one_is_slow_but_a_failure_still_fails() -> None:
    checks = {h: CHECKS_OK[h] for h in ("node1", "node2")}
    slow = _runs({("node1", "node2"): 0.011})
    nodes, _ = pairs.verdicts(["node1", "node2"], checks, slow)
    assert not any(v.exclude for v in nodes)
    failed = _runs({("node1", "node2"): Status.FAIL})
    nodes, median = pairs.verdicts(["node1", "node2"], checks, failed)
    report = pairs.PairsReport(
        rounds=((("node1", "node2"),),), checks=checks, pairs=tuple(failed),
        nodes=tuple(nodes), median_gbps=median, seconds=1.0,
    )  # fmt: skip
    assert report.exclude == [] and report.status is Status.FAIL
    assert report.exclude_option() == ""


def test_report_json_has_the_evidence_and_a_ready_exclude_option() -> None:
    hosts = ["node1", "node2", "node3"]
    runs = _runs({("node2", "node3"): 0.011, ("node1", "node3"): 0.012, ("node1", "node2"): 0.6})
    nodes, median = pairs.verdicts(hosts, CHECKS_OK, runs)
    report = pairs.PairsReport(
        rounds=tuple((r.hosts,) for r in runs), checks={h: CHECKS_OK[h] for h in hosts},
        pairs=tuple(runs), nodes=tuple(nodes), median_gbps=median, seconds=2.5,
    )  # fmt: skip
    data = report.serialize()
    assert report.exclude == ["node3"] and data["exclude_option"] == "--exclude=node3"
    assert report.status is Status.FAIL
    assert data["rule"] == pairs.RULE and data["rounds"][0] == [["node2", "node3"]]
    assert data["pairs"][2] == {
        "hosts": ["node1", "node2"], "round": 3, "status": "pass", "busbw_gbps": 0.6,
        "algbw_gbps": None, "bytes": 8 << 20, "wrong": 0, "seconds": 0.0, "summary": "pass",
    }  # fmt: skip
    assert [v["host"] for v in data["nodes"] if v["exclude"]] == ["node3"]
    assert len(report.results()) == 6


def test_results_of_a_python_path_env_stay_under_hpcenv_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'--env /venv/bin/python' once wrote the results directory next to that python
    (the target's name, a path, was joined under results/ and replaced it)."""
    from hpcenv.runner import suite
    from hpcenv.runner.probes import Target

    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "home"))
    got = suite.result_dir(Target(name="/opt/v/bin/python", python=Path("/x")), None, None)
    assert got.parent == tmp_path / "home" / "results"
    assert got.name.startswith("_opt_v_bin_python-") and got.is_dir()
