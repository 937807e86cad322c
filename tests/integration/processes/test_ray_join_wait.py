"""The wait for a Ray cluster to form over SLURM (``ray_cluster._wait_for_join``) ends at
once, naming the process, when the driver watching the join dies: an ``import ray`` that
fails in the job's venv is an error to read, not a 120 s wait ending in "did not join".
Real processes stand in for the srun steps (one still running) and the watcher (one that
exits with Ray's import error); no Ray or SLURM is needed for the wait itself."""

from __future__ import annotations

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
