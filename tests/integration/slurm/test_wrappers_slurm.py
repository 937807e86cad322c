"""A wrapper CLI across two nodes of the test SLURM cluster (issue 44):
``hpcenv sbatch local --nodes 2 --ntasks-per-node 2 -- llamafactory-cli train cfg.yaml``.

llamafactory 0.9.5's own ``llamafactory/cli.py`` and ``llamafactory/launcher.py`` (from
the wheel on PyPI, checked against its sha256) run on each node and start the real
``torchrun`` of the CPU torch venv with what they read from the node's variables. The
package does not install here with its dependencies (transformers, datasets, peft...), so
what it imports besides those two files stands in, each saying so: ``extras`` (its
``is_env_enabled`` as released, a CPU node's device count of 0) and the trainer
(``train.tuner.run_exp``: an allreduce over gloo writing its rank, in place of training).
Without hpcenv's variables each node would run one process alone (no torchrun: the
device count is 0; tests/integration/job/test_wrapper_clis.py shows it with the same
``launch()``); with them the four processes form one world, every rank once, and each
node's log says what it was given.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import cuda_artifacts, require
from support.slurm_cluster import SlurmCluster, local_profile

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

VERSION = "0.9.5"
STANDINS = {
    "__init__.py": "",
    "extras/__init__.py": "",
    "extras/logging.py": (
        "class _Log:\n    def info_rank0(self, *args):\n        print(*args, flush=True)\n\n\n"
        "def get_logger(name):\n    return _Log()\n"
    ),
    "extras/env.py": f"VERSION = {VERSION!r}\n\n\ndef print_env():\n    pass\n",
    "train/__init__.py": "",
    "train/tuner.py": """\
def run_exp():  # stands in for training: one allreduce, each rank's view written down
    import json, os, socket
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    with open(f"world-{dist.get_rank()}.json", "w") as f:
        json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(),
                   "host": socket.gethostname(), "sum": t.item()}, f)
    dist.barrier()
    dist.destroy_process_group()
""",
}
MISC = """\
import os, socket


def get_device_count():  # stands for torch.cuda's count on a CPU node
    return 0


def find_available_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def use_ray():
    return False


def use_kt():
    return False


"""


def _package(root: Path) -> None:
    """``root/llamafactory``: the release's cli.py and launcher.py, the stand-ins beside."""
    try:
        wheel = cuda_artifacts.wheel("llamafactory", VERSION, "py3-none-any")
    except (cuda_artifacts.Unavailable, OSError) as exc:
        require("pypi", False, f"llamafactory {VERSION}'s wheel on PyPI: {exc}")
        raise
    pkg = root / "llamafactory"
    with zipfile.ZipFile(wheel) as zf:
        for name in ("cli.py", "launcher.py"):
            (pkg / name).parent.mkdir(parents=True, exist_ok=True)
            (pkg / name).write_bytes(zf.read(f"llamafactory/{name}"))
        misc = zf.read("llamafactory/extras/misc.py").decode()
    for name, text in STANDINS.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    released = next(
        n for n in ast.walk(ast.parse(misc))
        if isinstance(n, ast.FunctionDef) and n.name == "is_env_enabled"
    )  # fmt: skip
    (pkg / "extras" / "misc.py").write_text(MISC + ast.unparse(released) + "\n")


def test_llamafactory_cli_across_two_nodes(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    _package(tmp_path / "lf")
    cli = tmp_path / "bin" / "llamafactory-cli"  # the wheel's console script, as pip writes it
    cli.parent.mkdir()
    cli.write_text(f"#!{torch_python}\nfrom llamafactory.cli import main\nmain()\n")
    cli.chmod(0o755)
    (tmp_path / "cfg.yaml").write_text("stage: sft\nfp16: true\n")
    profile = local_profile(tmp_path, "", scratch=True)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env",
         str(torch_python.parent.parent), "--nodes", "2", "--ntasks-per-node", "2",
         "--no-gate", "--submit", "--wait", "--", str(cli), "train", "cfg.yaml"],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home"),
             "PYTHONPATH": str(tmp_path / "lf")},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob("*.out")))
    logs += "".join(p.read_text() for p in sorted((tmp_path / "logs").glob("*.err")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    world = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("world-*.json"))]
    assert sorted(int(w["rank"]) for w in world) == [0, 1, 2, 3], logs
    assert {w["world"] for w in world} == {4} and {w["sum"] for w in world} == {10.0}
    hosts = [w["host"] for w in world]
    assert len(set(hosts)) == 2 and all(hosts.count(h) == 2 for h in set(hosts))
    for node in (0, 1):
        assert (
            f"hpcenv: node {node}: llamafactory-cli train (torchrun) gets FORCE_TORCHRUN=1 "
            f"NNODES=2 NODE_RANK={node} NPROC_PER_NODE=2" in logs
        )
