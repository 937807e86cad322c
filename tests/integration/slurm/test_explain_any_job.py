"""``hpcenv explain JOBID`` of jobs hpcenv did not submit (issue 43): plain ``sbatch``
jobs on the namespace SLURM cluster (the session's three-node cluster the other explain
tests use), explained from what SLURM says of them (``scontrol show job``: state, exit
code, nodes, the StdOut/StdErr paths) and the logs it names; an array by its id (every
task, grouped by cause) and by one task's id (``4242_7``); several ids in one call."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: Task 1 fails in a way hpcenv does not know (a KeyError), the others in one it does.
SCRIPT = """\
#!/bin/bash
#SBATCH --job-name=plain
#SBATCH --output={dir}/plain-%A_%a.out
#SBATCH --error={dir}/plain-%A_%a.err
#SBATCH --time=2
echo "task ${{SLURM_ARRAY_TASK_ID:-none}} on $(hostname)"
if [ "${{SLURM_ARRAY_TASK_ID:-1}}" = 1 ]; then
  exec /usr/bin/python3 -c 'batch = {{}}
print(batch["input_ids"])'
fi
exec /usr/bin/python3 -c 'import hpcenv_no_such_module'
"""


def _sbatch(cluster: SlurmCluster, tmp_path: Path, *args: str) -> str:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(dir=tmp_path))
    done = subprocess.run(
        ["sbatch", "--parsable", *args, str(script)], env=cluster.env,
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    job_id = done.stdout.strip().split(";")[0]
    assert job_id.isdigit(), done.stdout + done.stderr
    return job_id


def _wait(cluster: SlurmCluster, *ids: str) -> None:
    """Until no task of ``ids`` is pending or running (SLURM keeps them MinJobAge)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["scontrol", "-o", "show", "job", *ids[:1]], env=cluster.env, capture_output=True,
            text=True, timeout=30, check=False,
        ).stdout  # fmt: skip
        for job_id in ids[1:]:
            shown += subprocess.run(
                ["scontrol", "-o", "show", "job", job_id], env=cluster.env, capture_output=True,
                text=True, timeout=30, check=False,
            ).stdout  # fmt: skip
        if shown and not re.search(r"JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING)", shown):
            return
        time.sleep(0.3)
    raise AssertionError(f"jobs {ids} did not end in 120 s")


def _explain(cluster: SlurmCluster, tmp_path: Path, *ids: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "explain", *ids, "--json"], env=cluster.env,
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_plain_sbatch_job_and_an_array_are_explained_from_slurm(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    single = _sbatch(cluster, tmp_path)
    array = _sbatch(cluster, tmp_path, "--array=0-2")
    _wait(cluster, single, array)
    code, one = _explain(cluster, tmp_path, single)
    assert code == 1, one  # a KeyError: not a failure hpcenv knows
    job = one["job"]
    assert isinstance(job, dict)
    assert (job["job_id"], job["state"], job["exit_code"]) == (single, "FAILED", "1:0")
    assert job["nodes"] in {"node1", "node2", "node3"}
    evidence = one["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["text"] == "KeyError: 'input_ids'", evidence
    assert Path(str(evidence["file"])).parent == tmp_path  # the StdErr SLURM names
    assert any("JobState=FAILED ExitCode=1:0" in note for note in one["notes"])  # type: ignore[union-attr]

    code, whole = _explain(cluster, tmp_path, array)
    assert code == 1
    jobs = whole["jobs"]
    assert isinstance(jobs, list) and [j["job"]["job_id"] for j in jobs] == [
        f"{array}_{t}" for t in range(3)
    ]
    groups = {g["cause_id"]: g["jobs"] for g in whole["groups"]}  # type: ignore[union-attr]
    assert groups == {"import_error": [f"{array}_0", f"{array}_2"], None: [f"{array}_1"]}

    code, task = _explain(cluster, tmp_path, f"{array}_2")
    assert code == 0 and task["cause_id"] == "import_error", task
    assert task["evidence"]["file"] == str(tmp_path / f"plain-{array}_2.err")  # type: ignore[index]

    code, both = _explain(cluster, tmp_path, f"{array}_0", f"{array}_2")
    assert code == 0 and [g["jobs"] for g in both["groups"]] == [[f"{array}_0", f"{array}_2"]]  # type: ignore[union-attr]
