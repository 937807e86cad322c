"""The bad-node finder from the command line (``--pairs`` of ``probe`` and ``sbatch``): where it
cannot run is one line, exit 2; in a job it runs the finder. The schedule and rule are in
``tests/unit/slurm/test_pairs.py``; the real runs across nodes in ``test_multinode.py``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _hpcenv(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "hpcenv", *argv], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["probe", "nccl", "--pairs", "--env", sys.executable],
         "hpcenv: error: --pairs runs inside a SLURM allocation of 2 or more nodes"),
        (["probe", "torch", "--pairs", "--env", sys.executable],
         "hpcenv: error: --pairs runs the nccl probe between pairs of nodes"),
        (["probe", "nccl", "--pairs", "--ranks", "2", "--env", sys.executable],
         "hpcenv: error: --ranks does not apply to --pairs"),
        (["sbatch", "local", "imports", "--nodes", "3", "--pairs"],
         "hpcenv: error: --pairs runs nccl between pairs of nodes: use it with target nccl"),
        (["sbatch", "local", "nccl", "--pairs"],
         "hpcenv: error: --pairs runs nccl between pairs of nodes: use it with target nccl"),
    ],
)  # fmt: skip
def test_pairs_where_they_cannot_run_is_one_line_exit_2(argv: list[str], says: str) -> None:
    done = _hpcenv(*argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(says) and done.stderr.count("\n") == 1, done.stderr


def test_sbatch_pairs_runs_the_finder_in_the_job() -> None:
    done = _hpcenv("sbatch", "local", "nccl", "--nodes", "4", "--pairs", "--env", "/v")
    assert done.returncode == 0, done.stderr
    assert " -m hpcenv probe nccl --env /v --profile local --pairs --json" in done.stdout
    assert "#SBATCH --nodes=4" in done.stdout

