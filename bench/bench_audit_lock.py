"""``hpcenv audit`` of real ``uv.lock`` files, this checkout against an older one, interleaved.

Issue 21 moved the reading of a lock's install set from a hand-written lock walk and
marker evaluator to ``uv export --frozen`` (markers evaluated with ``packaging``). This
bench times both in the same run: ``--baseline-rev REV`` (default ``main``) is exported
with ``git archive`` into a temporary directory and run with ``PYTHONPATH`` pointing at
its ``src`` (same interpreter, same dependencies); this checkout runs as installed.

Cases (each ``hpcenv audit LOCK --facts F --json``, exit 0 or 3):

- ``prime-rl``: tests/data/projects/prime-rl/uv.lock on the GH200 facts (a workspace,
  cu128/cu130 torch by arch);
- ``open-instruct``: tests/data/projects/open-instruct/uv.lock on the GH200 facts
  (conflicting groups cuda12/cuda13, default groups);
- ``python``: ``python -c pass`` (the interpreter's own start).

Warm: one run of each first (uv's and hpcenv's caches filled), then ``--runs`` rounds,
each running every case of both checkouts in turn. Prints JSON: min/median/max per case
and checkout, and the ratio of the medians (after / before). Goal: after <= 2 s warm.
Usage: ``python bench/bench_audit_lock.py [--runs N] [--baseline-rev REV]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from _timing import export_rev, summarize, timed_ok

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
GH200 = DATA / "facts" / "gh200-isambard.json"
LOCKS = {"prime-rl": "prime-rl", "open-instruct": "open-instruct"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline-rev", default="main")
    args = ap.parse_args()
    hpcenv = [sys.executable, "-m", "hpcenv"]
    with tempfile.TemporaryDirectory(prefix="bench-audit-lock-") as tmp:
        before_src = export_rev(args.baseline_rev, Path(tmp) / "before")
        base = {**os.environ, "HPCENV_CACHE": str(Path(tmp) / "cache")}
        envs = {
            "after": {**base, "PYTHONPATH": str(REPO / "src")},
            "before": {**base, "PYTHONPATH": str(before_src)},
        }
        cases: dict[str, list[str]] = {
            name: [*hpcenv, "audit", str(DATA / "projects" / d / "uv.lock"), "--facts",
                   str(GH200), "--json"]
            for name, d in LOCKS.items()
        }  # fmt: skip
        cases["python"] = [sys.executable, "-c", "pass"]
        runs = [(f"{case}/{which}", argv, env) for case, argv in cases.items()
                for which, env in envs.items()]  # fmt: skip
        for _, argv, env in runs:  # warm-up
            timed_ok(argv, env, (0, 3))
        samples: dict[str, list[float]] = {key: [] for key, _, _ in runs}
        for _ in range(args.runs):
            for key, argv, env in runs:
                samples[key].append(timed_ok(argv, env, (0, 3)))
    out: dict[str, object] = {key: summarize(s) for key, s in samples.items()}
    for case in LOCKS:
        after = statistics.median(samples[f"{case}/after"])
        out[f"ratio_{case}_after_vs_before"] = after / statistics.median(samples[f"{case}/before"])
    out["baseline_rev"] = args.baseline_rev
    out["measured"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
