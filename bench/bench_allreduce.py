"""The 2-rank gloo allreduce probe against a bare torch.distributed loop, same sizes,
same run.

Both start 2 processes of the target Python, initialise gloo and run, per size,
``warmup`` + ``iters`` allreduces; the probe also fills rank-specific values, checks
every element of the first warmup iteration, writes its rank files and is gathered
by the runner. Reported per variant (medians of --runs, interleaved so machine noise
hits both alike): wall time of the whole run (process start to exit) and time of the
sweep itself (measured inside the ranks), plus busbw at the largest size. The
overhead target is < 10%.

    .venv/bin/python bench/bench_allreduce.py --python /path/to/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hpcenv.kit.ports import free_port
from hpcenv.kit.probe import rank_file
from hpcenv.runner import probes as runner

BARE = r"""
import datetime, json, os, sys, time
import torch, torch.distributed as dist

def main():
    lo, hi, iters, warmup = (int(x) for x in sys.argv[1:5])
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=120))
    world = dist.get_world_size()
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    t0 = time.perf_counter()
    last = None
    for nbytes in sizes:
        buf = torch.ones(nbytes // 4, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(buf)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        last = (time.perf_counter() - start) / iters
    sweep = time.perf_counter() - t0
    dist.destroy_process_group()
    algbw = sizes[-1] / last / 1e9
    if dist.is_initialized() is False and os.environ["RANK"] == "0":
        print(json.dumps({"sweep_s": sweep, "busbw_gbps": algbw * 2 * (world - 1) / world}))

main()
"""


def bare_run(python: str, lo: int, hi: int, iters: int, warmup: int) -> dict[str, float]:
    """The bare loop, launched exactly as the runner launches the probe's ranks."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare.py"
        script.write_text(BARE)
        env = dict(
            os.environ,
            HPCENV_RESULT_DIR=tmp,
            HPCENV_PROBE_NAME="bare",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(free_port()),
        )
        argv = [python, str(script), str(lo), str(hi), str(iters), str(warmup)]
        start = time.perf_counter()
        procs = runner.LocalLauncher().start(argv, env, 2)
        codes = [p.wait(timeout=600) for p in procs]
        wall = time.perf_counter() - start
        out = rank_file(Path(tmp), "bare", 0, "stdout").read_text()
    if any(codes):
        raise SystemExit(f"bare loop failed: exit codes {codes}")
    data = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "sweep_s": data["sweep_s"], "busbw_gbps": data["busbw_gbps"]}


def probe_run(python: str, lo: int, hi: int, iters: int, warmup: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        spec = runner.ProbeSpec(
            name="nccl",
            python=Path(python),
            ranks=2,
            timeout_s=600,
            args=(
                "--min-bytes",
                str(lo),
                "--max-bytes",
                str(hi),
                "--iters",
                str(iters),
                "--warmup",
                str(warmup),
            ),
        )
        start = time.perf_counter()
        result = runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=Path(tmp))
        wall = time.perf_counter() - start
    if result.status.value != "pass":
        raise SystemExit(f"probe did not pass: {result.summary}")
    m = result.metrics
    return {"wall_s": wall, "sweep_s": m["sweep_seconds"], "busbw_gbps": m["busbw_gbps_at_max"]}


def main() -> int:
    default_python = Path(tempfile.gettempdir()) / (
        "hpcenv-test-probe-venv-py311-torch2.13.0-cpu/bin/python"
    )
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=str(default_python), help="target venv's python")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    if not Path(a.python).exists():
        raise SystemExit(f"{a.python} not found; build a venv with torch (tests do) or pass one")
    args = (a.python, a.min_bytes, a.max_bytes, a.iters, a.warmup)
    bare_runs, probe_runs = [], []
    for _ in range(a.runs):  # interleaved
        bare_runs.append(bare_run(*args))
        probe_runs.append(probe_run(*args))

    def med(runs: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 4)

    out = {
        "benchmark": "allreduce probe (2 ranks, gloo) vs bare torch.distributed loop",
        "sizes": f"{a.min_bytes}..{a.max_bytes} bytes, doubling",
        "iters": a.iters,
        "warmup": a.warmup,
        "runs": a.runs,
        "bare": {k: med(bare_runs, k) for k in ("wall_s", "sweep_s", "busbw_gbps")},
        "probe": {k: med(probe_runs, k) for k in ("wall_s", "sweep_s", "busbw_gbps")},
    }
    for key in ("wall_s", "sweep_s"):
        b, pr = out["bare"][key], out["probe"][key]
        out[f"overhead_{key.removesuffix('_s')}_pct"] = round(100 * (pr - b) / b, 1)
    out["target_pct"] = 10
    out["within_target"] = out["overhead_wall_pct"] < 10
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
