"""The test cluster itself: a real slurmctld + slurmd run jobs (see slurm_cluster.py)."""

from __future__ import annotations

import pytest

from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_node_is_idle_and_srun_runs_two_ranks(slurm: SlurmCluster) -> None:
    assert slurm.run("sinfo", "-h", "-o", "%T").stdout.strip() in ("idle", "mixed")
    out = slurm.run("srun", "-n2", "--", "printenv", "SLURM_PROCID", timeout=60).stdout
    assert sorted(out.split()) == ["0", "1"]
