"""A warm ``hpcenv build local --project`` of a requirements project against pip's way.

The project: whisper's hand-written requirements.txt (tests/data/projects/whisper: numba,
numpy, torch, tqdm, more-itertools, tiktoken, triton on x86_64 Linux). torch is the CPU
2.13.0 wheel of the site wheelhouse (``$PIP_FIND_LINKS`` or /opt/wheels) on both sides.
Interleaved, ``--runs`` times each, after one warm-up of each (uv's cache warm):

- ``hpcenv``: ``hpcenv build local --project P --force`` into a private HPCENV_HOME (read
  the file, the plan, ``uv pip compile`` of the set, ``uv pip sync`` into a fresh venv,
  the import check of the packages built against torch, the switch);
- ``hpcenv_first``: the same into an HPCENV_HOME emptied before each run: a first build,
  with no build to take bytecode over from (the record of earlier RECORD proofs is kept
  per user and uv cache, so it knows the warm cache's files);
- ``uv_pip_install``: ``uv venv`` + ``uv pip install -r requirements.txt`` with the same
  torch (``-c`` a constraint ``torch==2.13.0+cpu``, ``--find-links`` the wheelhouse);
- ``uv_pip_install_plus_import``: the same plus importing torch, numba, numpy and
  tiktoken once (what the build's import check adds).

With ``--baseline-rev REV`` (``main``, a commit), ``hpcenv_REV`` runs the same build with
that revision's ``src`` (``git archive``, same interpreter, ``PYTHONPATH``) in the same
rounds, into its own HPCENV_HOME: a change to the build path measured against what it
replaces.

Prints JSON with min/median/max of each and the ratios of the medians (goal <= 1.1x
against the baseline that imports). Usage: ``python bench/bench_project_requirements.py
[--runs N] [--baseline-rev REV]``.
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
from datetime import datetime, timezone
from pathlib import Path

from _timing import export_rev, summarize

REPO = Path(__file__).resolve().parents[1]
PROJECT = REPO / "tests" / "data" / "projects" / "whisper"
IMPORTS = "import torch, numba, numpy, tiktoken, tqdm, more_itertools"


def wheelhouse() -> Path:
    for d in [*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels"]:
        if d and any(Path(d).glob("torch-2.13.0+cpu-cp311-*.whl")):
            return Path(d)
    sys.exit("bench_project_requirements: no torch-2.13.0+cpu cp311 wheel in a wheelhouse")


def timed(argv_list: list[list[str]], env: dict[str, str]) -> float:
    start = time.perf_counter()
    for argv in argv_list:
        subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-rev", default=None)
    args = ap.parse_args()
    from hpcenv.tools import uv

    uvx = uv.uv_argv()
    house = wheelhouse()
    with tempfile.TemporaryDirectory(prefix="bench-projreq-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "HPCENV_HOME": str(root / "home")}
        constraints = root / "constraints.txt"
        constraints.write_text("torch==2.13.0+cpu\n")
        venv = root / "baseline"
        py = str(venv / "bin" / "python")
        baseline = [
            [*uvx, "venv", "-q", "--python", "3.11", str(venv)],
            [*uvx, "pip", "install", "-q", "--python", py, "-r", str(PROJECT / "requirements.txt"),
             "-c", str(constraints), "--find-links", str(house)],
        ]  # fmt: skip
        cases = {
            "hpcenv": [
                [
                    sys.executable,
                    "-m",
                    "hpcenv",
                    "build",
                    "local",
                    "--project",
                    str(PROJECT),
                    "--force",
                ]
            ],
            "hpcenv_first": [],  # filled below: the same command, another home
            "uv_pip_install": baseline,
            "uv_pip_install_plus_import": [*baseline, [py, "-c", IMPORTS]],
        }
        cases["hpcenv_first"] = cases["hpcenv"]
        envs = {name: env for name in cases}
        first_home = root / "home-first"
        envs["hpcenv_first"] = {**env, "HPCENV_HOME": str(first_home)}
        if args.baseline_rev:
            name = f"hpcenv_{args.baseline_rev}"
            cases[name] = cases["hpcenv"]
            src = export_rev(args.baseline_rev, root / "baseline-rev")
            envs[name] = {**env, "HPCENV_HOME": str(root / "home-rev"), "PYTHONPATH": str(src)}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for run in range(args.runs + 1):  # the first round warms every cache
            for name, argvs in cases.items():
                shutil.rmtree(venv, ignore_errors=True)
                shutil.rmtree(first_home, ignore_errors=True)
                took = timed(argvs, envs[name])
                if run:
                    samples[name].append(took)
    out: dict[str, object] = {name: summarize(s) for name, s in samples.items()}
    med = {name: statistics.median(s) for name, s in samples.items()}
    out["ratio_vs_uv_pip_install"] = med["hpcenv"] / med["uv_pip_install"]
    out["ratio_vs_uv_pip_install_plus_import"] = med["hpcenv"] / med["uv_pip_install_plus_import"]
    out["ratio_first_vs_uv_pip_install_plus_import"] = (
        med["hpcenv_first"] / med["uv_pip_install_plus_import"]
    )
    if args.baseline_rev:
        rev = med[f"hpcenv_{args.baseline_rev}"]
        out[f"ratio_vs_hpcenv_{args.baseline_rev}"] = med["hpcenv"] / rev
        out[f"ratio_hpcenv_{args.baseline_rev}_vs_uv_pip_install_plus_import"] = (
            rev / med["uv_pip_install_plus_import"]
        )
    out["measured"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
