"""Your own job on a real SLURM: ``hpcenv sbatch PROFILE [options] -- CMD --submit``.

The three-node test cluster (``cluster`` fixture, tests/support/cluster.py: one network
namespace per node with its own hostname, a node network and a second one, one slurmd
each) runs what a user submits: the gate, CMD on two nodes, scratch copied back, a
three-link chain, a failing gate, signals passed on to CMD, a two-node torchrun job and
a Ray job. The venv is the tests' CPU torch + Ray venv (``torch_python``); the profile is
``local`` with its logs and scratch under the test's directory.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import require
from support.probe_env import has_ray
from support.slurm_cluster import SlurmCluster, local_profile, submit_job, submitted_id

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

#: CMD of the chain test: the run counter in the working directory, non-zero twice
COUNT = 'n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > count; [ "$n" -ge 3 ]'


def _profile(tmp_path: Path, extra: str = "") -> Path:
    return local_profile(tmp_path, extra, scratch=True)


def _log(tmp_path: Path, job_id: str, kind: str = "out") -> str:
    (path,) = (tmp_path / "logs").glob(f"*-{job_id}.{kind}")
    return path.read_text()


def _wait_gone(cluster: SlurmCluster, job_ids: list[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if not set(job_ids) & set(q):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {job_ids} still queued: {q}")


def test_a_two_node_job_through_the_gate_with_scratch_copied_back(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """CMD runs once on each of two nodes after the gate (preflight on both, the torch
    probe); what it leaves under $TMPDIR/out comes back to ./out; TMPDIR is gone."""
    script = (
        'mkdir -p "$TMPDIR/out" "$TMPDIR/my dir" && hostname > "$TMPDIR/out/$(hostname).txt"'
        ' && echo "$NCCL_NET|$VIRTUAL_ENV|$(command -v python)" > "$TMPDIR/my dir/$(hostname)"'
    )
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--nodes", "2", "--gate",
                   "torch", "--copy-back", "out", "--copy-back", "my dir",
                   "--", "bash", "-c", script)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = submitted_id(done)
    log = _log(tmp_path, job_id)
    assert log.count("preflight: local on node") == 2  # the gate on both nodes
    assert "hpcenv gate: probes torch" in log and "torch" in log
    assert re.search(r"the command starts \(link 1 of 1\), [\d.]+ s after the job started", log)
    assert "hpcenv: the command exited with 0" in log
    hosts = sorted(p.stem for p in (tmp_path / "out").iterdir())
    assert len(hosts) == 2 and set(hosts) <= {"node1", "node2", "node3"}
    for host in hosts:
        multi, venv, python = (tmp_path / "my dir" / host).read_text().strip().split("|")
        assert (multi, venv) == ("", str(torch_python.parent.parent))  # local: no NCCL_NET
        assert python == str(torch_python.parent / "python")
    assert not (tmp_path / "scratch" / job_id).exists()


def test_the_command_s_exit_code_is_the_job_s(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--", "bash", "-c", "echo failing; exit 3")  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "failed with exit code 3" in done.stderr
    log = _log(tmp_path, submitted_id(done))
    assert "hpcenv: no gate" in log and "hpcenv: the command exited with 3" in log


def _follow_chain(cluster: SlurmCluster, tmp_path: Path, first: str) -> list[str]:
    """The job ids of a chain, link by link, from each log's "queued as job N"."""
    ids, deadline = [first], time.monotonic() + 300
    while time.monotonic() < deadline:
        _wait_gone(cluster, [ids[-1]])
        log = _log(tmp_path, ids[-1])
        m = re.search(r"queued as job (\d+)", log)
        if not m:
            return ids
        ids.append(m.group(1))
    raise AssertionError(f"chain {ids} still running")


def test_a_three_link_chain(cluster: SlurmCluster, torch_python: Path, tmp_path: Path) -> None:
    """CMD exits non-zero twice, then 0: three links ran, each after its own gate, and
    no fourth was queued; each link's log says which link it was."""
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--chain", "3", "--time",
                   "10", "--", "bash", "-c", COUNT, wait=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ids = _follow_chain(cluster, tmp_path, submitted_id(done))
    assert len(ids) == 3, ids
    assert (tmp_path / "count").read_text().strip() == "3"
    logs = [_log(tmp_path, i) for i in ids]
    for k, log in enumerate(logs, start=1):
        assert "hpcenv gate: preflight on 1 node(s)" in log and "preflight: local on" in log
        assert f"the command starts (link {k} of 3)" in log
    assert f"link 2 queued as job {ids[1]}" in logs[0]
    assert f"link 3 queued as job {ids[2]}" in logs[1]
    assert "chain link 3 of 3: the last" in logs[2]
    assert "exited with 1" in logs[0] and "exited with 1" in logs[1]
    assert "exited with 0" in logs[2]
    states = [cluster.run("scontrol", "show", "job", i).stdout for i in ids]
    assert [re.findall(r"JobState=(\S+)", s) for s in states] == [
        ["FAILED"], ["FAILED"], ["COMPLETED"],
    ]  # fmt: skip


def test_success_or_a_failed_gate_ends_the_chain(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """CMD exits 0 on link 1: the queued link 2 is cancelled. A gate that fails (scratch
    smaller than the profile needs): CMD never starts, the job says which check, link 2 is
    cancelled too."""
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--chain", "3",
                   "--", "true")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    log = _log(tmp_path, submitted_id(done))
    m = re.search(r"the command succeeded: link 2 \(job (\d+)\) cancelled", log)
    assert m, log
    state = cluster.run("scontrol", "show", "job", m.group(1)).stdout
    assert "JobState=CANCELLED" in state

    bad = _profile(tmp_path, "")
    bad.write_text(bad.read_text().replace("[job]", "[job]\nscratch_min_gib = 1000000"))
    marker = tmp_path / "cmd-ran"
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(bad), "--env",
         str(torch_python.parent.parent), "--chain", "2", "--submit", "--wait",
         "--", "touch", str(marker)],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 8, done.stdout + done.stderr  # preflight's exit code
    job_id = submitted_id(done)
    err = _log(tmp_path, job_id, "err")
    assert "hpcenv: gate failed: preflight on 1 node(s) (exit 8)" in err
    assert "the gate failed: link 2" in _log(tmp_path, job_id)
    assert not marker.exists()


def test_signals_reach_the_command_s_process_group(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """SIGUSR1 to the batch shell (what --signal=B:USR1@lead sends before the walltime)
    reaches CMD, which checkpoints and exits; its code is the job's."""
    cmd = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (print('checkpoint', flush=True), "
        "os._exit(9)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--no-gate",
                   "--", "python", "-c", cmd, wait=False)  # fmt: skip
    job_id = submitted_id(done)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        logs = list((tmp_path / "logs").glob(f"*-{job_id}.out"))
        if logs and "ready" in logs[0].read_text():
            break
        time.sleep(0.3)
    cluster.run("scancel", "--batch", "--signal=USR1", job_id)
    _wait_gone(cluster, [job_id])
    log = _log(tmp_path, job_id)
    assert "checkpoint" in log and "hpcenv: the command exited with 9" in log
    assert "ExitCode=9:0" in cluster.run("scontrol", "show", "job", job_id).stdout


ALLREDUCE = """\
import json, os, socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
hosts = [None] * dist.get_world_size()
dist.all_gather_object(hosts, socket.gethostname())
if dist.get_rank() == 0:
    print("RESULT", json.dumps({"world": dist.get_world_size(), "sum": t.item(), "hosts": hosts}))
dist.destroy_process_group()
"""


def test_a_two_node_torchrun_job(cluster: SlurmCluster, torch_python: Path, tmp_path: Path) -> None:
    """``-- torchrun --nproc-per-node 1 allreduce.py`` on two nodes: no rendezvous flags,
    the job's PET_* variables make one world of two ranks across the nodes."""
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--nodes", "2", "--no-gate",
                   "--", "torchrun", "--nproc-per-node", "1", "allreduce.py")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + _logs_of(tmp_path, done)
    m = re.search(r"^RESULT (.*)$", _log(tmp_path, submitted_id(done)), re.M)
    assert m, _logs_of(tmp_path, done)
    result = json.loads(m.group(1))
    assert result["world"] == 2 and result["sum"] == 3.0
    assert len(set(result["hosts"])) == 2


def _logs_of(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> str:
    try:
        job_id = submitted_id(done)
        return _log(tmp_path, job_id) + _log(tmp_path, job_id, "err")
    except (AssertionError, ValueError):
        return ""


SEES = """\
import json, os, socket, ray
ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
nodes = [n for n in ray.nodes() if n["Alive"]]
print("RAY", json.dumps({"driver": socket.gethostname(),
      "hosts": sorted(n["NodeManagerHostname"] for n in nodes),
      "ips": sorted(n["NodeManagerAddress"] for n in nodes),
      "cpus": ray.cluster_resources().get("CPU")}), flush=True)
"""


def test_a_ray_job_on_the_head_sees_every_node(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """``--ray``: a script on the head node sees both nodes alive, each at the address its
    name resolves to (workers pinned too), with the CPUs the job asked for (1 per node),
    and nothing of that Ray cluster is left afterwards."""
    require("ray", has_ray(torch_python), "ray could not be installed from PyPI")
    (tmp_path / "sees.py").write_text(SEES)
    done = submit_job(cluster, tmp_path, torch_python.parent.parent, "--nodes", "2", "--ray",
                   "--cpus-per-task", "1", "--", "python", "sees.py")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + _logs_of(tmp_path, done)
    job_id = submitted_id(done)
    m = re.search(r"^RAY (.*)$", _log(tmp_path, job_id), re.M)
    assert m, _logs_of(tmp_path, done)
    seen = json.loads(m.group(1))
    assert len(seen["hosts"]) == 2 and seen["driver"] == seen["hosts"][0]
    assert seen["ips"] == sorted(cluster.node_info(h).eth0 for h in seen["hosts"])
    assert seen["cpus"] == 2.0
    plan = json.loads((tmp_path / "logs" / f"ray-{job_id}" / "ray-plan.json").read_text())
    assert plan["num_cpus"] == 1 and plan["worker_ips"] == [
        cluster.node_info(seen["hosts"][1]).eth0
    ]
    address = plan["address"]
    deadline = time.monotonic() + 30
    while (left := _processes_with(address)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, left


def _processes_with(text: str) -> list[str]:
    """Processes whose command line holds ``text`` (the Ray cluster's address)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            out.append(f"{proc.name}: {cmd[:120]}")
    return out
