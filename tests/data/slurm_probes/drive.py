"""Inside an sbatch job: run one probe through hpcenv's runner with the launcher
hpcenv picks for the allocation (srun), and print the gathered result as JSON.

argv: NAME PYTHON RESULT_DIR TIMEOUT_S SCRIPT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcenv.runner import probes as runner
from hpcenv.slurm import srun

name, python, result_dir, timeout, script_dir = sys.argv[1:6]
launcher = srun.launcher_for()
if launcher is None:
    sys.exit("no SLURM allocation seen")
started: list[subprocess.Popen[Any]] = []
start = launcher.start


def record(argv: Sequence[str], env: Mapping[str, str], ranks: int) -> list[subprocess.Popen[Any]]:
    """The launcher's own start, keeping srun's process to read its exit code after."""
    procs = start(argv, env, ranks)
    started.extend(procs)
    return procs


launcher.start = record  # type: ignore[method-assign]
spec = runner.ProbeSpec(
    name=name,
    python=Path(python),
    ranks=launcher.default_ranks() if name in ("nccl", "allreduce", "die") else 1,
    timeout_s=float(timeout),
)
result = runner.run_probe(
    spec, launcher=launcher, result_dir=Path(result_dir), script_dir=Path(script_dir)
)
out = result.serialize()
names = {"HPCENV_RESULT_DIR": result_dir, "HPCENV_PROBE_NAME": name}
out["srun_failed"] = launcher.failed(names)
out["rank_exit_codes"] = launcher.rank_exit_codes(
    names, spec.ranks, [p.returncode for p in started]
)
out["launcher"] = type(launcher).__name__
print(json.dumps(out, default=str))
