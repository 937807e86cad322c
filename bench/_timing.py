"""Shared helpers for bench scripts: time a command several times, take medians."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def timed_ok(argv: Sequence[str], env: Mapping[str, str], ok: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of one run of ``argv``; exits the bench when its code is not in ``ok``."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode not in ok:
        sys.exit(f"{list(argv)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return took


def export_rev(rev: str, dest: Path) -> Path:
    """``git archive REV src`` unpacked under ``dest`` (a baseline revision timed in the
    same rounds); returns its ``src``."""
    blob = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"
