"""accelerate across two nodes of the test SLURM cluster (tests/cluster.py: network
namespaces, real slurmctld/slurmd): ``hpcenv sbatch --nodes 2 -- accelerate launch
train.py`` with no launcher flags forms one world of two ranks, one per node, through
hpcenv's per-node launcher (``hpcenv.job.launchers``). Real accelerate from PyPI, real
CPU torch 2.13.0, gloo.

DeepSpeed is checked by rendering only (tests/test_launchers.py): its CPU path needs
Intel's oneCCL bindings (DeepSpeed's CPU accelerator talks 'ccl'), which are not on PyPI
for this machine's Python.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require
from probe_env import has_accelerate
from slurm_cluster import (  # noqa: F401 - fixtures
    SlurmCluster,
    daemon_logs_fixture,
    local_profile,
    multinode_cluster_fixture,
)
from torch_venv import torch_venv_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAIN = """\
import json, socket, torch
from accelerate import Accelerator
from accelerate.utils import gather_object
acc = Accelerator(cpu=True)
total = acc.reduce(torch.tensor([float(acc.process_index + 1)]), reduction="sum")
hosts = gather_object([socket.gethostname()])
if acc.is_main_process:
    print("RESULT", json.dumps({"world": acc.num_processes, "sum": total.item(),
                                "hosts": hosts, "type": str(acc.distributed_type)}))
acc.end_training()  # destroys the process group: gloo aborts an exit that skips it
"""


def test_accelerate_on_two_nodes_forms_one_world(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    require("accelerate", has_accelerate(torch_python), "accelerate did not install from PyPI")
    (tmp_path / "train.py").write_text(TRAIN)
    profile = local_profile(tmp_path, "", scratch=True)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env",
         str(torch_python.parent.parent), "--nodes", "2", "--no-gate", "--submit", "--wait",
         "--", "accelerate", "launch", "train.py"],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob("*.*")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    m = re.search(r"^RESULT (.*)$", logs, re.M)
    assert m, logs
    result = json.loads(m.group(1))
    assert result["world"] == 2 and result["sum"] == 3.0, result  # ranks 1 + 2: one world
    assert len(set(result["hosts"])) == 2, result  # a rank on each node
    assert "MULTI_CPU" in result["type"]
    # what hpcenv added is in the log, once per node
    assert "hpcenv: node 0: accelerate gets --num_machines 2 --machine_rank 0" in logs
    assert "hpcenv: node 1: accelerate gets --num_machines 2 --machine_rank 1" in logs
