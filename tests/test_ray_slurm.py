"""Ray on SLURM: the plan and the srun command lines (the real run is in
test_slurm_probes.py), and a cluster whose worker cannot start fails fast, named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require
from hpcenv.slurm import ray_cluster
from probe_env import has_ray
from slurm_cluster import SlurmCluster, slurm_cluster_fixture  # noqa: F401 - fixture
from torch_venv import torch_venv_fixture  # noqa: F401 - fixture


def test_head_on_the_first_host_workers_on_the_rest() -> None:
    env = {"SLURM_CPUS_ON_NODE": "72", "SLURM_GPUS_ON_NODE": "4"}
    p = ray_cluster.plan(["nid001", "nid002", "nid003"], port=6379, head_ip="10.0.0.1", env=env)
    assert (p.head, p.workers, p.address) == ("nid001", ("nid002", "nid003"), "10.0.0.1:6379")
    head = ray_cluster.head_argv(p, "/v/bin/ray", "/tmp/hpcray-x")
    assert head[:5] == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=nid001", "--overlap"]
    assert head[head.index("/v/bin/ray") :] == [
        "/v/bin/ray", "start", "--head", "--block", "--port=6379",
        "--node-ip-address=10.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
        "--temp-dir=/tmp/hpcray-x", "--num-cpus=72", "--num-gpus=4",
    ]  # fmt: skip
    workers = ray_cluster.worker_argv(p, "/v/bin/ray")
    assert workers is not None
    assert "--nodes=2" in workers and "--ntasks-per-node=1" in workers
    assert "--exclude=nid001" in workers and "--address=10.0.0.1:6379" in workers
    assert "--num-gpus=4" in workers
    assert (
        ray_cluster.worker_argv(ray_cluster.plan(["a"], port=1, head_ip="1.2.3.4"), "ray") is None
    )


def test_auth_token_is_per_job_and_kept_when_given() -> None:
    a, b = ray_cluster.with_auth_token({}), ray_cluster.with_auth_token({})
    assert a["RAY_AUTH_TOKEN"] != b["RAY_AUTH_TOKEN"] and a["RAY_AUTH_MODE"] == "token"
    assert ray_cluster.with_auth_token({"RAY_AUTH_TOKEN": "t"})["RAY_AUTH_TOKEN"] == "t"


@pytest.mark.slurm
@pytest.mark.slow
def test_a_worker_that_cannot_start_ends_it_at_once(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """A second host the allocation does not have: its srun step fails, the wrapper says so
    and exits 5 quickly (no waiting for the join timeout), and the head is torn down."""
    require("ray", has_ray(torch_python), "ray could not be installed from PyPI")
    done = subprocess.run(
        ["salloc", "-n1", "--", sys.executable, "-m", "hpcenv.slurm.ray_cluster",
         "--hosts", f"{slurm.node},ghost-node", "--python", str(torch_python),
         "--log-dir", str(tmp_path), "--head-ip", "127.0.0.1", "--join-timeout", "600",
         "--", sys.executable, "-c", "print('never')"],
        env=slurm.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    assert "never" not in done.stdout
    assert (tmp_path / "ray-head.log").read_text()  # the head did start
    said = (tmp_path / "ray-workers.err").read_text().strip().splitlines()[-1]
    assert (
        f"the workers step ('ray start' via srun) exited with 1 before the cluster formed: {said}"
        in done.stderr
    )
    q = slurm.run("squeue", "-h", "-s", "-o", "%i %j")
    assert "ray" not in q.stdout  # no step of ours left running
