"""Shared helpers for bench scripts: time a command several times, take medians."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median, min and max of wall-clock samples (seconds), and how many."""
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "runs": len(samples),
    }


def time_command(
    argv: Sequence[str], *, runs: int, env: Mapping[str, str] | None = None, warmup: int = 1
) -> dict[str, float]:
    """Median, min and max wall seconds of ``argv`` over ``runs`` runs (after warmups)."""
    for _ in range(warmup):
        subprocess.run(argv, env=env, check=True, capture_output=True)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return summarize(samples)
