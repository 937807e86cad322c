"""Probes inside sbatch on the real local SLURM: srun ranks, gloo allreduce, a dying rank.

The job scripts are rendered by ``hpcenv.slurm.sbatch`` for the ``local`` profile with two
tasks on the one node, submitted with sbatch, and run hpcenv's runner with the
launcher it picks inside the allocation (``SrunLauncher``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hpcenv.job import targets
from hpcenv.kit import registry
from hpcenv.profile import schema as profile
from hpcenv.slurm import sbatch
from support import DATA, REPO, require
from support.probe_env import has_ray
from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROBES = DATA / "slurm_probes"


def _script_dir(tmp_path: Path) -> Path:
    d = tmp_path / "probes"
    d.mkdir()
    for p in PROBES.glob("*_probe.py"):
        shutil.copy(p, d)
    for name in ("nccl", "ray"):  # the real probes
        shutil.copy(REPO / "probes" / registry.script_name(name), d)
    return d


def run_in_sbatch(
    slurm: SlurmCluster,
    tmp_path: Path,
    name: str,
    python: Path,
    *,
    timeout_s: float = 120,
    extra_env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str, float]:
    """Render, submit and wait for a job running probe ``name``; (report, state, seconds)."""
    prof = profile.load(str(REPO / "envs" / "local.toml"))
    results = tmp_path / "results"
    argv = [
        sys.executable,
        str(PROBES / "drive.py"),
        name,
        str(python),
        str(results),
        str(timeout_s),
        str(_script_dir(tmp_path)),
    ]
    job = targets.render(
        prof,
        "probe",
        ntasks_per_node=2,
        workdir=tmp_path,
        output_dir=tmp_path / "out",
        run=argv,
        extra_env=extra_env,
    )
    script = sbatch.write(job, tmp_path / f"{name}.sbatch")
    start = time.monotonic()
    job_id = sbatch.submit(script, env=slurm.env)
    state = sbatch.wait(job_id, timeout=timeout_s + 120, env=slurm.env)
    report = sbatch.read_report(job, job_id)
    seconds = time.monotonic() - start
    _out, err = job.log_paths(job_id)
    logs = f"state {state}\n{err.read_text() if err.exists() else ''}\n"
    assert isinstance(report, dict), f"no JSON report: {report!r}\n{logs}{slurm.log_text()}"
    return report, state, seconds


def test_gloo_allreduce_across_two_srun_ranks(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    report, state, seconds = run_in_sbatch(slurm, tmp_path, "allreduce", torch_python)
    print(f"allreduce job: submit to report {seconds:.1f} s")
    assert state == "COMPLETED"
    assert report["launcher"] == "SrunLauncher"
    assert report["status"] == "pass", report
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert report["hosts"] == {slurm.node: {"status": "pass", "ranks": [0, 1]}}
    assert report["ranks"][0]["details"]["master"].startswith(f"{slurm.node}:")


def test_nccl_probe_gloo_inside_sbatch(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    report, state, seconds = run_in_sbatch(slurm, tmp_path, "nccl", torch_python, timeout_s=300)
    print(f"probe-nccl job on local SLURM: submit to report {seconds:.1f} s")
    assert report["status"] == "pass", json.dumps(report, indent=1)[:3000]
    assert len(report["ranks"]) == 2
    assert state == "COMPLETED"


def test_a_rank_that_dies_is_named_and_the_job_ends(slurm: SlurmCluster, tmp_path: Path) -> None:
    """Rank 1 exits 3 at start, rank 0 would wait an hour: srun --kill-on-bad-exit ends
    the step, the report names rank 1, and the job ends long before the probe timeout."""
    report, state, seconds = run_in_sbatch(
        slurm, tmp_path, "die", Path(sys.executable), timeout_s=600
    )
    assert seconds < 300, "the job waited for the probe timeout instead of ending"
    assert report["status"] == "error", report
    by_rank = {r["rank"]: r for r in report["ranks"]}
    assert "rank 1 on host" in by_rank[1]["summary"]
    assert "simulated node failure" in by_rank[1]["summary"]
    assert report["srun_failed"]["1"] == f"{slurm.node}: Exited with exit code 3"
    # what the runner reports once it asks the launcher (SrunLauncher.rank_exit_codes):
    # rank 1 failed with its own code, rank 0 was stopped because of it
    assert report["rank_exit_codes"] == [None, 3]
    assert report["summary"].startswith("rank 1 on host"), report["summary"]
    assert "after another rank crashed" in by_rank[0]["summary"]
    assert state in ("FAILED", "COMPLETED")


def test_hpcenv_sbatch_submit_wait_runs_probe_nccl_through_srun(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """The user's command end to end: render, create logs, sbatch, wait, print the report;
    inside the job 'hpcenv probe nccl' picks the srun launcher for the allocation."""
    text = (REPO / "envs" / "local.toml").read_text()
    text = text.replace('log_dir = "logs"', f'log_dir = "{tmp_path / "logs"}"')
    (tmp_path / "local.toml").write_text(text)
    venv = torch_python.parent.parent
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpcenv",
            "sbatch",
            str(tmp_path / "local.toml"),
            "nccl",
            "--ntasks-per-node",
            "2",
            "--env",
            str(venv),
            "--submit",
            "--wait",
        ],
        env={**slurm.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    seconds = time.monotonic() - start
    print(f"hpcenv sbatch local nccl --submit --wait: {seconds:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    first, _, rest = done.stdout.partition("\n")
    job_id = first.split()[2]
    assert first.startswith(f"submitted job {job_id} ")
    report = json.loads(rest)
    assert report["status"] == "pass", rest[:3000]
    (nccl,) = report["results"]
    assert nccl["name"] == "nccl" and [r["rank"] for r in nccl["ranks"]] == [0, 1]
    ranks_dir = tmp_path / "logs" / job_id / "ranks"
    assert (ranks_dir / "nccl.srun.stderr").is_file()  # the ranks were started by srun
    assert (tmp_path / "logs" / job_id / "junit.xml").is_file()
    assert (tmp_path / "logs" / f"hpcenv-local-nccl-{job_id}.out").is_file()


def test_ray_probe_on_a_ray_cluster_started_over_the_allocation(
    slurm: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """The ray probe joins a head started by srun (workers too on >1 node); the cluster is
    gone afterwards (no raylet of ours left)."""
    require("ray", has_ray(torch_python), "ray could not be installed from PyPI")
    report, state, _ = run_in_sbatch(
        slurm, tmp_path, "ray", torch_python, timeout_s=300, extra_env={"HPCENV_RAY_ON_SLURM": "1"}
    )
    assert report["status"] == "pass", json.dumps(report, indent=1)[:3000]
    details = report["ranks"][0]["details"]
    assert details["nodes"] == 1 and details["task_hosts"] == [slurm.node]
    plan = json.loads((tmp_path / "results" / "ray-plan.json").read_text())
    assert plan["head"] == slurm.node and plan["workers"] == []
    assert plan["symmetric_run_available"] is True
    assert details["address"] == plan["address"]  # joined ours, did not start its own
    assert state == "COMPLETED"
