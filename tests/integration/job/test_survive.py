"""``hpcenv sbatch --gate pairs --requeue-bad N --hang-timeout D -- CMD``: the options'
checks (one line, exit 2), the script they render, and the requeue helper's verdicts
where no sbatch is needed (the runs on SLURM: ``test_survive_slurm.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.slurm import requeue, survive


def _hpcenv(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "hpcenv", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--gate", "pairs", "--", "python", "t.py"],
         "--gate pairs runs allreduces between pairs of nodes: give --nodes 2 or more"),
        (["--nodes", "3", "--requeue-bad", "2", "--", "python", "t.py"],
         "--requeue-bad needs --gate pairs"),
        (["--nodes", "3", "--gate", "pairs", "--requeue-bad", "-1", "--", "python", "t.py"],
         "--requeue-bad -1: give 0 to 1000"),
        (["--chain", "99999999999999999999", "--", "python", "t.py"],
         "--chain 99999999999999999999: give 1 to 1000 links"),
        (["--hang-timeout", "00:00:00", "--", "python", "t.py"],
         "--hang-timeout '00:00:00' must be between 5 s and 366 days"),
        (["--hang-timeout", "0.0001", "--", "python", "t.py"],
         "--hang-timeout '0.0001' must be between 5 s and 366 days"),
        (["--hang-timeout", "10x", "--", "python", "t.py"],
         "--hang-timeout '10x' is not a duration: give seconds (90, 90s), minutes (10m)"),
        (["--hang-timeout", "0", "--", "python", "t.py"],
         "--hang-timeout '0' must be between 5 s and 366 days"),
        (["nccl", "--hang-timeout", "5m"],
         "--hang-timeout: only for your own command (after '--'), not a TARGET"),
        (["--gate", "pairz", "--", "python", "t.py"],
         "--gate pairz: unknown probe; known: "),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_exit_2(argv: list[str], says: str, tmp_path: Path) -> None:
    done = _hpcenv("sbatch", "local", *argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"hpcenv: error: {says}"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_the_script_of_a_job_that_survives(tmp_path: Path) -> None:
    done = _hpcenv("sbatch", "local", "--nodes", "3", "--gate", "pairs,torch", "--requeue-bad",
                   "2", "--hang-timeout", "10m", "--chain", "3", "--exclude", "nid[1-2]",
                   "--env", "/v", "--", "python", "train.py", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    s = done.stdout
    assert "requeued without bad nodes up to 2 times; hang watchdog after 600 s of silence" in s
    assert "#SBATCH --ntasks-per-node=2" in s  # the finder's node check takes two ranks
    assert "export HPCENV_EXCLUDE=${HPCENV_EXCLUDE:-'nid[1-2]'}" in s
    assert 'sbatch --parsable ${HPCENV_EXCLUDE:+"--exclude=$HPCENV_EXCLUDE"} --dependency' in s
    assert "gate 'probes torch' " in s  # the probes, then the finder
    assert " -m hpcenv probe nccl --env /v --profile local --pairs --json > " in s
    assert (
        ' -I -m hpcenv.slurm.requeue --report "$pairs_report" --script "$0" --link "$link" '
        '--attempt "$HPCENV_REQUEUE" --max 2 --exclude "$HPCENV_EXCLUDE" --cancel "$next"'
    ) in s
    assert s.index("hpcenv.slurm.requeue") < s.index('echo "hpcenv: the command starts')
    assert ' -I -m hpcenv.slurm.watchdog --pid "$cmd_pid" --timeout 600 ' in s
    assert s.index('export HPCENV_CMD_OF="$SLURM_JOB_ID"') < s.index("set -m")
    assert s.index("unset HPCENV_CMD_OF") < s.index("hpcenv.slurm.watchdog")
    assert "--grace" not in s  # the default grace without --checkpoint-lead
    assert 'if [ "$verdict" -eq 10 ]; then' in s
    path = tmp_path / "s.sh"
    path.write_text(s)
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0


def test_without_the_options_the_script_has_none_of_it(tmp_path: Path) -> None:
    done = _hpcenv("sbatch", "local", "--nodes", "2", "--gate", "nccl", "--chain", "2",
                   "--", "python", "train.py", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for absent in ("HPCENV_EXCLUDE", "hpcenv.slurm.requeue", "hpcenv.slurm.watchdog",
                   "HPCENV_HEARTBEAT", "HPCENV_CMD_OF", "--pairs"):  # fmt: skip
        assert absent not in done.stdout
    two = _hpcenv("sbatch", "local", "--nodes", "2", "--gate", "pairs", "--", "true", cwd=tmp_path)
    assert two.returncode == 0, two.stderr  # two nodes: the pair's check alone, a plain gate
    assert 'gate "bad-node finder: allreduce between pairs of nodes on $nodes nodes" ' in two.stdout


def _report(tmp_path: Path, exclude: list[str]) -> Path:
    nodes = [{"host": "nid1", "exclude": False, "why": "best pair busbw 20 GB/s"},
             {"host": "nid3", "exclude": True, "why": "best pair busbw 0.5 GB/s < 0.5 x median "
              "20 GB/s (pairs: nid1 0.5, nid2 0.4)"}]  # fmt: skip
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"exclude": exclude, "pairs": {"nodes": nodes}}))
    return path


def _requeue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-m", "hpcenv.slurm.requeue", "--script", "/nonexistent",
         "--link", "2", "--outcome", str(tmp_path / "o.json"), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_requeues_used_up_end_the_link_naming_the_nodes(tmp_path: Path) -> None:
    done = _requeue(tmp_path, "--report", str(_report(tmp_path, ["nid3"])), "--attempt", "2",
                    "--max", "2", "--exclude", "nid9")  # fmt: skip
    assert done.returncode == requeue.USED_UP, done.stderr
    assert done.stdout.splitlines() == [
        "hpcenv requeue: bad node nid3: best pair busbw 0.5 GB/s < 0.5 x median 20 GB/s "
        "(pairs: nid1 0.5, nid2 0.4)",
        "hpcenv requeue: --requeue-bad 2 used up (2 requeue(s) in this chain): the link ends; "
        "exclude them yourself: --exclude=nid9,nid3",
    ]
    outcome = json.loads((tmp_path / "o.json").read_text())
    assert outcome["ended_by"] == "bad-nodes" and outcome["bad_nodes"] == ["nid3"]


def test_wait_follows_a_requeued_link_and_not_one_whose_requeues_are_used_up(
    tmp_path: Path,
) -> None:
    """``hpcenv sbatch --wait`` reads the link's outcome file: a requeue names the job to
    follow; requeues used up, a watchdog end or no file name none."""
    outcome = tmp_path / "o.json"
    cases = [
        ({"ended_by": "requeue", "new_job": "4242", "exclude": "n3"}, "4242"),
        ({"ended_by": "bad-nodes", "new_job": None, "exclude": "n3"}, None),
        ({"ended_by": "watchdog", "why": "silent"}, None),
        ({"ended_by": "requeue", "new_job": "42; rm -rf /"}, None),  # only a job id
    ]
    for data, follow in cases:
        outcome.write_text(json.dumps(data))
        assert survive.requeued_as(outcome) == follow, data
    outcome.unlink()
    assert survive.requeued_as(outcome) is None


def test_a_finder_that_names_no_node_is_a_plain_gate_failure(tmp_path: Path) -> None:
    done = _requeue(tmp_path, "--report", str(_report(tmp_path, [])), "--max", "2")
    assert done.returncode == requeue.NO_NODE == 0
    assert "failed without naming a node" in done.stdout
    assert not (tmp_path / "o.json").exists()
    gone = _requeue(tmp_path, "--report", str(tmp_path / "missing.json"), "--max", "2")
    assert gone.returncode == 0 and "no report from the bad-node finder" in gone.stdout


def test_exclusions_merge_and_the_new_job_starts_clean() -> None:
    assert requeue.merged("", ["n3"]) == "n3"
    assert requeue.merged("nid[1-2],n3", ["n3", "n4"]) == "nid[1-2],n3,n4"
    env = requeue.job_env({"SLURM_JOB_ID": "5", "SLURM_CONF": "/c", "PATH": "/b"}, X="1")
    assert env == {"SLURM_CONF": "/c", "PATH": "/b", "X": "1"}
