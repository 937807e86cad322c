"""``hpcenv audit`` of hand-written files, warm, against baselines in the same run.

Interleaved, ``--runs`` times each, after one warm-up of each (the hpcenv resolution cache
in a private ``HPCENV_CACHE`` and uv's cache are then warm):

- ``audit_requirements``: ``hpcenv audit`` of whisper's hand-written requirements.txt
  (tests/data/projects/whisper: a bare ``torch`` line) for the recorded V100 node: read,
  the cached resolution (content + target), the torch and CUDA-package verdicts, exit 3;
- ``uv_pip_compile``: the baseline, ``uv pip compile`` of the same file for the same
  node (``--python-platform``/``--python-version``, uv's cache warm): what a user runs to
  see what pip would install there, without any verdict;
- ``audit_uv_lock``: ``hpcenv audit`` of prime-rl's real ``uv.lock`` on the GH200 facts
  (its install set from ``uv export --frozen``; goal < 2 s warm);
- ``python``: ``python -c pass`` (the interpreter's own start).

Prints JSON with min/median/max of each and the ratio of the audit's median to uv's.
Usage: ``python bench/bench_audit_requirements.py [--runs N]``.
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

from _timing import summarize, timed_ok

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    hpcenv = [sys.executable, "-m", "hpcenv"]
    from hpcenv.tools import uv

    req = DATA / "projects" / "whisper" / "requirements.txt"
    v100 = DATA / "facts" / "v100-supercloud.json"
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        env = {**os.environ, "HPCENV_CACHE": str(Path(tmp) / "cache")}
        env.pop("UV_FIND_LINKS", None)
        cases = {
            "audit_requirements": (
                [*hpcenv, "audit", str(req), "--facts", str(v100), "--json"],
                (0, 3),
            ),
            "uv_pip_compile": (
                [
                    *uv.uv_argv(),
                    "pip",
                    "compile",
                    str(req),
                    "--quiet",
                    "--no-header",
                    "--python-platform",
                    "x86_64-manylinux_2_31",
                    "--python-version",
                    "3.11",
                ],
                (0,),
            ),
            "audit_uv_lock": (
                [
                    *hpcenv,
                    "audit",
                    str(DATA / "projects" / "prime-rl" / "uv.lock"),
                    "--facts",
                    str(DATA / "facts" / "gh200-isambard.json"),
                    "--json",
                ],
                (0, 3),
            ),
            "python": ([sys.executable, "-c", "pass"], (0,)),
        }
        for argv, ok in cases.values():  # warm-up: caches filled
            timed_ok(argv, env, ok)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (argv, ok) in cases.items():
                samples[name].append(timed_ok(argv, env, ok))
    out: dict[str, object] = {name: summarize(s) for name, s in samples.items()}
    audit = statistics.median(samples["audit_requirements"])
    out["ratio_audit_vs_uv_pip_compile"] = audit / statistics.median(samples["uv_pip_compile"])
    out["measured"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
