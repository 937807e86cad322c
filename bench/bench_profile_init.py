"""Wall time of ``hpcenv profile init`` end to end on a real local SLURM (issue 26).

Starts a private one-node SLURM with GRES (tests/support/cluster.py ``--gres gpu:tstgpu:4``:
stand-in device files, no GPUs here) and a modulefile tree for Debian's Lmod, then
times, interleaved, N runs of:

- ``hpcenv profile init benchcl --facts GH200.json --force`` (the whole command: SLURM
  survey, three ``sbatch --test-only`` GPU syntax checks, ``module -t avail``, torch
  choice, network recipe, validation, the write; without the srun step). Goal: < 10 s.
- the baseline: the same SLURM and Lmod reads alone, run back to back as subprocesses
  (``scontrol show partition``, ``sinfo -N``, three ``sbatch --test-only``, Lmod's
  ``bash -t avail``): the floor any tool reading the cluster pays.
- ``hpcenv profile init benchcl --force`` with the srun step (``srun -N1 hpcenv facts
  --json --scratch`` on the node), for information.

Prints JSON (min/median/max per figure).

    .nox/tests/bin/python bench/bench_profile_init.py [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from _timing import summarize  # noqa: E402

from hpcenv.facts import lmod  # noqa: E402
from support.cluster import up  # noqa: E402
from support.slurm_cluster import missing_binaries, stop_cluster  # noqa: E402

GH200 = REPO / "tests" / "data" / "facts" / "gh200-isambard.json"
MODULES = ("cuda/12.4", "cuda/12.6", "cuda/12.8", "nccl/2.21.5", "brics/aws-ofi-nccl/1.8.1")


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[:6]} exited {done.returncode}: {done.stderr[-2000:]}")
    return took


def _baseline(env: dict[str, str], cwd: Path, lmod_cmd: str) -> float:
    reads = [
        ["scontrol", "show", "partition", "--oneliner"],
        ["sinfo", "-h", "-N", "-o", "%N|%P|%G"],
        *(["sbatch", "--test-only", "-p", "debug", "-N1", opt, "--wrap", "true"]
          for opt in ("--gpus-per-node=1", "--gres=gpu:tstgpu:1", "--gpus=1")),
        [lmod_cmd, "bash", "-t", "avail"],
    ]  # fmt: skip
    start = time.perf_counter()
    for argv in reads:
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    lmod_cmd = lmod.lmod_command(os.environ)
    if missing_binaries() or lmod_cmd is None:
        print(json.dumps({"skipped": f"missing {missing_binaries() or ['lmod']}"}))
        return 0
    with tempfile.TemporaryDirectory(prefix="hpcenv-bench-init-") as tmp:
        root = Path(tmp)
        tree = root / "modulefiles"
        for name in MODULES:
            (tree / f"{name}.lua").parent.mkdir(parents=True, exist_ok=True)
            (tree / f"{name}.lua").write_text(f'whatis("{name}")\n')
        cluster = up(root / "slurm", nodes=1, gres="gpu:tstgpu:4")
        try:
            env = {**cluster.env, "MODULEPATH": str(tree), "HPCENV_HOME": str(root / "home")}
            hpcenv = [sys.executable, "-m", "hpcenv", "profile", "init", "benchcl", "--force"]
            init, base, srun = [], [], []
            _timed([*hpcenv, "--facts", str(GH200)], env, root)  # warm-up
            for _ in range(args.runs):
                init.append(_timed([*hpcenv, "--facts", str(GH200)], env, root))
                base.append(_baseline(env, root, lmod_cmd))
                srun.append(_timed(hpcenv, env, root))
        finally:
            stop_cluster(cluster)
    out: dict[str, object] = {
        "date": datetime.date.today().isoformat(),
        "profile_init_facts": summarize(init),
        "baseline_reads": summarize(base),
        "profile_init_srun": summarize(srun),
        "goal_s": 10.0,
    }
    out["met"] = summarize(init)["median_s"] < 10.0
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
