"""The requeue's overhead: from the bad-node gate's verdict to CMD running on the new
allocation, on a real four-node SLURM whose node3 is capped (tests/support/cluster.py, tc tbf).

Each round submits ``hpcenv sbatch local --nodes 3 --gate pairs --requeue-bad 1 --
bash -c 'echo ...'``: the job lands on node1-3, the finder names node3, the requeue helper
records its verdict's time (``verdict_at`` in the job's outcome file) and resubmits the
link with ``--exclude=node3``; the new job's CMD prints its own start (``EPOCHREALTIME``)
and its job's (``HPCENV_JOB_START``), on the same clock (the nodes share this machine's).
Reported, min/median/max:

- ``verdict_to_cmd``: the whole requeue overhead, verdict to CMD on the new nodes;
- ``verdict_to_new_job``: the first job's end, the new job's scheduling and start;
- ``new_job_to_cmd``: the new job's gate (preflight + the finder again, on good nodes).

Baseline in the same run, interleaved: the same job submitted with ``--exclude node3``
from the start (no requeue), its job start to CMD start: the gate a job pays anyway, so
``verdict_to_cmd`` minus it is what the requeue itself costs.

    .venv/bin/python bench/bench_requeue.py [--runs 3] [--venv VENV]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))

from bench_slurm import build_venv  # noqa: E402

from support.slurm_cluster import missing_binaries, start_cluster, stop_cluster  # noqa: E402

CMD = ["bash", "-c", 'echo "REQUEUE_BENCH $HPCENV_JOB_START $EPOCHREALTIME $(hostname)"']


def _submit(root: Path, env: dict[str, str], venv: Path, *extra: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(root / "local.toml"), "--env", str(venv),
         "--nodes", "3", "--gate", "pairs", *extra, "--submit", "--wait", "--", *CMD],
        env=env, cwd=root, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def _starts(root: Path, job: str, env: dict[str, str]) -> tuple[float, float, list[str]]:
    """(job start, latest CMD start, hosts) from a finished job's log."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        q = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True,
                           text=True, check=False).stdout.split()  # fmt: skip
        if job not in q:
            break
        time.sleep(0.5)
    (log,) = (root / "logs").glob(f"*-{job}.out")
    rows = re.findall(r"^REQUEUE_BENCH (\S+) (\S+) (\S+)$", log.read_text(), re.M)
    if len(rows) != 3:
        raise RuntimeError(f"expected 3 command starts in {log}: {log.read_text()}")
    return float(rows[0][0]), max(float(r[1]) for r in rows), sorted(r[2] for r in rows)


def requeued(root: Path, env: dict[str, str], venv: Path) -> dict[str, float]:
    code, out = _submit(root, env, venv, "--requeue-bad", "1")
    first = re.search(r"submitted job (\d+)", out)
    new = re.search(r"requeued as job (\d+) with --exclude=node3\b", out)
    if code != 11 or not first or not new:
        raise RuntimeError(f"no requeue (exit {code}): {out}")
    (outcome,) = (root / "logs").glob(f"*-{first.group(1)}.outcome.json")
    verdict = float(json.loads(outcome.read_text())["verdict_at"])
    job_start, cmd_start, hosts = _starts(root, new.group(1), env)
    if "node3" in hosts:
        raise RuntimeError(f"the requeued job ran on {hosts}")
    return {
        "verdict_to_cmd": cmd_start - verdict,
        "verdict_to_new_job": job_start - verdict,
        "new_job_to_cmd": cmd_start - job_start,
    }


def excluded_from_the_start(root: Path, env: dict[str, str], venv: Path) -> float:
    code, out = _submit(root, env, venv, "--exclude", "node3")
    job = re.search(r"submitted job (\d+)", out)
    if code != 0 or not job:
        raise RuntimeError(f"the baseline failed (exit {code}): {out}")
    job_start, cmd_start, _ = _starts(root, job.group(1), env)
    return cmd_start - job_start


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "min_s": round(min(values), 2),
        "median_s": round(statistics.median(values), 2),
        "max_s": round(max(values), 2),
        "runs": len(values),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=None, help="a CPU-torch venv to reuse")
    args = parser.parse_args()
    if missing_binaries():
        print(json.dumps({"skipped": f"missing {missing_binaries()}"}))
        return 0
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-requeue-") as tmp:
        root = Path(tmp)
        venv = args.venv or build_venv(root)
        text = (REPO / "envs" / "local.toml").read_text()
        text = text.replace('log_dir = "logs"', f'log_dir = "{root / "logs"}"')
        (root / "local.toml").write_text(
            text.replace("nccl_max_bytes = 67108864", f"nccl_max_bytes = {8 << 20}")
        )
        cluster = start_cluster(root / "slurm", nodes=4, slow=("node3",))
        env = {**cluster.env, "HPCENV_HOME": str(root / "home")}
        rows: dict[str, list[float]] = {}
        base: list[float] = []
        try:
            for r in range(args.runs):  # interleaved: a requeue, then the baseline
                for key, value in requeued(root, env, venv).items():
                    rows.setdefault(key, []).append(value)
                base.append(excluded_from_the_start(root, env, venv))
                print(f"round {r + 1}: {rows['verdict_to_cmd'][-1]:.1f} s verdict to CMD; "
                      f"baseline gate {base[-1]:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
        finally:
            stop_cluster(cluster)
    result = {
        "bench": "requeue: the bad-node gate's verdict to CMD on the new allocation",
        "variants": {key: _stats(v) for key, v in rows.items()},
        "baseline_gate_without_requeue": _stats(base),
        "requeue_itself_median_s": round(
            statistics.median(rows["verdict_to_cmd"]) - statistics.median(base), 2
        ),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
