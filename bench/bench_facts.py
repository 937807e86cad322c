"""``hpcenv facts --json`` against a bare Python start of the same venv and against
``python -m torch.utils.collect_env`` (when a torch venv is given with --torch-python).

Prints JSON: medians of several runs, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import time_command


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--torch-python", help="a python with torch, for the collect_env baseline")
    args = ap.parse_args()
    py = sys.executable
    bare = time_command([py, "-c", "pass"], runs=args.runs)
    facts = time_command([py, "-m", "hpcenv", "facts", "--json"], runs=args.runs)
    # The same without fi_info on PATH: hpcenv's own cost, without libfabric's ~0.2-0.3 s
    # provider scan (libfabric pays it even for `fi_info --version`).
    no_fabric_path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "fi_info").exists()
    )
    no_fabric = time_command(
        [py, "-m", "hpcenv", "facts", "--json"],
        runs=args.runs,
        env={**os.environ, "PATH": no_fabric_path},
    )
    out: dict[str, object] = {
        "bare_python": bare,
        "facts_json": facts,
        "facts_json_without_fi_info": no_fabric,
        "facts_over_bare_python": facts["median_s"] / bare["median_s"],
        "facts_without_fi_info_over_bare_python": no_fabric["median_s"] / bare["median_s"],
    }
    if args.torch_python:
        collect = time_command(
            [args.torch_python, "-m", "torch.utils.collect_env"], runs=max(3, args.runs // 5)
        )
        out["torch_collect_env"] = collect
        out["collect_env_over_facts"] = collect["median_s"] / facts["median_s"]
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
