"""accelerate and DeepSpeed across two nodes of the test SLURM cluster (tests/support/cluster.py:
network namespaces, real slurmctld/slurmd): ``hpcenv sbatch local --nodes 2
--ntasks-per-node 2 -- accelerate launch world.py`` (and ``-- deepspeed world.py``)
with no launcher flags. hpcenv's per-node launcher (``hpcenv.job.launchers``) adds what
each node's copy needs from the allocation, and the processes form one world of 4 (2 per
node, CPU, gloo), every rank once, on both nodes. The launchers are the real PyPI
packages in a venv with the CPU torch wheel (``launcher_env``). DeepSpeed's CPU path
needs no oneCCL when the script asks for gloo, and JIT-builds one op with g++ (its shm
comm op, built once beside the venv: the ``launcher_ops`` fixture).
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
#: For DeepSpeed's per-node launch module: torch.distributed from the variables it sets.
TORCH_WORLD = """\
import json, os, socket
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
with open(f"world-{dist.get_rank()}.json", "w") as f:
    json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(),
               "host": socket.gethostname(), "backend": dist.get_backend(), "sum": t.item()}, f)
dist.barrier()
dist.destroy_process_group()
"""


def _run(
    cluster: SlurmCluster,
    tmp_path: Path,
    venv: Path,
    *cmd: str,
    gate: bool = False,
    ops: Path | None = None,
) -> str:
    """``ops``: the TORCH_EXTENSIONS_DIR holding the JIT ops the launch needs built."""
    extensions = {"TORCH_EXTENSIONS_DIR": str(ops)} if ops is not None else {}
    profile = local_profile(tmp_path, "", scratch=True)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env", str(venv),
         "--nodes", "2", "--ntasks-per-node", "2", *([] if gate else ["--no-gate"]),
         "--submit", "--wait", "--", *cmd],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home"),
             "HF_HOME": str(tmp_path / "hf"), "DS_ACCELERATOR": "cpu",
             **extensions},
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
    cluster: SlurmCluster, launcher_venv: Path, launcher_ops: Path, tmp_path: Path
) -> None:
    (tmp_path / "world.py").write_text(DEEPSPEED_WORLD)
    logs = _run(cluster, tmp_path, launcher_venv, "deepspeed", "world.py", ops=launcher_ops)
    _one_world_of_four_on_two_nodes(tmp_path, logs)
    assert "hpcenv: node 1: deepspeed gets --hostfile" in logs and "--no_ssh" in logs
    hostfile = next((tmp_path / "logs").glob("hostfile-*")).read_text().splitlines()
    assert len(hostfile) == 2 and all(line.endswith(" slots=2") for line in hostfile)


def test_a_prefixed_accelerate_across_two_nodes(
    cluster: SlurmCluster, launcher_venv: Path, tmp_path: Path
) -> None:
    """accelerate's README form, ``VAR=value accelerate launch``: the variable reaches the
    ranks, accelerate gets each node's rank, one world of 4 (no node runs
    ``ACCELERATE_LOG_LEVEL=info`` as a program)."""
    with_log = ACCELERATE_WORLD.replace("import json,", "import os, json,").replace(
        '"sum": t.item()', '"sum": t.item(), "log": os.environ.get("ACCELERATE_LOG_LEVEL")'
    )
    (tmp_path / "world.py").write_text(with_log)
    logs = _run(cluster, tmp_path, launcher_venv, "ACCELERATE_LOG_LEVEL=info", "accelerate",
                "launch", "world.py")  # fmt: skip
    _one_world_of_four_on_two_nodes(tmp_path, logs)
    assert {json.loads(p.read_text())["log"] for p in tmp_path.glob("world-*.json")} == {"info"}
    for node in (0, 1):
        assert f"hpcenv: node {node}: accelerate gets --num_machines 2 --machine_rank {node} " in (
            logs
        )


def test_an_old_deepspeed_across_two_nodes(
    cluster: SlurmCluster, old_deepspeed_venv: Path, tmp_path: Path
) -> None:
    """DeepSpeed 0.14.4 has no --no_ssh: each node runs its deepspeed.launcher.launch with
    the allocation's world info and its node rank; one world of 4, every rank once."""
    (tmp_path / "world.py").write_text(TORCH_WORLD)
    logs = _run(cluster, tmp_path, old_deepspeed_venv, "deepspeed", "world.py")
    _one_world_of_four_on_two_nodes(tmp_path, logs)
    assert "deepspeed runs on each node as python -u -m deepspeed.launcher.launch" in logs
    assert "(DeepSpeed 0.14.4)" in logs and "--no_ssh" not in logs
