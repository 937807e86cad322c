"""Wall time of probe jobs on a real local SLURM, from submit to report (JSON out).

Starts a private one-node SLURM (tests/support/slurm_cluster.py), builds a CPU-torch venv
with uv from the wheelhouse, then runs ``hpcenv sbatch local nccl --submit --wait``
(the user's command: render, sbatch, srun 2 gloo ranks, wait, print the report)
N times, against a baseline in the same run: an sbatch job that only runs ``true``
through the same script (queueing + polling cost). Prints medians as JSON.

    .venv/bin/python bench/bench_slurm.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hpcenv.job import targets  # noqa: E402
from hpcenv.profile import schema as profile  # noqa: E402
from hpcenv.slurm import sbatch  # noqa: E402
from support.slurm_cluster import missing_binaries, start_cluster, stop_cluster  # noqa: E402


def build_venv(root: Path) -> Path:
    venv = root / "venv"
    subprocess.run(["uv", "venv", "-q", "-p", "3.11", str(venv)], check=True)
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
         "--find-links", "/opt/wheels", "torch==2.13.0+cpu", "numpy"],
        check=True,
    )  # fmt: skip
    return venv


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if missing_binaries():
        print(json.dumps({"skipped": f"missing {missing_binaries()}"}))
        return 0
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-") as tmp:
        root = Path(tmp)
        venv = build_venv(root)
        cluster = start_cluster(root / "slurm")
        try:
            prof_path = root / "local.toml"
            prof_path.write_text(
                (REPO / "envs" / "local.toml")
                .read_text()
                .replace('log_dir = "logs"', f'log_dir = "{root / "logs"}"')
            )
            env = {**cluster.env, "HPCENV_HOME": str(root / "home")}
            baseline, probe = [], []
            for _ in range(args.runs):
                job = targets.render(
                    profile.load(str(prof_path)), "imports", workdir=root, run=["true"]
                )
                start = time.monotonic()
                job_id = sbatch.submit(sbatch.write(job), env=env)
                sbatch.wait(job_id, timeout=120, env=env)
                baseline.append(time.monotonic() - start)
                start = time.monotonic()
                done = subprocess.run(
                    [sys.executable, "-m", "hpcenv", "sbatch", str(prof_path), "nccl",
                     "--ntasks-per-node", "2", "--env", str(venv), "--submit", "--wait"],
                    env=env, cwd=root, capture_output=True, text=True, check=False,
                )  # fmt: skip
                probe.append(time.monotonic() - start)
                if done.returncode != 0:
                    print(done.stdout + done.stderr, file=sys.stderr)
                    return 1
        finally:
            stop_cluster(cluster)
    result = {
        "bench": "slurm probe-nccl job, submit to report",
        "runs": args.runs,
        "probe_nccl_median_s": round(statistics.median(probe), 2),
        "probe_nccl_all_s": [round(x, 2) for x in probe],
        "baseline_trivial_job_median_s": round(statistics.median(baseline), 2),
        "overhead_over_baseline_s": round(
            statistics.median(probe) - statistics.median(baseline), 2
        ),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
