"""``hpcenv facts --json`` against a bare Python start and against
``python -m torch.utils.collect_env`` (when a torch venv is given with --torch-python),
all in the same run, interleaved (one run of each variant per round, so machine noise
hits them alike).

Variants: warm (the ``fi_info -l`` cache filled, the usual case), cold (an empty cache
directory every run: ``fi_info`` runs), and without ``fi_info`` on PATH (hpcenv's own
cost). Every variant runs without PYTHONDONTWRITEBYTECODE, so the warm-up round leaves
bytecode as an installed package has it. Prints JSON: min/median/max per variant, and
the ratios of medians.
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
from collections.abc import Callable, Mapping
from pathlib import Path

Env = Callable[[], Mapping[str, str]]


def interleaved(
    variants: dict[str, tuple[list[str], Env]], runs: int, every: dict[str, int]
) -> dict[str, dict[str, float]]:
    """Round-robin: each round runs every variant once (``every[name]``: only every n-th
    round, for slow baselines), after one warm-up round. Seconds per variant."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(runs + 1):
        for name, (argv, env) in variants.items():
            if round_ % every.get(name, 1):
                continue
            start = time.perf_counter()
            subprocess.run(argv, env=dict(env()), check=True, capture_output=True)
            if round_ > 0:  # round 0 warms caches (and fills the fi_info cache)
                samples[name].append(time.perf_counter() - start)
    return {
        name: {
            "median_s": statistics.median(s),
            "min_s": min(s),
            "max_s": max(s),
            "runs": len(s),
        }
        for name, s in samples.items()
        if s
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--torch-python", help="a python with torch, for the collect_env baseline")
    args = ap.parse_args()
    py = sys.executable
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # installed packages have bytecode
    facts = [py, "-m", "hpcenv", "facts", "--json"]
    scratch = Path(tempfile.mkdtemp(prefix="hpcenv-bench-facts-"))
    warm_env = {**os.environ, "HPCENV_CACHE": str(scratch / "warm")}
    cold_runs = iter(range(10**6))

    def cold_env() -> Mapping[str, str]:
        return {**os.environ, "HPCENV_CACHE": str(scratch / f"cold-{next(cold_runs)}")}

    # hpcenv's own cost: no fi_info on PATH (libfabric's ~0.3 s provider scan left out)
    no_fabric_path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "fi_info").exists()
    )
    variants: dict[str, tuple[list[str], Env]] = {
        "bare_python": ([py, "-c", "pass"], lambda: os.environ),
        "facts_json": (facts, lambda: warm_env),
        "facts_json_cold": (facts, cold_env),
        "facts_json_without_fi_info": (facts, lambda: {**os.environ, "PATH": no_fabric_path}),
    }
    every = {}
    if args.torch_python:
        variants["torch_collect_env"] = (
            [args.torch_python, "-m", "torch.utils.collect_env"],
            lambda: os.environ,
        )
        every["torch_collect_env"] = 3  # ~2-4 s a run: a third of the rounds
    out: dict[str, object] = dict(interleaved(variants, args.runs, every))
    med = {k: v["median_s"] for k, v in out.items() if isinstance(v, dict)}
    out["facts_over_bare_python"] = med["facts_json"] / med["bare_python"]
    out["facts_without_fi_info_over_bare_python"] = (
        med["facts_json_without_fi_info"] / med["bare_python"]
    )
    if "torch_collect_env" in med:
        out["collect_env_over_facts"] = med["torch_collect_env"] / med["facts_json"]
        out["collect_env_over_facts_cold"] = med["torch_collect_env"] / med["facts_json_cold"]
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
