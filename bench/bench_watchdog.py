"""The hang watchdog's CPU cost on a job that never hangs (goal: under 1% of one core).

Runs a command that prints a line every 0.5 s for ``--seconds`` (it never hangs) with
the watchdog beside it (``python -I -m hpcenv.slurm.watchdog``, as the job script starts
it: the command's log file and a heartbeat file watched, ``--hang-timeout`` 2 s, 30 s
and 10 min: polls every 0.2, 3 and 5 s), and reads the watchdog's own CPU time (user +
system, from ``wait4``) when the command ends and the watchdog with it. Baseline in the
same run, interleaved: an idle interpreter started the same way (``python -I -c`` that
sleeps as long), which costs the same start-up; the watchdog's steady cost is its CPU
time above that baseline's. Prints min/median/max per variant as JSON; percentages are
of one core over the command's run.

    .venv/bin/python bench/bench_watchdog.py [--runs 3] [--seconds 20]
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

TIMEOUTS = {"--hang-timeout 2s (poll 0.2 s)": 2.0, "30s (poll 3 s)": 30.0, "10m (poll 5 s)": 600.0}
PRINTS = "import time\nfor i in range(int({n})):\n print(i, flush=True)\n time.sleep(0.5)\n"


def _cpu_of(proc: subprocess.Popen[bytes]) -> float:
    """Wait for ``proc``; its user + system CPU seconds."""
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime


def one(root: Path, seconds: float, timeout: float | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the watchdog (or the idle baseline: ``None``)
    beside a command printing for ``seconds``."""
    out = root / "out"
    beat = root / "beat"
    beat.touch()
    with out.open("ab") as log:
        cmd = subprocess.Popen([sys.executable, "-c", PRINTS.format(n=seconds * 2)],
                               stdout=log, stderr=log, start_new_session=True)  # fmt: skip
    started = time.monotonic()
    if timeout is None:
        argv = [sys.executable, "-I", "-c", f"import time; time.sleep({seconds})"]
    else:
        argv = [sys.executable, "-I", "-m", "hpcenv.slurm.watchdog", "--pid", str(cmd.pid),
                "--timeout", str(timeout), "--token", "bench", "--watch", str(out),
                "--heartbeat", str(beat)]  # fmt: skip
    watcher = subprocess.Popen(argv)
    cmd.wait()
    cpu = _cpu_of(watcher)
    return cpu, time.monotonic() - started


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {"idle interpreter (baseline)": []} | {k: [] for k in TIMEOUTS}
    wall: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-watchdog-") as tmp:
        for r in range(args.runs):  # interleaved: each round runs every variant
            for name, samples in cpu.items():
                used, took = one(Path(tmp), args.seconds, TIMEOUTS.get(name))
                samples.append(used)
                wall.append(took)
                print(f"round {r + 1}: {name}: {used:.3f} CPU s over {took:.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
    base = statistics.median(cpu["idle interpreter (baseline)"])
    span = statistics.median(wall)
    result: dict[str, Any] = {"seconds": args.seconds, "runs": args.runs, "variants": {}}
    for name, used in cpu.items():
        above = [max(0.0, u - base) for u in used]
        result["variants"][name] = {
            "cpu_s": _stats(used),
            "percent_of_one_core": _stats([100 * u / span for u in used]),
            "steady_percent_above_baseline": _stats([100 * a / span for a in above]),
        }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
