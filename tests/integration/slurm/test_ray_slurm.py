"""Ray on SLURM: the plan and the srun command lines (the real run is in
test_slurm_probes.py), and a cluster whose worker cannot start fails fast, named."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcenv.kit import slurm_env
from hpcenv.slurm import ray_cluster
from hpcenv.utils.errors import ProbeFailed
from support import require
from support.probe_env import has_ray
from support.slurm_cluster import SlurmCluster


def test_head_on_the_first_host_workers_on_the_rest() -> None:
    env = {
        "SLURM_CPUS_ON_NODE": "288",
        "SLURM_CPUS_PER_TASK": "18",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_GPUS_ON_NODE": "4",
    }
    hosts = ["localhost", "127.0.0.1", "127.0.0.2"]  # resolvable anywhere
    p = ray_cluster.plan(hosts, port=6379, head_ip="10.0.0.1", env=env)
    assert (p.head, p.workers, p.address) == ("localhost", tuple(hosts[1:]), "10.0.0.1:6379")
    head = ray_cluster.head_argv(p, "/v/bin/ray", "/tmp/hpcray-x")
    assert head[:5] == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=localhost", "--overlap"]
    assert head[head.index("/v/bin/ray") :] == [
        "/v/bin/ray", "start", "--head", "--block", "--port=6379",
        "--node-ip-address=10.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
        "--temp-dir=/tmp/hpcray-x", "--num-cpus=72", "--num-gpus=4",
    ]  # fmt: skip
    workers = ray_cluster.worker_argvs(p, "/v/bin/ray")
    assert len(workers) == 2
    for host, argv in zip(hosts[1:], workers, strict=True):
        # one step per worker host, its address pinned as the host name resolves
        assert argv[:4] == ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={host}"]
        assert f"--node-ip-address={socket.gethostbyname(host)}" in argv
        assert "--address=10.0.0.1:6379" in argv and "--num-gpus=4" in argv
        assert "--num-cpus=72" in argv
    assert ray_cluster.worker_argvs(ray_cluster.plan(["a"], port=1, head_ip="1.2.3.4"), "ray") == []


@pytest.mark.parametrize(
    ("env", "cpus"),
    [
        # an exclusive GH200 node: SLURM_CPUS_ON_NODE is all 288, the job asked for 4 x 1
        ({"SLURM_CPUS_ON_NODE": "288", "SLURM_TASKS_PER_NODE": "4(x2)"}, 4),
        ({"SLURM_CPUS_ON_NODE": "288", "SLURM_CPUS_PER_TASK": "16"}, 16),
        ({"SLURM_CPUS_ON_NODE": "8", "SLURM_CPUS_PER_TASK": "16", "SLURM_NTASKS_PER_NODE": "2"}, 8),
        ({}, None),  # outside SLURM: Ray decides
    ],
)
def test_ray_cpus_are_what_the_job_asked_for(env: dict[str, str], cpus: int | None) -> None:
    assert ray_cluster.job_cpus(slurm_env.read(env)) == cpus


def test_a_host_that_does_not_resolve_is_named() -> None:
    with pytest.raises(ProbeFailed, match=r"host no-such-host\.invalid does not resolve"):
        ray_cluster.plan(["localhost", "no-such-host.invalid"], head_ip="127.0.0.1")


def test_auth_token_is_per_job_and_kept_when_given() -> None:
    a, b = ray_cluster.with_auth_token({}), ray_cluster.with_auth_token({})
    assert a["RAY_AUTH_TOKEN"] != b["RAY_AUTH_TOKEN"] and a["RAY_AUTH_MODE"] == "token"
    assert ray_cluster.with_auth_token({"RAY_AUTH_TOKEN": "t"})["RAY_AUTH_TOKEN"] == "t"


@pytest.mark.slurm
@pytest.mark.slow
def test_a_worker_that_cannot_start_ends_it_at_once(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """A second host the allocation does not have (``localhost``: it resolves, SLURM has no
    such node): its srun step fails, the wrapper says so and exits 5 quickly (no waiting for
    the join timeout), and the head is torn down."""
    require("ray", has_ray(torch_python), "ray could not be installed from PyPI")
    start = time.monotonic()
    done = subprocess.run(
        ["salloc", "-n1", "--", sys.executable, "-m", "hpcenv.slurm.ray_cluster",
         "--hosts", f"{slurm.node},localhost", "--python", str(torch_python),
         "--log-dir", str(tmp_path), "--head-ip", "127.0.0.1", "--join-timeout", "600",
         "--", sys.executable, "-c", "print('never')"],
        env=slurm.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    # at once: the dead step is seen beside the join's watcher, never after a query that
    # blocked while Ray's driver waited for the head (~60 s) or after the join timeout
    assert time.monotonic() - start < 45, done.stderr
    assert "never" not in done.stdout
    # the head's step was started beside the worker's; it may not have written a line before
    # the worker's step failed and the wrapper tore it down (the squeue check below)
    assert (tmp_path / "ray-head.log").exists()
    said = (tmp_path / "ray-worker-localhost.err").read_text().strip().splitlines()[-1]
    assert (
        "the worker localhost step ('ray start' via srun) exited with 1 before the cluster "
        f"formed: {said}" in done.stderr
    )
    q = slurm.run("squeue", "-h", "-s", "-o", "%i %j")
    assert "ray" not in q.stdout  # no step of ours left running
