"""``hpcenv explain`` of hpcenv's own failing jobs on the namespace SLURM cluster
(tests/support/cluster.py: one network namespace and slurmd per node): a rank killed with
kill -9 in a two-node job, explained by ``hpcenv sbatch --wait`` itself; an import
error; a rendezvous port already in use (torch's own TCPStore); a hang ended by the
watchdog; the wrong torch variant (a CPU build asked for CUDA). The venv is the tests'
CPU torch venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.slurm_cluster import SlurmCluster, submit_job, submitted_id

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _explain(cluster: SlurmCluster, tmp_path: Path, job_id: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "explain", job_id, "--log-dir", str(tmp_path / "logs"),
         "--json"],
        env=cluster.env, capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def test_a_two_node_job_with_a_rank_killed_is_explained_by_sbatch_wait(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """Rank 1 (the second node's task) kills itself with SIGKILL; srun takes the other
    down. ``sbatch --wait`` names rank 1, its node and the signal, and the job's report
    JSON carries the same explanation."""
    script = 'if [ "$SLURM_PROCID" = 1 ]; then kill -9 $$; fi; sleep 60'
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--nodes", "2", "--per-task",
                   "--no-gate", "--json", "--", "bash", "-c", script)  # fmt: skip
    assert done.returncode != 0, done.stdout + done.stderr
    job_id = submitted_id(done)
    print(done.stderr)  # what the user sees (docs/own-job.md quotes it)
    assert f"why job {job_id} failed" in done.stderr, done.stderr
    report = json.loads(done.stdout)
    found = report["explanation"]
    assert found["cause_id"] == "rank_died", found
    assert found["evidence"]["rank"] == 1
    assert found["evidence"]["node"] in {"node1", "node2", "node3"}
    assert "rank 1 died first (signal SIGKILL)" in found["cause"]
    on_disk = json.loads((tmp_path / "logs" / job_id / "report.json").read_text())
    assert on_disk["explanation"] == found
    code, again = _explain(cluster, tmp_path, job_id)
    assert code == 0 and again["cause_id"] == "rank_died"


def test_an_import_error_in_the_job_is_named_with_the_module(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--", "python", "-c", "import hpcenv_no_such_module")  # fmt: skip
    assert done.returncode != 0
    code, found = _explain(cluster, tmp_path, submitted_id(done))
    assert code == 0 and found["cause_id"] == "import_error", found
    assert "hpcenv_no_such_module" in str(found["cause"])


def test_a_rendezvous_port_in_use_is_named(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """torch's TCPStore (what torchrun's c10d rendezvous starts) on a port a socket holds."""
    code = (
        "import socket, datetime, torch.distributed as d; s = socket.socket(); "
        "s.bind(('', 0)); s.listen(); port = s.getsockname()[1]; "
        "d.TCPStore('127.0.0.1', port, 1, True, datetime.timedelta(seconds=5))"
    )
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--", "python", "-c", code)  # fmt: skip
    assert done.returncode != 0
    exit_code, found = _explain(cluster, tmp_path, submitted_id(done))
    assert exit_code == 0 and found["cause_id"] == "port_in_use", found


HANGS = """\
import time
print("step 1", flush=True)
def stuck_in_here():
    time.sleep(120)
stuck_in_here()
"""


def test_a_hang_ended_by_the_watchdog_is_a_hang(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--hang-timeout", "5s", "--", "python", "hangs.py")  # fmt: skip
    assert done.returncode == 10, done.stdout + done.stderr
    assert "cause: the job hung" in done.stderr, done.stderr
    code, found = _explain(cluster, tmp_path, submitted_id(done))
    assert code == 0 and found["cause_id"] == "hang", found


def test_a_cpu_torch_in_a_job_that_uses_cuda_is_the_wrong_variant(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """The tests' venv holds torch's CPU wheel: a job that asks for CUDA meets it."""
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--", "python", "-c", "import torch; torch.zeros(1, device='cuda')")  # fmt: skip
    assert done.returncode != 0
    assert "cause: the venv's torch is a CPU build" in done.stderr, done.stderr
    code, found = _explain(cluster, tmp_path, submitted_id(done))
    assert code == 0 and found["cause_id"] == "torch_cpu_build", found
