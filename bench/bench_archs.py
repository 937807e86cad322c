"""Reading GPU code from binaries, against NVIDIA's cuobjdump, in the same run.

(a) ``hpcenv archs --json`` on a real ``libtorch_cuda.so`` (torch 2.13.0's PyPI wheel,
    x86_64, 470 MB; read once from the wheel by HTTP range requests into the test cache)
    against ``cuobjdump -all --list-elf`` (PyPI ``nvidia-cuda-cuobjdump`` 13.5.37) of the
    same file; whole commands, interleaved (one run of each per round), after a warm-up
    round, so both read from a warm page cache. Goal: not slower.
(b) ``hpcenv audit VENV`` of a venv holding torch 2.13.0 with its CUDA wheels from PyPI
    (``uv pip install torch==2.13.0``; it imports without a GPU), against recorded facts
    (an RTX 6000 node, ``tests/data/facts/rtx6000-brtx.json``), page cache warm. Goal:
    under 2 s. ``python -c pass`` of hpcenv's Python is timed alongside as the floor.

Artifacts come from ``tests/support/cuda_artifacts.py`` (downloaded once). Prints JSON: min /
median / max per command, the ratio of medians, and what the scans found.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))
from _timing import summarize  # noqa: E402

from support import cuda_artifacts  # noqa: E402


def interleaved(variants: dict[str, list[str]], runs: int) -> dict[str, dict[str, float]]:
    """Each round runs every variant once; round 0 warms the page cache and is dropped."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(runs + 1):
        for name, argv in variants.items():
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True)
            took = time.perf_counter() - start
            if done.returncode not in (0, 3):  # audit exits 3 when the node cannot run it
                raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr[-500:]!r}")
            if round_ > 0:
                samples[name].append(took)
    return {name: summarize(s) for name, s in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-audit", action="store_true", help="skip (b) (a 3 GB venv)")
    args = ap.parse_args()
    py = sys.executable
    lib = cuda_artifacts.libtorch_cuda()
    cuobjdump = cuda_artifacts.cuobjdump()
    out: dict[str, object] = {"library": str(lib), "library_bytes": lib.stat().st_size}
    print(f"bench: hpcenv archs vs cuobjdump on {lib} x{args.runs}", file=sys.stderr)
    a = interleaved(
        {
            "hpcenv_archs": [py, "-m", "hpcenv", "archs", "--json", str(lib)],
            "cuobjdump_list_elf": [str(cuobjdump), "-all", "--list-elf", str(lib)],
        },
        args.runs,
    )
    out["archs"] = a
    out["cuobjdump_over_archs"] = (
        a["cuobjdump_list_elf"]["median_s"] / a["hpcenv_archs"]["median_s"]
    )
    found = json.loads(
        subprocess.run(
            [py, "-m", "hpcenv", "archs", "--json", str(lib)], capture_output=True, check=True
        ).stdout
    )["files"][0]
    out["libtorch_cuda"] = {"sass": found["sass_entries"], "full": found["full"]["sass"]}
    if not args.no_audit:
        venv = cuda_artifacts.torch_cuda_venv()
        facts = REPO / "tests" / "data" / "facts" / "rtx6000-brtx.json"
        print(f"bench: hpcenv audit {venv} x{args.runs}", file=sys.stderr)
        audit = [py, "-m", "hpcenv", "audit", str(venv), "--facts", str(facts), "--json"]
        b = interleaved({"hpcenv_audit": audit, "python_start": [py, "-c", "pass"]}, args.runs)
        out["audit"] = b
        done = subprocess.run(audit, capture_output=True, text=True)
        result = json.loads(done.stdout)
        out["audit_result"] = {"exit": done.returncode, "message": result.get("message")}
        scan = json.loads(
            subprocess.run(
                [py, "-m", "hpcenv", "archs", "--json", str(venv)],
                capture_output=True, check=True,
            ).stdout
        )  # fmt: skip
        out["venv_scan"] = {
            "libraries_read": scan["libraries_read"],
            "with_gpu_code": len(scan["files"]),
            "entries": sum(f["entries"] for f in scan["files"]),
        }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
