"""The probe runner: real processes, real timeouts, real result files.

Probes here are tiny scripts using the real probe kit (``hpcenv.kit.probe``), run by this
interpreter, so what is tested is the runner's handling of ranks that hang, crash
or never start, not any particular probe.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpcenv.kit import probe as common
from hpcenv.models.results import RankResult, Status, gather, inconsistencies, overall
from hpcenv.runner import probes as runner
from hpcenv.tools import command

SCRIPT = """
import json, os, sys, time
from hpcenv.kit import probe

def body(ctx):
    mode = os.environ.get("TEST_MODE", "")
    if mode == "hang" and ctx.rank.rank == 1:
        time.sleep(600)
    if mode == "crash" and ctx.rank.rank == 1:
        raise RuntimeError("boom: rank one exploded")
    if mode == "crash-hang" and ctx.rank.rank == 1:
        raise RuntimeError("boom: rank one exploded")
    if mode == "crash-hang" and ctx.rank.rank == 0:
        time.sleep(600)
    ctx.details["env"] = {k: os.environ.get(k) for k in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "HPCENV_PROBE_NAME", "FROM_PROFILE")}
    ctx.details["config"] = ctx.config
    ctx.check("hello", "pass", f"hello from rank {ctx.rank.rank}")

sys.exit(probe.main("hello", body))
"""


@pytest.fixture
def script_dir(tmp_path: Path) -> Path:
    d = tmp_path / "probes"
    d.mkdir()
    (d / "hello_probe.py").write_text(SCRIPT)
    return d


def run(
    script_dir: Path,
    tmp_path: Path,
    mode: str,
    *,
    ranks: int = 2,
    timeout: float = 60,
    launcher: Any = None,
) -> Any:
    spec = runner.ProbeSpec(
        name="hello",
        python=Path(sys.executable),
        ranks=ranks,
        timeout_s=timeout,
        env={"TEST_MODE": mode, "FROM_PROFILE": "yes"},
        config={"nccl_net": "ofi"},
    )
    return runner.run_probe(
        spec,
        launcher=launcher or runner.LocalLauncher(),
        result_dir=tmp_path / "results",
        script_dir=script_dir,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_all_ranks_pass_with_torchrun_environment(
    script_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a surrounding job's rendezvous must not be reused by the probe's ranks
    monkeypatch.setenv("MASTER_ADDR", "10.9.9.9")
    monkeypatch.setenv("MASTER_PORT", "1")
    result = run(script_dir, tmp_path, "ok", ranks=3)
    assert result.status is Status.PASS
    assert [r.rank for r in result.ranks] == [0, 1, 2]
    envs = [r.details["env"] for r in result.ranks]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert {e["WORLD_SIZE"] for e in envs} == {"3"}
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"3"}
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.1"}
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert envs[0]["MASTER_PORT"] != "1"
    assert {e["FROM_PROFILE"] for e in envs} == {"yes"}
    # the profile's settings and the runner's timeout (for the probe's own deadlines)
    assert result.ranks[0].details["config"] == {"nccl_net": "ofi", "timeout_s": 60}
    assert "3 ranks on 1 host" in result.summary
    assert list(result.by_host()) == [socket.gethostname()]


def test_hanging_rank_ends_at_timeout_naming_rank_and_host(
    script_dir: Path, tmp_path: Path
) -> None:
    result = run(script_dir, tmp_path, "hang", timeout=3)
    assert result.status is Status.FAIL
    host = socket.gethostname()
    assert f"rank 1 on host {host} started but did not finish within 3 s" in result.summary
    assert result.ranks[0].status is Status.PASS
    assert result.ranks[1].remedy
    started = json.loads((tmp_path / "results" / "hello.rank1.started").read_text())
    assert started["host"] == host
    assert not alive(started["pid"]), "the hung rank must have been stopped"


def test_crashing_rank_is_an_error_with_stderr_tail(script_dir: Path, tmp_path: Path) -> None:
    result = run(script_dir, tmp_path, "crash")
    assert result.status is Status.ERROR
    bad = result.ranks[1]
    assert bad.status is Status.ERROR
    assert "crashed (exit 1)" in bad.summary and "boom: rank one exploded" in bad.summary
    assert "Traceback" in bad.stderr_tail
    assert result.serialize()["ranks"][1]["stderr_tail"]


def test_after_a_crash_the_waiting_ranks_are_stopped_early(
    script_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "GRACE_AFTER_CRASH_S", 0.5)
    result = run(script_dir, tmp_path, "crash-hang", timeout=120)
    assert result.status is Status.ERROR
    assert result.seconds < 60
    assert result.ranks[1].status is Status.ERROR
    assert "did not finish after another rank crashed" in result.ranks[0].summary


@dataclass(frozen=True, kw_only=True)
class FirstRankOnlyLauncher:
    """Stands in for a launcher whose rank 1 lands on a node that never runs it (a dead
    node in an srun allocation): it starts rank 0 only, and names two hosts."""

    def start(
        self, argv: Sequence[str], env: Mapping[str, str], ranks: int
    ) -> list[subprocess.Popen[Any]]:
        procs = runner.LocalLauncher().start(argv, env, 1)
        return procs

    def hosts_for(self, ranks: int) -> list[str]:
        return ["nid000001", "nid000002"][:ranks]

    nodes = 2

    def default_ranks(self) -> int:
        return 2

    def rank_exit_codes(
        self, env: Mapping[str, str], ranks: int, codes: Sequence[int | None]
    ) -> list[int | None]:
        return list(codes)


def test_rank_that_never_starts_is_named_with_its_host(script_dir: Path, tmp_path: Path) -> None:
    result = run(script_dir, tmp_path, "ok", launcher=FirstRankOnlyLauncher())
    assert result.status is Status.FAIL
    assert "rank 1 (expected on host nid000002) never started/joined" in result.summary


def test_spawn_and_shutdown_all_stop_process_groups(tmp_path: Path) -> None:
    procs = [
        command.spawn(
            [sys.executable, "-c", "import time; time.sleep(600)"], stderr=tmp_path / f"e{i}"
        )
        for i in range(3)
    ]
    command.shutdown_all(procs)
    assert all(p.returncode is not None for p in procs)


def facts(driver: str = "565.57.01", nccl: str = "2.21.5") -> dict[str, Any]:
    return {
        "driver": driver,
        "nccl_version": nccl,
        "gpu_count": 4,
        "gpu_model": "NVIDIA GH200 120GB",
        "modules": ["cuda/12.6"],
        "torch": "2.9.1",
    }


def rank(k: int, host: str, **kw: Any) -> RankResult:
    return RankResult(rank=k, host=host, status=Status.PASS, summary="ok", facts=facts(**kw))


def test_consistency_flags_the_odd_rank_and_host() -> None:
    ranks = [rank(0, "nid1"), rank(1, "nid1"), rank(2, "nid2"), rank(3, "nid3", driver="550.54")]
    odd = inconsistencies(ranks)
    assert len(odd) == 1
    assert odd[0].key == "driver" and odd[0].ranks == (3,) and odd[0].hosts == ("nid3",)
    result = gather("nccl", ranks)
    assert result.status is Status.FAIL
    assert "rank 3 on nid3 has driver '550.54' while the other ranks have '565.57.01'" in (
        result.summary
    )
    assert "nid3" in result.remedy
    assert result.serialize()["inconsistent"][0]["hosts"] == ["nid3"]


def test_consistency_ignores_ranks_without_facts_and_equal_lists() -> None:
    silent = RankResult(rank=2, host="nid2", status=Status.FAIL, summary="never started")
    ranks = [rank(0, "nid1"), rank(1, "nid1"), silent]
    assert inconsistencies(ranks) == []
    two = [rank(0, "a", nccl="2.21.5"), rank(1, "b", nccl="2.27.3")]
    assert [i.ranks for i in inconsistencies(two)] == [(1,)]  # tie: lowest rank's group wins


def test_status_combination() -> None:
    assert Status.combine([Status.PASS, Status.SKIP]) is Status.PASS
    assert Status.combine([Status.SKIP, Status.SKIP]) is Status.SKIP
    assert Status.combine([Status.PASS, Status.FAIL, Status.ERROR]) is Status.ERROR
    assert Status.combine([]) is Status.SKIP
    results = [
        gather("a", [rank(0, "h")]),
        gather(
            "b", [RankResult(rank=0, host="h", status=Status.SKIP, summary="no GPU", remedy="x")]
        ),
    ]
    assert overall(results) is Status.PASS
    assert overall([results[1]]) is Status.SKIP  # everything skipped: a skip, not a pass
    assert overall([]) is Status.SKIP
    assert Status.combine(["skip", "pass"]) is Status.PASS  # the probes' spelling
    assert Status.combine(["pass", "fail", "skip"]) is Status.FAIL


def test_rank_environment_from_slurm() -> None:
    r = common.rank_from_env(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_NTASKS_PER_NODE": "4(x2)",
            "MASTER_ADDR": "nid1",
        }
    )
    assert (r.rank, r.world_size, r.local_rank, r.local_world_size) == (5, 8, 1, 4)
    assert r.master_addr == "nid1"
    # torchrun variables win over SLURM's when both are set
    r = common.rank_from_env({"RANK": "0", "WORLD_SIZE": "1", "SLURM_PROCID": "3"})
    assert r.rank == 0
