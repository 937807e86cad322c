"""Jobs that survive a bad node and a hang, on a real four-node SLURM (``cluster4``
fixture, tests/support/cluster.py: node3's links capped at 100 Mbit/s with tc tbf).

- a three-node job gated by the bad-node finder (``--gate pairs --requeue-bad 1``) lands
  on node1-3, the finder names node3 by its pairs' busbw, and the job resubmits itself
  with ``--exclude=node3``: CMD runs on node1, node2 and node4; ``--wait`` follows the
  first job to the new one and exits with CMD's 0;
- a two-node CMD that stops printing inside a function (``--hang-timeout``): the log's
  stack dump (py-spy on both nodes) names that function, the link ends with exit 10
  (``--wait``), and the chain's next link runs to the end.

The venv is the tests' CPU torch venv (gloo stands in for NCCL across the namespaces).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.slurm_cluster import SlurmCluster, local_profile

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: CMD of the hang test: link 1 prints, then sits silent in ``stuck_in_here``; link 2 ends.
HANGS = """\
import os, socket, time
def stuck_in_here():
    time.sleep(600)
link = os.environ["HPCENV_CHAIN_LINK"]
print(f"link {link} on {socket.gethostname()}", flush=True)
if link == "1":
    stuck_in_here()
print(f"link {link} done", flush=True)
"""


@pytest.fixture(autouse=True)
def _daemon_logs(cluster4: SlurmCluster) -> Iterator[None]:
    """The daemons' logs, printed after each test: pytest shows them when it failed."""
    yield
    print(cluster4.log_text())


def _profile(tmp_path: Path) -> Path:
    """The local profile, logs under tmp_path, the finder timing 8 MiB allreduces."""
    text = local_profile(tmp_path).read_text()
    path = tmp_path / "survive.toml"
    path.write_text(text.replace("nccl_max_bytes = 67108864", f"nccl_max_bytes = {8 << 20}"))
    return path


def _submit(
    cluster: SlurmCluster, tmp_path: Path, venv: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    i = args.index("--")
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(_profile(tmp_path)), "--env", str(venv),
         *args[:i], "--submit", "--wait", *args[i:]],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip


def _log(tmp_path: Path, job_id: str) -> str:
    (path,) = (tmp_path / "logs").glob(f"*-{job_id}.out")
    return path.read_text()


def _ended(cluster: SlurmCluster, job_id: str, tmp_path: Path, timeout: float = 300) -> str:
    """The log of ``job_id`` once it has left the queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job_id not in cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split():
            return _log(tmp_path, job_id)
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still queued after {timeout:g} s")


def test_a_gated_job_requeues_itself_without_the_slow_node(
    cluster4: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    done = _submit(cluster4, tmp_path, torch_python.parent.parent, "--nodes", "3",
                   "--gate", "pairs", "--requeue-bad", "1", "--chain", "2",
                   "--", "hostname")  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out  # the requeued job's CMD succeeded: --wait followed it
    first = re.search(r"submitted job (\d+)", out)
    new = re.search(r"requeued as job (\d+) with --exclude=node3\b; following job (\d+)", out)
    assert first and new and new.group(1) == new.group(2), out
    assert f"job {new.group(1)} ended COMPLETED" in out, out
    log = _log(tmp_path, first.group(1))
    # which node, the evidence (its pairs' busbw), the new job id
    assert re.search(
        r"hpcenv requeue: bad node node3: best pair busbw [\d.e-]+ GB/s < 0.5 x "
        r"median [\d.e-]+ GB/s \(pairs: node\d [\d.e-]+, node\d [\d.e-]+\)",
        log,
    ), log
    assert f"resubmitted as job {new.group(1)} with --exclude=node3" in log, log
    assert "the command starts" not in log  # CMD never ran on the bad allocation
    queued = re.search(r"link 2 queued as job (\d+)", log)
    assert queued and f"the queued next link (job {queued.group(1)}) cancelled" in log, log
    second = _ended(cluster4, new.group(1), tmp_path)
    assert "hpcenv: nodes kept out of this chain: node3 (1 requeue(s) so far)" in second
    assert "the command exited with 0" in second, second
    ran = sorted(set(re.findall(r"^(node\d)$", second, re.M)))
    assert ran == ["node1", "node2", "node4"], second
    # the requeued link queued the chain's next link without node3 too (cancelled
    # when CMD succeeded; SLURM still shows it)
    link2 = re.search(r"link 2 queued as job (\d+)", second)
    assert link2 and f"link 2 (job {link2.group(1)}) cancelled" in second, second
    shown = cluster4.run("scontrol", "show", "job", link2.group(1)).stdout
    assert re.search(r"\bExcNodeList=node3\b", shown), shown


def test_a_silent_command_gets_its_stacks_dumped_and_the_chain_goes_on(
    cluster4: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    done = _submit(cluster4, tmp_path, torch_python.parent.parent, "--nodes", "2", "--no-gate",
                   "--hang-timeout", "6s", "--chain", "2", "--checkpoint-lead", "5",
                   "--", "python", "hangs.py")  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 10, out  # JobHung: the watchdog, not CMD's failure
    assert "the watchdog dumped its stacks into the log" in out, out
    first = re.search(r"submitted job (\d+)", out)
    assert first, out
    log = _ended(cluster4, first.group(1), tmp_path)
    assert "the command wrote nothing to stdout or stderr for 6 s" in log, log
    dumped = re.findall(r"hpcenv watchdog: --- (node\d) rank (\d) \(pid \d+\): \S*python", log)
    assert sorted(dumped) == [("node1", "0"), ("node2", "1")], log
    assert log.count("hpcenv watchdog:         stuck_in_here (") == 2, log
    assert "not in a collective: node1 rank 0" in log
    assert "SIGUSR1 to the command (checkpoint)" in log
    assert "this link ends with exit 10" in log
    nxt = re.search(r"link 2 queued as job (\d+)", log)
    assert nxt, log
    second = _ended(cluster4, nxt.group(1), tmp_path)
    assert second.count("link 2 done") == 2 and "the command exited with 0" in second, second
