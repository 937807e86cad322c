"""The srun launcher on a real SLURM (slurmctld + slurmd started by slurm_cluster.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.models import hostlist
from hpcenv.slurm import allocation
from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.parametrize(
    "nodelist", ["nid[001-004,010]", "gpu-[1-2]-[01-02]", "n[8-11],login", "r[1-2]n[1,3]"]
)
def test_scontrol_and_our_expander_agree(slurm: SlurmCluster, nodelist: str) -> None:
    out = slurm.run("scontrol", "show", "hostnames", nodelist).stdout.split()
    assert out == hostlist.expand(nodelist)
    assert allocation.hostnames(nodelist, env=slurm.env) == out  # through scontrol
    assert allocation.hostnames(nodelist, env={"PATH": "/nonexistent"}) == out  # fallback


RANK_SCRIPT = """\
import json, os, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
rank = int(os.environ["SLURM_PROCID"])
print(f"rank {rank} says hi", file=sys.stderr)
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "ntasks": os.environ["SLURM_NTASKS"],
    "master": [os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]],
    "rank_var": os.environ.get("RANK"), "marker": os.environ.get("HPCENV_MARKER"),
}))
if rank == int(os.environ.get("DIE_RANK", "-1")):
    sys.exit(3)
if os.environ.get("DIE_RANK"):
    time.sleep(600)  # the surviving rank would hang forever without --kill-on-bad-exit
"""

DRIVER = """\
import json, os, sys
from hpcenv.kit.ports import free_port
from hpcenv.slurm import srun
launcher = srun.launcher_for()
assert launcher is not None, "no allocation seen"
launcher.wait_s = 5
port = free_port()
env = dict(os.environ, RANK="99", HPCENV_MARKER="x; rm -rf ~", MASTER_PORT=str(port),
           HPCENV_RESULT_DIR=sys.argv[2], HPCENV_PROBE_NAME="demo")
procs = launcher.start([sys.executable, sys.argv[1], sys.argv[2]], env, launcher.default_ranks())
procs[0].wait(timeout=120)
print(json.dumps({"rc": procs[0].returncode, "hosts": launcher.hosts_for(2),
                  "failed": launcher.failed(env), "stderr": launcher.srun_log(env).read_text(),
                  "master": [launcher.master_addr, port], "nodes": launcher.nodes}))
"""


def _salloc(slurm: SlurmCluster, tmp_path: Path, die: int | None) -> dict[str, object]:
    (tmp_path / "rank.py").write_text(RANK_SCRIPT)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = dict(slurm.env)
    if die is not None:
        env["DIE_RANK"] = str(die)
    done = subprocess.run(
        [
            "salloc",
            "-n2",
            "--",
            sys.executable,
            str(tmp_path / "driver.py"),
            str(tmp_path / "rank.py"),
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr + slurm.log_text()
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_srun_launcher_starts_one_rank_per_task(slurm: SlurmCluster, tmp_path: Path) -> None:
    report = _salloc(slurm, tmp_path, die=None)
    assert report["rc"] == 0, report
    assert report["hosts"] == [slurm.node, slurm.node]
    ranks = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in (0, 1)]
    for k, r in enumerate(ranks):
        assert r["rank"] == k and r["ntasks"] == "2"
        assert r["rank_var"] is None  # the probe maps SLURM_PROCID itself
        assert r["marker"] == "x; rm -rf ~"  # passed through the environment, not a shell
        assert r["master"] == [report["master"][0], str(report["master"][1])]  # type: ignore[index]
    assert ranks[0]["master"][0] == slurm.node
    assert report["nodes"] == 1
    for k in (0, 1):  # each rank's output in the runner's per-rank files
        assert (tmp_path / f"demo.rank{k}.stderr").read_text() == f"rank {k} says hi\n"


def test_a_dead_rank_ends_the_step_and_is_named(slurm: SlurmCluster, tmp_path: Path) -> None:
    report = _salloc(slurm, tmp_path, die=1)
    assert report["rc"] != 0
    failed = {int(k): v for k, v in report["failed"].items()}  # type: ignore[attr-defined]
    assert failed[1].endswith("Exited with exit code 3"), report["stderr"]


def test_preflight_inside_a_real_allocation(slurm: SlurmCluster, tmp_path: Path) -> None:
    """In a CPU job the GPU checks see the allocation and skip with the reason."""
    done = subprocess.run(
        ["salloc", "-n1", "--", sys.executable, "-m", "hpcenv", "preflight", "local", "--json"],
        env=slurm.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout[done.stdout.index("{") :])["checks"]}
    assert checks["cuda-visible-devices"]["reason"].startswith("the allocation has no GPU ids")
    assert checks["gpus-visible"]["reason"] == "the allocation has no GPUs"
    assert checks["log-dir"]["status"] == "pass"
