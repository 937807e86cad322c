"""``hpcenv explain`` of a large job log: seconds and peak memory (goal, issue 43: within
2x of ``grep -F -f KEYS`` of the same keys; memory bounded by one block, not by the log).

Generates a log of ``--size-mb`` of sixteen ranks' interleaved output as srun --label and
c10d print it (NCCL_DEBUG=INFO lines at the start, then step lines with numbers, a few
warnings), rank 5 running out of GPU memory at 70 % of the file and the cascade after it
(the other ranks' watchdog timeouts, aborts, srun's Terminated), then times
``python -m hpcenv explain LOG --json`` (wall seconds, and peak RSS from ``wait4``).
Baselines in the same run, interleaved: ``grep -c -F -f KEYS`` with the catalogue's
prefilter keys (every key, one pass: the bar explain is held to), ``grep -c -F`` of the
OOM line alone, and with ``--main-src DIR`` (a checkout's ``src``, e.g. main's) the same
explain of that code. Prints min/median/max as JSON, the ratio of the medians, and checks
the answer (cause cuda_oom, rank 5, the line number).

    .venv/bin/python bench/bench_explain.py [--size-mb 500] [--runs 5] [--main-src DIR]

Run it at full size once or twice only on a shared machine (it writes the log to a
temporary directory and removes it).
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

RANKS = 16
OOM = (
    "5: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.10 GiB of which 1.02 GiB is free.\n"
)
CASCADE = (
    "{r}: [rank{r}]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=90210, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
    "{r}: [rank{r}]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {r}] "
    "Exception (either an error or timeout) detected by watchdog at work: 90210, last "
    "enqueued NCCL work: 90211, last completed NCCL work: 90209.\n"
)


def _steps(first: int, count: int) -> bytes:
    lines = []
    for step in range(first, first + count):
        for r in range(RANKS):
            lines.append(
                f"{r}: [rank{r}]: step {step} loss {2.5 - step * 1e-6:.6f} lr 3.0e-04 "
                f"grad_norm 0.93 tokens/s {12000 + r * 7} mem 61.2GiB\n"
            )
        if step % 500 == 0:
            lines.append(f"0: [rank0]: UserWarning: checkpoint {step} saved to ckpt/{step}.pt\n")
    return "".join(lines).encode()


def generate(path: Path, size: int) -> int:
    """Write the log; the 1-based line number of the OOM line."""
    head = "".join(
        f"{r}: node{r // 4 + 1}:{1000 + r}:{1000 + r} [{r % 4}] NCCL INFO comm 0x55 rank {r} "
        f"nranks {RANKS} cudaDev {r % 4} busId 1000 - Init COMPLETE\n"
        for r in range(RANKS)
    ).encode()
    block = _steps(1, 1000)
    lines = head.count(b"\n")
    oom_line = 0
    with path.open("wb") as fh:
        fh.write(head)
        written = len(head)
        while written < size:
            if not oom_line and written >= size * 0.7:
                fh.write(OOM.encode())
                lines += 1
                oom_line = lines
                fh.write("".join(CASCADE.format(r=r) for r in range(RANKS) if r != 5).encode())
                lines += 2 * (RANKS - 1)
            fh.write(block)
            written += len(block)
            lines += block.count(b"\n")
        fh.write(b"srun: error: node1: tasks 0-4,6-7: Terminated\n")
    return oom_line


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and stdout of one run."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        took = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode()
    return took, usage.ru_maxrss / 1024, text


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--main-src", type=Path, default=None, help="another checkout's src/")
    args = parser.parse_args()
    from hpcenv.knowledge import failures  # the keys explain searches for

    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-explain-") as tmp:
        log = Path(tmp) / "job-1.out"
        keys = Path(tmp) / "keys"
        keys.write_bytes(b"\n".join(failures.load().keys) + b"\n")
        oom_line = generate(log, args.size_mb << 20)
        explain = [sys.executable, "-m", "hpcenv", "explain", str(log), "--json"]
        grep_keys = ["grep", "-c", "-F", "-f", str(keys), str(log)]
        grep_one = ["grep", "-c", "-F", "CUDA out of memory", str(log)]
        walls, rss, keyed, one, main_walls = [], [], [], [], []
        for _ in range(args.runs):
            took, peak, text = _run(explain)
            found = json.loads(text)
            assert found["cause_id"] == "cuda_oom", found
            assert found["evidence"]["rank"] == 5 and found["evidence"]["line"] == oom_line, found
            walls.append(took)
            rss.append(peak)
            keyed.append(_run(grep_keys)[0])
            one.append(_run(grep_one)[0])
            if args.main_src:
                main_walls.append(_run(explain, {"PYTHONPATH": str(args.main_src)})[0])
        out = {
            "log_mib": round(log.stat().st_size / (1 << 20), 1),
            "ranks": RANKS,
            "keys": len(failures.load().keys),
            "explain_s": _stats(walls),
            "explain_peak_rss_mib": _stats(rss),
            "baseline_grep_F_f_keys_s": _stats(keyed),
            "baseline_grep_c_one_literal_s": _stats(one),
            "explain_over_grep_keys": round(statistics.median(walls) / statistics.median(keyed), 2),
            "runs": args.runs,
        }
        if main_walls:
            out["main_explain_s"] = _stats(main_walls)
            out["main_over_grep_keys"] = round(
                statistics.median(main_walls) / statistics.median(keyed), 2
            )
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
