"""The wait for a Ray cluster to form over SLURM (``ray_cluster._wait_for_join``) ends at
once, naming the process, when the driver watching the join dies: an ``import ray`` that
fails in the job's venv is an error to read, not a 120 s wait ending in "did not join".
Real processes stand in for the srun steps (one still running) and the watcher (one that
exits with Ray's import error); no Ray or SLURM is needed for the wait itself. The real
watcher script (``_WATCH_ALIVE``) is run against a stand-in ``ray`` module that fails the
way a head not up yet and a GCS hiccup fail, which real Ray cannot be made to do on cue."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcenv.slurm import ray_cluster
from hpcenv.utils.errors import ProbeFailed


def test_a_watcher_that_dies_ends_the_wait_naming_its_error(tmp_path: Path) -> None:
    plan = ray_cluster.RayPlan(hosts=("node1", "node2"), head_ip="10.0.0.1", port=6379)
    step = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    err = tmp_path / "ray-join.err"
    with err.open("w") as to:
        watcher = subprocess.Popen(
            [sys.executable, "-c", "raise SystemExit('ModuleNotFoundError: no ray here')"],
            stderr=to,
        )
    try:
        start = time.monotonic()
        with pytest.raises(ProbeFailed, match="driver watching the join exited with 1") as e:
            ray_cluster._wait_for_join(
                plan, [("head", [])], [step], tmp_path, 120.0, watcher=watcher
            )
        assert time.monotonic() - start < 30  # not the 120 s join timeout
        assert "no ray here" in str(e.value)
    finally:
        step.kill()
        step.wait()
        watcher.wait()


#: Stands in for Ray's driver API: ``init`` fails until the head is "up" (its first call),
#: ``nodes()`` fails once as a GCS query can while raylets register, or always (``ALWAYS``).
_FAKE_RAY = """
import os
calls = {"init": 0, "nodes": 0}
def init(address, log_to_driver):
    calls["init"] += 1
    if calls["init"] == 1:
        raise ConnectionError(f"could not reach the head at {address}")
def shutdown():
    pass
def nodes():
    calls["nodes"] += 1
    if os.environ.get("ALWAYS") or calls["nodes"] == 1:
        raise RuntimeError("GCS unavailable")
    return [{"NodeManagerHostname": "node1", "Alive": True},
            {"NodeManagerHostname": "node9", "Alive": False}]
"""


def _watcher(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "ray.py").write_text(_FAKE_RAY)
    script = ray_cluster._WATCH_ALIVE.format(address="10.0.0.1:6379")
    with (tmp_path / "ray-join.log").open("w") as out, (tmp_path / "ray-join.err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", script], stdout=out, stderr=err,
            env={**os.environ, "PYTHONPATH": str(tmp_path / "fake"), **env},
        )  # fmt: skip


def test_a_failed_connect_or_query_is_asked_again(tmp_path: Path) -> None:
    plan = ray_cluster.RayPlan(hosts=("node1",), head_ip="10.0.0.1", port=6379)
    step = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watcher = _watcher(tmp_path)
    try:
        ray_cluster._wait_for_join(plan, [("head", [])], [step], tmp_path, 60.0, watcher=watcher)
        said = (tmp_path / "ray-join.err").read_text()
        assert "connecting: ConnectionError('could not reach the head at 10.0.0.1:6379')" in said
        assert "asking for the nodes: RuntimeError('GCS unavailable')" in said
        assert watcher.poll() is None  # still watching: the hiccup did not end it
    finally:
        for p in (step, watcher):
            p.kill()
            p.wait()


def test_the_join_timeout_quotes_what_the_watcher_last_saw(tmp_path: Path) -> None:
    plan = ray_cluster.RayPlan(hosts=("node1",), head_ip="10.0.0.1", port=6379)
    step = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watcher = _watcher(tmp_path, ALWAYS="1")
    try:
        with pytest.raises(ProbeFailed, match=r"node\(s\) node1 did not join") as e:
            ray_cluster._wait_for_join(plan, [("head", [])], [step], tmp_path, 4.0, watcher=watcher)
        assert "watcher last said: asking for the nodes: RuntimeError('GCS unavailable')" in str(
            e.value
        )
    finally:
        for p in (step, watcher):
            p.kill()
            p.wait()
