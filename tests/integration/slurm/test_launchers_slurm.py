"""accelerate and DeepSpeed across two nodes of the test SLURM cluster (tests/support/cluster.py:
network namespaces, real slurmctld/slurmd): ``hpcenv sbatch local --nodes 2
--ntasks-per-node 2 -- accelerate launch world.py`` (and ``-- deepspeed world.py``)
with no launcher flags. hpcenv's per-node launcher (``hpcenv.job.launchers``) adds what
each node's copy needs from the allocation, and the processes form one world of 4 (2 per
node, CPU, gloo), every rank once, on both nodes. The launchers are the real PyPI
packages in a venv with the CPU torch wheel (``launcher_env``). DeepSpeed's CPU path
needs no oneCCL when the script asks for gloo, and JIT-builds one op with g++.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.slurm_cluster import SlurmCluster, local_profile

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

ACCELERATE_WORLD = """\
import json, socket
import torch, torch.distributed as dist
from accelerate import PartialState
s = PartialState(cpu=True)
t = torch.ones(1) * (s.process_index + 1)
dist.all_reduce(t)
with open(f"world-{s.process_index}.json", "w") as f:  # one file per rank: no interleaving
    json.dump({"rank": s.process_index, "world": s.num_processes,
               "host": socket.gethostname(), "backend": s.backend, "sum": t.item()}, f)
dist.barrier()
dist.destroy_process_group()  # gloo's threads stop before exit (else an abort at exit)
"""
DEEPSPEED_WORLD = """\
import json, socket
import torch, torch.distributed as dist
import deepspeed
deepspeed.init_distributed(dist_backend="gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
with open(f"world-{dist.get_rank()}.json", "w") as f:
    json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(),
               "host": socket.gethostname(), "backend": dist.get_backend(), "sum": t.item()}, f)
dist.barrier()
dist.destroy_process_group()
"""


def _run(cluster: SlurmCluster, tmp_path: Path, venv: Path, *cmd: str, gate: bool = False) -> str:
    profile = local_profile(tmp_path, "", scratch=True)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env", str(venv),
         "--nodes", "2", "--ntasks-per-node", "2", *([] if gate else ["--no-gate"]),
         "--submit", "--wait", "--", *cmd],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home"),
             "HF_HOME": str(tmp_path / "hf"), "DS_ACCELERATOR": "cpu"},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    m = re.search(r"submitted job (\d+)", done.stdout + done.stderr)
    assert m, done.stdout + done.stderr
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob(f"*-{m.group(1)}.*")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    return logs


def _one_world_of_four_on_two_nodes(here: Path, logs: str) -> None:
    world = [json.loads(p.read_text()) for p in sorted(here.glob("world-*.json"))]
    assert sorted(int(str(w["rank"])) for w in world) == [0, 1, 2, 3], logs
    assert {w["world"] for w in world} == {4} and {w["backend"] for w in world} == {"gloo"}
    assert {w["sum"] for w in world} == {10.0}  # 1 + 2 + 3 + 4: the allreduce spans them all
    hosts = [w["host"] for w in world]
    assert len(set(hosts)) == 2 and all(hosts.count(h) == 2 for h in set(hosts))


def test_accelerate_across_two_nodes(
    cluster: SlurmCluster, launcher_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "world.py").write_text(ACCELERATE_WORLD)
    # through the gate: preflight on both nodes checks the launcher's config there too
    logs = _run(cluster, tmp_path, launcher_venv, "accelerate", "launch", "world.py", gate=True)
    _one_world_of_four_on_two_nodes(tmp_path, logs)
    for node in (0, 1):  # what hpcenv added, said once per node
        assert (
            f"hpcenv: node {node}: accelerate gets --num_machines 2 --machine_rank {node} "
        ) in logs
    assert "--num_processes 4 --multi_gpu" in logs
    assert "hpcenv gate: preflight on 2 node(s)" in logs and "launcher-config" in logs


def test_deepspeed_across_two_nodes_without_ssh(
    cluster: SlurmCluster, launcher_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "world.py").write_text(DEEPSPEED_WORLD)
    logs = _run(cluster, tmp_path, launcher_venv, "deepspeed", "world.py")
    _one_world_of_four_on_two_nodes(tmp_path, logs)
    assert "hpcenv: node 1: deepspeed gets --hostfile" in logs and "--no_ssh" in logs
    hostfile = next((tmp_path / "logs").glob("hostfile-*")).read_text().splitlines()
    assert len(hostfile) == 2 and all(line.endswith(" slots=2") for line in hostfile)
