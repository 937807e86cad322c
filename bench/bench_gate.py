"""The gate's cost: seconds from a job's start to its command's start, on a real SLURM.

Starts a private test SLURM (tests/support/cluster.py, ``--nodes`` nodes), builds a CPU-torch
venv with uv from the wheelhouse (bench_slurm.build_venv), then submits
``hpcenv sbatch local --nodes N [gate] -- bash -c 'echo ...'`` jobs whose command prints
the job's start (``HPCENV_JOB_START``, the script's first line) and its own start
(``EPOCHREALTIME``), both on the node's clock. Variants, interleaved round by round so
load drifts hit all alike: no gate (``--no-gate``, the baseline), the default gate
(venv check + ``hpcenv preflight`` on every node), ``--gate torch``, ``--gate
torch,nccl``. Prints min/median/max per variant and each median's overhead over the
baseline's, as JSON.

    .venv/bin/python bench/bench_gate.py [--runs 5] [--nodes 1]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))

from bench_slurm import build_venv  # noqa: E402

from support.slurm_cluster import missing_binaries, start_cluster, stop_cluster  # noqa: E402

VARIANTS: dict[str, list[str]] = {
    "no gate": ["--no-gate"],
    "preflight (default gate)": [],
    "preflight + torch": ["--gate", "torch"],
    "preflight + torch + nccl": ["--gate", "torch,nccl"],
}
CMD = ["bash", "-c", 'echo "GATE_BENCH $HPCENV_JOB_START $EPOCHREALTIME"']


def one_job(root: Path, env: dict[str, str], venv: Path, nodes: int, gate: list[str]) -> float:
    """Seconds from the job's first line to the command's start, for one job."""
    prof = root / "local.toml"
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(prof), "--env", str(venv),
         "--nodes", str(nodes), *gate, "--submit", "--wait", "--", *CMD],
        env=env, cwd=root, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    m = re.search(r"submitted job (\d+)", done.stdout + done.stderr)
    if done.returncode != 0 or not m:
        raise RuntimeError(f"job failed ({done.returncode}): {done.stdout}{done.stderr}")
    (log,) = (root / "logs").glob(f"*-{m.group(1)}.out")
    starts = re.findall(r"^GATE_BENCH (\S+) (\S+)$", log.read_text(), re.M)
    if len(starts) != nodes:
        raise RuntimeError(f"expected {nodes} command starts in {log}: {log.read_text()}")
    return max(float(cmd) - float(job) for job, cmd in starts)


def summary(values: list[float]) -> dict[str, float | int]:
    return {
        "min_s": round(min(values), 3),
        "median_s": round(statistics.median(values), 3),
        "max_s": round(max(values), 3),
        "runs": len(values),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args()
    if missing_binaries():
        print(json.dumps({"skipped": f"missing {missing_binaries()}"}))
        return 0
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-gate-") as tmp:
        root = Path(tmp)
        venv = build_venv(root)
        (root / "local.toml").write_text(
            (REPO / "envs" / "local.toml")
            .read_text()
            .replace(
                'log_dir = "logs"', f'log_dir = "{root / "logs"}"\nscratch = "{root / "scratch"}"'
            )
        )
        cluster = start_cluster(root / "slurm", nodes=args.nodes)
        env = {**cluster.env, "HPCENV_HOME": str(root / "home")}
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        try:
            one_job(root, env, venv, args.nodes, VARIANTS["preflight + torch + nccl"])  # warm
            for _ in range(args.runs):
                for name, gate in VARIANTS.items():
                    seconds[name].append(one_job(root, env, venv, args.nodes, gate))
        finally:
            stop_cluster(cluster)
    base = statistics.median(seconds["no gate"])
    result = {
        "bench": "gate: seconds from job start to CMD start (hpcenv sbatch -- CMD)",
        "nodes": args.nodes,
        "runs": args.runs,
        "variants": {name: summary(v) for name, v in seconds.items()},
        "overhead_over_no_gate_median_s": {
            name: round(statistics.median(v) - base, 3) for name, v in seconds.items()
        },
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
