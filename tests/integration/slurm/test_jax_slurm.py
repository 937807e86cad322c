"""A JAX job across two nodes of the test SLURM cluster (tests/support/cluster.py: network
namespaces, real slurmctld/slurmd): ``hpcenv sbatch local --nodes 2 -- python world.py``,
whose script calls ``jax.distributed.initialize()`` with no arguments. JAX (the real CPU
jax 0.7.2 from PyPI, the shared probe venv) finds the coordinator, the process count and
each rank from SLURM's variables alone, and a psum over both processes' devices returns
1 + 2. hpcenv says in the job's log what JAX reads and adds nothing to the command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import require
from support.probe_env import has_jax
from support.slurm_cluster import SlurmCluster, local_profile, submitted_id

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

#: The user's script: nothing but SLURM tells JAX who it is (gloo: CPU collectives).
WORLD = """\
import json, os, socket
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize()
mesh = jax.make_mesh((jax.device_count(),), ("x",))
mine = np.full((jax.local_device_count(),), float(jax.process_index() + 1), np.float32)
arr = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), mine)
add = jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
total = jax.jit(add)(arr)
with open(f"jax-{jax.process_index()}.json", "w") as f:
    json.dump({"rank": jax.process_index(), "count": jax.process_count(),
               "procid": os.environ["SLURM_PROCID"], "host": socket.gethostname(),
               "sum": float(np.asarray(total.addressable_data(0)).reshape(-1)[0])}, f)
jax.distributed.shutdown()
"""


def test_jax_finds_the_job_from_slurm_alone_across_two_nodes(
    cluster: SlurmCluster, probe_python: Path, tmp_path: Path
) -> None:
    require("jax", has_jax(probe_python), "jax could not be installed from PyPI")
    venv = probe_python.parent.parent
    (tmp_path / "world.py").write_text(WORLD)
    profile = local_profile(tmp_path, "", scratch=True)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env", str(venv),
         "--nodes", "2", "--no-gate", "--submit", "--wait", "--",
         "JAX_PLATFORMS=cpu", "python", "world.py"],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    job = submitted_id(done)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob(f"*-{job}.*")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    # what the submitter and the job's log are told: the call, the jax read, SLURM's variables
    assert "world.py:7 calls jax.distributed.initialize() (jax 0.7.2 in" in done.stderr
    assert "hpcenv: jax: jax.distributed.initialize() reads SLURM itself" in logs
    assert "num_processes from SLURM_NTASKS" in logs and "CPU nodes: 1 process(es)" in logs
    world = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("jax-*.json"))]
    assert [(w["rank"], w["procid"]) for w in world] == [(0, "0"), (1, "1")], logs
    assert {w["count"] for w in world} == {2}
    assert {w["sum"] for w in world} == {3.0}  # 1 + 2: the psum spans both processes
    assert len({w["host"] for w in world}) == 2  # one process per node, on two nodes
