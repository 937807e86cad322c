"""The bad-node finder's wall time on 3 nodes against one full-allocation allreduce sweep.

Starts a private 3-node SLURM cluster (``tests/support/cluster.py``, node3's links capped at
100 Mbit/s), then, inside one ``salloc -N3 --ntasks-per-node=2`` each, runs N times,
interleaved:

- ``hpcenv probe nccl --pairs``: a check per node (2 ranks, 1K..1M), then three rounds
  of one pair (one rank per node, 8 MiB allreduces);
- the baseline: ``hpcenv probe nccl``, one sweep over the whole allocation (6 ranks,
  1K..8 MiB), which says only that something is slow, not what.

Prints JSON: min/median/max wall seconds of each, their ratio, the finder's busbw per
pair (median over runs) and what it excluded in every run. Needs root.

    .venv/bin/python bench/bench_pairs.py --python VENV/bin/python [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support import cluster as machinery  # noqa: E402

PAIR_BYTES = 8 << 20


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 2),
        "min_s": round(min(samples), 2),
        "max_s": round(max(samples), 2),
    }


def _probe(
    c: machinery.Cluster, root: Path, python: str, prof: Path, *extra: str
) -> tuple[float, dict[str, Any]]:
    """One ``hpcenv probe nccl`` inside a fresh 3-node allocation: (seconds, JSON report)."""
    start = time.perf_counter()
    done = subprocess.run(
        ["salloc", "-N3", "--ntasks-per-node=2", "--", sys.executable, "-m", "hpcenv",
         "probe", "nccl", "--env", python, "--profile", str(prof), *extra, "--json"],
        env={**c.env, "HPCENV_HOME": str(root / "home")}, cwd=root,
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    try:
        return seconds, json.loads(done.stdout)
    except ValueError as exc:
        raise SystemExit(f"bench_pairs: no report (exit {done.returncode}): {done.stderr}") from exc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True, help="a venv python with CPU torch")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    lacking = machinery.missing()
    if lacking:
        print(json.dumps({"skipped": f"the test cluster needs {'; '.join(lacking)}"}))
        return 0
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-pairs-") as tmp:
        root = Path(tmp)
        text = (REPO / "envs" / "local.toml").read_text()
        prof = root / "local.toml"
        prof.write_text(text.replace("nccl_max_bytes = 67108864", f"nccl_max_bytes = {PAIR_BYTES}"))
        c = machinery.up(root / "cluster", nodes=3, slow=("node3",))
        finder, sweep, excluded, sweep_busbw = [], [], [], []
        per_pair: dict[str, list[float]] = {}
        try:
            for _ in range(args.runs):
                seconds, report = _probe(c, root, args.python, prof, "--pairs")
                finder.append(seconds)
                excluded.append(report["exclude"])
                for p in report["pairs"]["pairs"]:
                    per_pair.setdefault("+".join(p["hosts"]), []).append(p["busbw_gbps"])
                seconds, report = _probe(c, root, args.python, prof)
                sweep.append(seconds)
                sweep_busbw.append(report["results"][0]["metrics"].get("busbw_gbps_at_max", 0.0))
        finally:
            machinery.down(c.root, cluster=c)
    result = {
        "bench": "bad-node finder vs one full-allocation sweep, 3 nodes, node3 at 100 Mbit/s",
        "runs": args.runs,
        "pair_bytes": PAIR_BYTES,
        "finder": _stats(finder),
        "full_sweep": _stats(sweep),
        "finder_over_sweep": round(statistics.median(finder) / statistics.median(sweep), 2),
        "pair_busbw_gbps": {k: round(statistics.median(v), 4) for k, v in per_pair.items()},
        "sweep_busbw_gbps_at_max": round(statistics.median(sweep_busbw), 4),
        "excluded": excluded,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
