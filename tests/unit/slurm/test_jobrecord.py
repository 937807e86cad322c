"""What SLURM says of a job (``slurm/jobrecord``) and its verdict as evidence
(``decide/explain.with_slurm``, through ``slurm/failure.explain_task``).

RECORD is ``scontrol -o show job 1`` as the tests' namespace cluster (Slurm 22.05.8)
printed it for a plain sbatch job that exited 3; the verdict cases change its JobState to
the states this cluster cannot make happen (it has no memory cgroup, and a TIMEOUT takes
a minute). The sacct line is in sacct's ``-P`` format (``|`` between the fields asked
for): the cluster keeps no accounting database, so sacct cannot be asked there."""

from __future__ import annotations

from pathlib import Path

from hpcenv.slurm import failure, jobrecord

RECORD = (
    "JobId=1 JobName=j.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 "
    "RunTime=00:00:01 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-02T06:13:24 "
    "EligibleTime=2026-12-02T06:13:24 AccrueTime=2026-12-02T06:13:24 "
    "StartTime=2026-12-02T06:13:26 EndTime=2026-12-02T06:13:27 Deadline=N/A "
    "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-02T06:13:26 Scheduler=Main "
    "Partition=debug AllocNode:Sid=localhost:3517 ReqNodeList=(null) ExcNodeList=(null) "
    "NodeList=node1 BatchHost=node1 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 "
    "ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* "
    "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
    "DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command={dir}/j.sh WorkDir={dir} StdErr={dir}/slurm-1.out StdIn=/dev/null "
    "StdOut={dir}/slurm-1.out Power= "
)


def _task(tmp_path: Path, state: str = "FAILED", log: str = "step 1\n") -> jobrecord.Task:
    (tmp_path / "slurm-1.out").write_text(log)
    record = RECORD.format(dir=tmp_path).replace("JobState=FAILED", f"JobState={state}")
    (task,) = jobrecord.parse_scontrol(record)
    return task


def test_a_scontrol_record_gives_state_exit_code_nodes_and_log_paths(tmp_path: Path) -> None:
    task = _task(tmp_path)
    assert (task.job_id, task.state, task.exit_code, task.nodes) == ("1", "FAILED", "3:0", "node1")
    assert task.stdout == task.stderr == str(tmp_path / "slurm-1.out")
    assert task.words() == "JobState=FAILED ExitCode=3:0 NodeList=node1 Reason=NonZeroExitCode"


def test_slurms_verdict_is_the_cause_where_the_log_says_nothing_better(tmp_path: Path) -> None:
    found = failure.explain_task(_task(tmp_path, "OUT_OF_MEMORY"))
    assert found.known and found.cause_id == "host_oom"
    assert "ran out of memory (OUT_OF_MEMORY on node1)" in found.cause
    assert found.evidence is not None and found.evidence.where() == "scontrol show job 1 (node1)"
    node_fail = failure.explain_task(_task(tmp_path, "NODE_FAIL"))
    assert node_fail.cause_id == "node_fail" and "--exclude" in node_fail.fix


def test_a_known_cause_in_the_log_wins_over_a_later_verdict_which_is_a_note(
    tmp_path: Path,
) -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    found = failure.explain_task(_task(tmp_path, "TIMEOUT", log=oom))
    assert found.cause_id == "cuda_oom"
    assert any("JobState=TIMEOUT" in note for note in found.notes)
    plain = failure.explain_task(_task(tmp_path, "FAILED", log="0: KeyError: 'x'\n"))
    assert not plain.known and plain.evidence is not None and plain.evidence.rank == 0


def test_a_log_path_that_is_not_yours_is_left_out_and_the_verdict_still_said(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path, "OUT_OF_MEMORY")
    (tmp_path / "slurm-1.out").unlink()
    (tmp_path / "slurm-1.out").symlink_to("/etc/hostname")
    found = failure.explain_task(task)
    assert found.cause_id == "host_oom"
    assert any("is a symlink" in note for note in found.notes)


def test_sacct_lines_and_their_path_patterns(tmp_path: Path) -> None:
    names = jobrecord.SACCT + jobrecord.SACCT_PATHS
    line = (
        "4242_7|4250|train|alice|CANCELLED by 1000|0:15|0:0|gpu[01-02]|None|"
        "logs/%x-%A_%a.out|/dev/null|/home/alice/run\n"
    )
    (task,) = jobrecord.parse_sacct(line, names)
    assert (task.job_id, task.state, task.nodes) == ("4242_7", "CANCELLED", "gpu[01-02]")
    assert task.stdout == "/home/alice/run/logs/train-4242_7.out"
    assert task.stderr == "/dev/null" and task.said_by == "sacct"
    assert jobrecord.expand("o-%j-%N-%5a-%%.txt", {"JobID": "9_3", "JobIDRaw": "12",
                            "NodeList": "n1,n2"}) == "o-12-n1-00003-%.txt"  # fmt: skip
