"""The user's own srun and a real container on two nodes of the test SLURM cluster
(tests/support/cluster.py: network namespaces, real slurmctld/slurmd).

- ``hpcenv sbatch local --nodes 2 -- srun bash -c ...``: the user's srun runs once, from
  the batch step, after the gate: its task runs once per node (nested in hpcenv's per-node
  step, it would wait for nodes that step holds: "Requested nodes are busy");
- ``hpcenv sbatch local --nodes 2 -- podman run ... --rootfs ROOT python world.py``:
  Debian's podman runs a real container on each node (host network, as on clusters). The
  rootfs is made here: an empty directory whose /usr, /lib, /lib64 and /bin are this
  machine's, read-only, and the tests' CPU torch venv with its Python (no registry is
  reachable). Podman passes no host variable unless named, so the world forms only
  because hpcenv adds ``-e MASTER_ADDR -e NODE_RANK ...``: one torch.distributed world of
  2 (gloo), a rank on each node, inside the container: torchrun there finds the job's
  c10d rendezvous in the PET_* variables, its only link to the other node.

This machine's podman needs a containers.conf: runc (crun 1.8 refuses the hybrid cgroup
hierarchy here), cgroupfs (no systemd), and ulimits no higher than the current hard ones
(no CAP_SYS_RESOURCE). It is this machine's setup, passed as CONTAINERS_CONF; nothing in
hpcenv knows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import require
from support.slurm_cluster import SlurmCluster, local_profile

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

WORLD = """\
import json, os, socket
import torch, torch.distributed as dist
dist.init_process_group("gloo")  # torchrun's RANK, WORLD_SIZE, MASTER_ADDR/PORT
rank = dist.get_rank()
t = torch.ones(1) * (rank + 1)
dist.all_reduce(t)
with open(f"world-{rank}.json", "w") as f:
    json.dump({"rank": rank, "world": dist.get_world_size(), "host": socket.gethostname(),
               "sum": t.item(), "container": os.path.exists("/run/.containerenv"),
               "node_rank": os.environ["NODE_RANK"]}, f)
dist.barrier()
dist.destroy_process_group()
"""


def _submit(
    cluster: SlurmCluster, tmp_path: Path, venv: Path, *argv: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], str]:
    profile = local_profile(tmp_path, scratch=False)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env", str(venv),
         "--nodes", "2", "--time", "00:05:00", "--submit", "--wait", "--", *argv],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home"), **(env or {})},
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    m = re.search(r"submitted job (\d+)", done.stdout + done.stderr)
    assert m, done.stdout + done.stderr
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob(f"*-{m.group(1)}.*")))
    return done, logs


def test_the_user_s_srun_runs_once_per_node_never_nested(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    script = 'echo "$SLURM_STEP_ID" > "ran-$(hostname)-$SLURM_PROCID"'
    done, logs = _submit(cluster, tmp_path, torch_python.parent.parent, "srun", "bash", "-c",
                         script)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + logs
    ran = sorted(p.name for p in tmp_path.glob("ran-*"))
    assert len(ran) == 2 and {r.split("-")[2] for r in ran} == {"0", "1"}, ran
    assert len({r.split("-")[1] for r in ran}) == 2  # one task on each node
    steps = {(tmp_path / r).read_text().strip() for r in ran}
    assert len(steps) == 1, steps  # one step: the user's srun, started once
    # after the gate, from the batch step
    assert logs.index("hpcenv gate: preflight on 2 node(s)") < logs.index("the command starts")
    assert "your srun runs once from the batch step" in logs
    assert "the command exited with 0" in logs


def _rootfs(tmp_path: Path, python: Path) -> tuple[Path, list[str]]:
    """An empty rootfs and the read-only binds that give it a system and the venv."""
    root = tmp_path / "rootfs"
    root.mkdir()
    venv = python.parent.parent
    home = Path(os.path.realpath(python)).parent.parent  # the venv's Python installation
    binds = ["/usr", "/lib", "/bin", *(["/lib64"] if Path("/lib64").exists() else []),
             str(home), str(venv)]  # fmt: skip
    words = []
    for b in binds:
        words += ["-v", f"{b}:{b}:ro"]
    return root, words


def test_a_podman_command_on_two_nodes_forms_one_world(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    podman = shutil.which("podman")
    require("podman", podman is not None, "apt-get install podman runc")
    require("podman", shutil.which("runc") is not None, "apt-get install runc")
    hard = subprocess.run(["bash", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout
    conf = tmp_path / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={hard.strip()}:{hard.strip()}", "nproc=4096:4096"]\n'
        '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
    )
    (tmp_path / "world.py").write_text(WORLD)
    root, binds = _rootfs(tmp_path, torch_python)
    argv = ["podman", "run", "--rm", "--network", "host", *binds,
            "-v", f"{tmp_path}:{tmp_path}", "-w", str(tmp_path),
            "--rootfs", str(root), str(torch_python.parent / "torchrun"),
            "--nproc-per-node", "1", "world.py"]  # fmt: skip
    done, logs = _submit(cluster, tmp_path, torch_python.parent.parent, *argv,
                         env={"CONTAINERS_CONF": str(conf)})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + logs
    world = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("world-*.json"))]
    assert sorted(w["rank"] for w in world) == [0, 1], logs
    assert {w["world"] for w in world} == {2} and {w["sum"] for w in world} == {3.0}
    assert len({w["host"] for w in world}) == 2 and all(w["container"] for w in world)
    assert sorted(w["node_rank"] for w in world) == ["0", "1"]
    assert "hpcenv gate: podman on 2 node(s)" in logs
    assert f"hpcenv gate: image {root} on 2 node(s)" in logs
    assert "hpcenv's venv is not used" in done.stderr
