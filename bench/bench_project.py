"""A warm ``hpcenv build local --project`` against a bare ``uv sync`` of the same project.

The project: ``torch==2.13.0`` (the CPU wheel of the site wheelhouse, ``$PIP_FIND_LINKS``
or /opt/wheels, as a path source), ``numpy`` and ``ray>=2.49``, locked once by ``uv lock``
in a temporary directory (PyPI). Then, interleaved, ``--runs`` times each (after one
warm-up of each, so every wheel is in uv's cache):

- ``hpcenv``: ``hpcenv build local --project P --force`` into a private HPCENV_HOME
  (uv export, the rewrite, ``uv pip compile``, ``uv pip sync`` into a fresh venv, the
  project's CUDA library check, the import check of torch, numpy and ray, the switch);
- ``uv_sync``: ``uv sync --frozen`` of the project into a fresh environment
  (``UV_PROJECT_ENVIRONMENT``, removed before each run);
- ``uv_sync_plus_import``: the same plus importing torch, numpy and ray once (the check
  the build adds, most of the difference).

Prints JSON with min/median/max of each and the ratios of the medians.
Usage: ``python bench/bench_project.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wheelhouse_torch() -> Path:
    for d in [*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels"]:
        for wheel in sorted(Path(d).glob("torch-2.13.0+cpu-cp311-*.whl")) if d else ():
            return wheel
    sys.exit("bench_project: no torch-2.13.0+cpu cp311 wheel in $PIP_FIND_LINKS or /opt/wheels")


def uv() -> str:
    return shutil.which("uv") or sys.exit("uv not found")  # type: ignore[return-value]


def make_project(root: Path) -> Path:
    project = root / "bench-trainer"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "bench-trainer"\nversion = "0.1.0"\nrequires-python = "==3.11.*"\n'
        'dependencies = ["torch==2.13.0", "numpy", "ray>=2.49"]\n\n'
        f'[tool.uv.sources]\ntorch = {{ path = "{wheelhouse_torch()}" }}\n'
    )
    subprocess.run([uv(), "lock", "--project", str(project), "-q"], check=True)
    return project


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - start


def stats(samples: list[float]) -> dict[str, float]:
    return {
        "min_s": min(samples),
        "median_s": statistics.median(samples),
        "max_s": max(samples),
        "runs": len(samples),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hpcenv-bench-project-"))
    try:
        project = make_project(tmp)
        env = {**os.environ, "HPCENV_HOME": str(tmp / "home")}
        build = [sys.executable, "-m", "hpcenv", "build", "local", "--project", str(project)]
        bare_env = {**env, "UV_PROJECT_ENVIRONMENT": str(tmp / "bare")}
        sync = [uv(), "sync", "--frozen", "--project", str(project), "-q"]
        check = [str(tmp / "bare" / "bin" / "python"), "-c", "import torch, numpy, ray"]

        def bare(with_import: bool) -> float:
            shutil.rmtree(tmp / "bare", ignore_errors=True)
            took = timed(sync, bare_env)
            return took + (timed(check, env) if with_import else 0.0)

        timed([*build, "--force"], env)  # warm-up: the uv cache, the first environment
        bare(True)
        samples: dict[str, list[float]] = {"hpcenv": [], "uv_sync": [], "uv_sync_plus_import": []}
        for _ in range(args.runs):  # interleaved: drift hits all three alike
            samples["hpcenv"].append(timed([*build, "--force"], env))
            samples["uv_sync"].append(bare(False))
            samples["uv_sync_plus_import"].append(bare(True))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, object] = {k: stats(v) for k, v in samples.items()}
    h = statistics.median(samples["hpcenv"])
    out["ratio_vs_uv_sync"] = h / statistics.median(samples["uv_sync"])
    out["ratio_vs_uv_sync_plus_import"] = h / statistics.median(samples["uv_sync_plus_import"])
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
