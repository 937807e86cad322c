"""The test cluster itself: a real slurmctld + slurmd run jobs (see slurm_cluster.py)."""

from __future__ import annotations

import time

import pytest

from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_node_is_idle_and_srun_runs_two_ranks(slurm: SlurmCluster) -> None:
    """The node comes back to idle (an earlier test's job on this session's cluster may
    still be completing: SLURM's epilog, tens of seconds at most) and runs two ranks."""
    deadline = time.monotonic() + 60
    state = slurm.run("sinfo", "-h", "-o", "%T").stdout.strip()
    while state == "completing" and time.monotonic() < deadline:
        time.sleep(1)
        state = slurm.run("sinfo", "-h", "-o", "%T").stdout.strip()
    assert state in ("idle", "mixed")
    out = slurm.run("srun", "-n2", "--", "printenv", "SLURM_PROCID", timeout=60).stdout
    assert sorted(out.split()) == ["0", "1"]
