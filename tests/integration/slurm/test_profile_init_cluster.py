"""``hpcenv profile init`` and ``profile check`` on a real SLURM (issue 26).

The one-node test cluster with GRES (``gres_cluster``: ``gpu:tstgpu:4``, stand-in device
files, tests/support/cluster.py) is the login node's SLURM; Debian's real Lmod lists a test
modulefile tree made here; a fake ``nvidia-smi`` on the node (put on its PATH through
SLURM's TaskProlog) stands in for GPUs and a driver this machine does not have; recorded
facts (tests/data/facts/gh200-isambard.json, a GH200 with the cxi provider) stand in for
a compute node this machine cannot be.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.facts import lmod
from hpcenv.profile import schema
from support import FACTS, require
from support.fakenodes import fake_smi, modulefile_tree
from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

GH200 = FACTS / "gh200-isambard.json"
MODULES = ["PrgEnv-cray", "cuda/12.4", "cuda/12.6", "cuda/12.8", "nccl/2.21.5",
           "brics/aws-ofi-nccl/1.8.1"]  # fmt: skip
H100 = "NVIDIA H100 80GB HBM3, 9.0, 81559, {driver}, 0"


@pytest.fixture
def site(gres_cluster: SlurmCluster, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The login node's environment: the cluster's SLURM, a module tree for Lmod (and
    BASH_ENV, so a batch script's bash has ``module``, as a site's profile scripts do)."""
    require("lmod", lmod.lmod_command(os.environ) is not None, "apt-get install lmod")
    tree = modulefile_tree(tmp_path / "modulefiles", MODULES)
    env = {**gres_cluster.env, "MODULEPATH": str(tree), "HPCENV_HOME": str(tmp_path / "home"),
           "BASH_ENV": "/usr/share/lmod/lmod/init/bash"}  # fmt: skip
    env.pop("LMOD_CMD", None)
    yield env
    gres_cluster.set_node_env(gres_cluster.node, None)


def _node_gpus(cluster: SlurmCluster, tmp_path: Path, driver: str) -> None:
    """Four fake H100s (nvidia-smi) on the node, through its task environment."""
    bin_dir = tmp_path / "node-bin"
    fake_smi(bin_dir, [f"{i}, {H100.format(driver=driver)}" for i in range(4)], driver, "12.8")
    path = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    cluster.set_node_env(cluster.node, {"PATH": path, "HPCENV_NO_NVML": "1"})


def hpcenv(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcenv", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_init_with_gh200_facts_on_the_test_cluster(site: dict[str, str], tmp_path: Path) -> None:
    """The issue's acceptance run: platform from the facts, the cluster's default partition
    and GPU syntax, the cxi recipe, modules from Lmod; it validates and plans cu126."""
    done = hpcenv(site, tmp_path, "profile", "init", "newcl", "--facts", str(GH200))
    assert done.returncode == 0, done.stderr
    assert "wrote envs/newcl.toml: recipe cxi, partition debug, torch cu126" in done.stdout
    p = schema.load_path(tmp_path / "envs" / "newcl.toml")
    plat = p.platform
    assert (plat.arch, plat.compute_capability, plat.gpus_per_node, plat.driver) == (
        "aarch64", "9.0", 4, "565.57.01",
    )  # fmt: skip
    assert (p.env.recipe, plat.libfabric_provider, plat.nccl_net) == ("cxi", "cxi", "ofi")
    assert p.slurm.partition == "debug"  # the cluster's default (Default=YES)
    assert (p.slurm.gpu_request, p.slurm.gres_type) == ("gpus-per-node", "tstgpu")
    assert p.modules.load == ("cuda/12.6", "nccl/2.21.5", "brics/aws-ofi-nccl/1.8.1")
    text = (tmp_path / "envs" / "newcl.toml").read_text()
    assert "sbatch --test-only -p debug accepted gpus-per-node, gres, gpus" in text
    assert "GRES gpu:tstgpu:4" in text
    shown = hpcenv(site, tmp_path, "show", "envs/newcl.toml")
    assert shown.returncode == 0, shown.stderr
    plan = hpcenv(site, tmp_path, "plan", "envs/newcl.toml", "--declared", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["torch"]["backend"] == "cu126"
    wrong = hpcenv(site, tmp_path, "profile", "init", "x", "--facts", str(GH200),
                   "--partition", "gpu")  # fmt: skip
    assert wrong.returncode == 2
    assert wrong.stderr == (
        "hpcenv: error: --partition gpu: SLURM has no such partition; it has debug\n"
    )
    assert not (tmp_path / "envs" / "x.toml").exists()


def test_init_through_srun_then_show_plan_and_a_job_on_the_cluster(
    site: dict[str, str], gres_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """No --facts: the node's facts come from srun (four fake H100s, driver 570), then
    the written profile runs a job: its GPU request, its modules (real Lmod), its gate."""
    _node_gpus(gres_cluster, tmp_path, "570.86.10")
    done = hpcenv(site, tmp_path, "profile", "init", "h100cl")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "envs" / "h100cl.toml"
    p = schema.load_path(path)
    assert (p.platform.gpu, p.platform.gpus_per_node, p.platform.driver) == (
        "NVIDIA H100 80GB HBM3", 4, "570.86.10",
    )  # fmt: skip
    assert p.platform.arch == os.uname().machine
    assert p.job.scratch  # the node's TMPDIR or /tmp: a local filesystem
    assert "node facts: srun -p debug hpcenv facts" in path.read_text()
    assert hpcenv(site, tmp_path, "show", str(path)).returncode == 0
    plan = hpcenv(site, tmp_path, "plan", str(path), "--declared", "--json")
    assert plan.returncode == 0, plan.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cmd = "echo CVD=$CUDA_VISIBLE_DEVICES LOADED=$LOADEDMODULES"
    job = hpcenv(site, tmp_path, "sbatch", str(path), "--env", str(venv), "--gpus", "2",
                 "--submit", "--wait", "--", "bash", "-c", cmd)  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    (log,) = (tmp_path / "logs").glob("*.out")
    out = log.read_text()
    assert "CVD=0,1 " in out
    assert f"LOADED={':'.join(p.modules.load)}" in out
    assert re.search(r"gpus-visible\s*│\s*pass\s*│\s*2 GPUs visible, 2", out), out


def test_check_on_the_cluster_names_each_drift(
    site: dict[str, str], gres_cluster: SlurmCluster, tmp_path: Path
) -> None:
    _node_gpus(gres_cluster, tmp_path, "570.86.10")
    assert hpcenv(site, tmp_path, "profile", "init", "c1").returncode == 0
    path = tmp_path / "envs" / "c1.toml"
    clean = hpcenv(site, tmp_path, "profile", "check", str(path))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "no drift (driver, modules, partition, GRES checked)" in clean.stdout
    # the cluster today: a driver upgrade, CUDA 12.6's module gone
    _node_gpus(gres_cluster, tmp_path, "575.57.08")
    (Path(site["MODULEPATH"]) / "cuda" / "12.6.lua").unlink()
    drift = hpcenv(site, tmp_path, "profile", "check", str(path))
    assert drift.returncode == 2, drift.stdout + drift.stderr
    lines = drift.stdout.splitlines()
    assert any(f"{path}:" in x and "[platform] driver: = '570.86.10' but the node runs "
               "575.57.08: set driver = '575.57.08'" in x for x in lines), lines  # fmt: skip
    assert any("[modules] load: names 'cuda/12.6', which 'module -t avail' no longer lists; "
               "available now: cuda/12.4, cuda/12.8" in x for x in lines), lines  # fmt: skip
    # GRES retyped, then a partition renamed: the profile edited as if the site had changed
    text = path.read_text()
    path.write_text(text.replace('gres_type = "tstgpu"', 'gres_type = "volta"'))
    retyped = hpcenv(site, tmp_path, "profile", "check", str(path), "--facts", str(GH200))
    assert retyped.returncode == 2
    assert (
        "[slurm] gres_type: = 'volta' but partition debug's GRES is gpu:tstgpu:4: set "
        "gres_type = 'tstgpu'" in retyped.stdout
    )
    path.write_text(text.replace('partition = "debug"', 'partition = "gpu"'))
    renamed = hpcenv(site, tmp_path, "profile", "check", str(path), "--facts", str(GH200))
    assert renamed.returncode == 2
    assert "[slurm] partition: = 'gpu' but SLURM has no such partition now; it has debug" in (
        renamed.stdout
    )
