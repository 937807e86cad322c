"""What SLURM says of a job it ran, for ``hpcenv explain JOBID`` of any job (one
submitted with plain ``sbatch`` too): each task's state, exit codes, nodes, reason and
the paths of its stdout and stderr. From ``scontrol show job`` while the controller
remembers the job (``MinJobAge``), else from ``sacct`` (the accounting database: its
StdOut/StdErr fields since Slurm 23.02, their %-patterns expanded here; before, the
logs of an old job are not known and its verdict alone is said). A job id is ``4242``
(every task of an array) or ``4242_7`` (one task).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hpcenv.tools import command
from hpcenv.utils.errors import BadInput, CommandFailed


@dataclass(frozen=True, kw_only=True)
class Task:
    job_id: str  # "4242", or "4242_7" for a task of an array
    state: str  # FAILED, OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, PREEMPTED, COMPLETED, PENDING...
    exit_code: str = ""  # "1:0": the batch script's exit code and the signal that ended it
    derived: str = ""  # DerivedExitCode: the highest of its steps'
    nodes: str = ""
    reason: str = ""
    stdout: str = ""
    stderr: str = ""
    said_by: str = "scontrol"  # or "sacct"

    def to_json(self) -> dict[str, object]:
        return {
            "job_id": self.job_id, "state": self.state, "exit_code": self.exit_code,
            "derived_exit_code": self.derived, "nodes": self.nodes, "reason": self.reason,
            "stdout": self.stdout, "stderr": self.stderr, "said_by": self.said_by,
        }  # fmt: skip

    def words(self) -> str:
        """What SLURM says, as its own fields (the evidence of its verdict)."""
        said = [
            f"JobState={self.state}",
            f"ExitCode={self.exit_code}" if self.exit_code else "",
            f"DerivedExitCode={self.derived}" if self.derived else "",
            f"NodeList={self.nodes}" if self.nodes else "",
            f"Reason={self.reason}" if self.reason and self.reason != "None" else "",
        ]
        return " ".join(w for w in said if w)


#: One ``key=value`` of ``scontrol -o show job`` (a value runs to the next key).
_PAIR = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=(.*?)(?=\s+[A-Za-z][\w/:]*=|$)")


def parse_scontrol(text: str) -> list[Task]:
    """The tasks of ``scontrol -o show job ID`` (one record a line); an array's tasks
    that have not started (``ArrayTaskId=3-5``) are one PENDING record of their own."""
    tasks = []
    for line in text.splitlines():
        fields = dict(_PAIR.findall(line))
        if "JobId" not in fields:
            continue
        array, task = fields.get("ArrayJobId", ""), fields.get("ArrayTaskId", "")
        job_id = f"{array}_{task}" if array and task else fields["JobId"]
        tasks.append(
            Task(
                job_id=job_id,
                state=fields.get("JobState", "UNKNOWN"),
                exit_code=fields.get("ExitCode", ""),
                derived=fields.get("DerivedExitCode", ""),
                nodes=_none(fields.get("NodeList", "")),
                reason=fields.get("Reason", ""),
                stdout=fields.get("StdOut", ""),
                stderr=fields.get("StdErr", ""),
            )
        )
    return tasks


def _none(value: str) -> str:
    return "" if value in ("(null)", "None", "None assigned") else value


#: The fields asked of sacct; its StdOut/StdErr/WorkDir came in Slurm 23.02.
SACCT = ("JobID", "JobIDRaw", "JobName", "User", "State", "ExitCode", "DerivedExitCode",
         "NodeList", "Reason")  # fmt: skip
SACCT_PATHS = ("StdOut", "StdErr", "WorkDir")


def expand(pattern: str, fields: Mapping[str, str]) -> str:
    """A stdout/stderr file pattern of sbatch (``slurm-%A_%a.out``) for one task: %j the
    job's own id, %A the array's, %a the task's, %x its name, %u the user, %N the first
    node, %% a percent sign; a relative path is under the job's WorkDir."""
    job = fields.get("JobID", "")
    array, _, task = job.partition("_")
    first_node = re.split(r"[,\[]", fields.get("NodeList", ""))[0]
    values = {
        "j": fields.get("JobIDRaw", job), "A": array, "a": task, "x": fields.get("JobName", ""),
        "u": fields.get("User", ""), "N": first_node, "%": "%",
    }  # fmt: skip
    path = re.sub(
        r"%(\d*)([jAaxuN%])", lambda m: values[m.group(2)].zfill(int(m.group(1) or 0)), pattern
    )
    work = fields.get("WorkDir", "")
    return f"{work.rstrip('/')}/{path}" if path and not path.startswith("/") and work else path


def parse_sacct(text: str, names: tuple[str, ...]) -> list[Task]:
    """The tasks of ``sacct -n -P -X -o NAMES`` (one a line, ``|`` between fields)."""
    tasks = []
    for line in text.splitlines():
        values = line.split("|")
        if len(values) != len(names):
            continue
        fields = dict(zip(names, values, strict=True))
        tasks.append(
            Task(
                job_id=fields["JobID"],
                state=(fields["State"].split() or ["UNKNOWN"])[0],
                exit_code=fields["ExitCode"],
                derived=fields["DerivedExitCode"],
                nodes=_none(fields["NodeList"]),
                reason=fields["Reason"],
                stdout=expand(fields.get("StdOut", ""), fields),
                stderr=expand(fields.get("StdErr", ""), fields),
                said_by="sacct",
            )
        )
    return tasks


def _sacct(job_id: str, env: Mapping[str, str] | None) -> list[Task]:
    for names in (SACCT + SACCT_PATHS, SACCT):  # a Slurm before 23.02 refuses StdOut
        argv = ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(names)]
        try:
            done = command.run(argv, env=env, timeout=60, check=False)
        except CommandFailed:  # no sacct here
            return []
        if done.returncode == 0:
            return parse_sacct(done.stdout, names)
    return []


def _order(task: Task) -> tuple[int, int, str]:
    """An array's tasks by task number (scontrol lists the last first)."""
    job, _, number = task.job_id.partition("_")
    return (int(job) if job.isdigit() else 0, int(number) if number.isdigit() else -1, number)


def tasks(job_id: str, *, env: Mapping[str, str] | None = None) -> list[Task]:
    """What SLURM says of ``job_id`` (each task of an array); BadInput when neither
    scontrol nor sacct knows it."""
    try:
        done = command.run(["scontrol", "-o", "show", "job", job_id], env=env, timeout=60,
                           check=False)  # fmt: skip
        found = parse_scontrol(done.stdout) if done.returncode == 0 else []
    except CommandFailed:  # no scontrol: not a SLURM host
        found = []
    if not found:
        found = _sacct(job_id, env)
    found.sort(key=_order)
    if not found:
        raise BadInput(
            f"job {job_id}: no log of it in the log directory, and SLURM does not know it "
            "(scontrol show job, sacct -j); give its log files"
        )
    return found
