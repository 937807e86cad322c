"""A failed job's logs read for ``hpcenv explain`` and ``hpcenv sbatch --wait``: the files
``hpcenv sbatch`` writes for a job id (``<log_dir>/<name>-<id>.out`` and ``.err``, the
report ``<output_dir>/<id>/report.json``), streamed block by block into the matcher
(``decide/explain.py``), and the explanation kept in the job's report (``explanation``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hpcenv.decide import explain as matcher
from hpcenv.knowledge import failures
from hpcenv.models.explanation import Explanation
from hpcenv.models.facts import Facts
from hpcenv.slurm import jobrecord
from hpcenv.tools import keyscan
from hpcenv.utils import fsio, redact
from hpcenv.utils.errors import BadInput

#: The most of a report.json read for the facts it records.
MAX_REPORT_BYTES = 16 << 20


#: A job id: ``4242``, or one task of an array, ``4242_7``.
JOB_ID = re.compile(r"\d{1,12}(_\d{1,9})?")


def is_job_id(text: str) -> bool:
    return JOB_ID.fullmatch(text) is not None


def check_job_id(text: str) -> str:
    if not is_job_id(text):
        raise BadInput(f"{text[:40]!r}{'...' if len(text) > 40 else ''} is neither a log file "
                       "nor a job id (digits, or JOBID_TASK for an array task)")  # fmt: skip
    return text


def own_logs(job_id: str, log_dir: Path) -> tuple[list[Path], Path | None, list[str]]:
    """The logs ``hpcenv sbatch`` wrote for ``job_id`` under ``log_dir`` (``.out`` before
    ``.err``) that are yours (``fsio.open_trusted``: a log another user planted there is
    left out, and said in the third item), and the job's report, if any."""
    check_job_id(job_id)
    try:
        found = sorted(log_dir.glob(f"*-{job_id}.out")) + sorted(log_dir.glob(f"*-{job_id}.err"))
    except OSError as exc:
        raise BadInput(f"--log-dir: cannot read {str(log_dir)[:80]} ({exc.strerror})") from exc
    logs, refused = [], []
    for path in found:
        try:
            os.close(fsio.open_trusted(path, "log"))
        except BadInput as exc:
            refused.append(str(exc))
            continue
        logs.append(path)
    report = log_dir / job_id / "report.json"
    return logs, report if logs and report.is_file() else None, refused


def _no_log(job_id: str, log_dir: Path, refused: Sequence[str]) -> str:
    return (
        f"no log of job {job_id} in {log_dir} (hpcenv sbatch writes <name>-{job_id}.out "
        "there), and SLURM does not know the job (scontrol show job, sacct -j); give "
        "--log-dir, the profile's [job] log_dir, or the log files"
        + "".join(f"; {why}" for why in refused)
    )


#: How a log is opened: one the user named; one found by a job id's name in a log
#: directory others may write; one whose path SLURM gave for the user's own job.
GIVEN, FOUND, NAMED = "given", "found", "named"

#: Called with a log's path and size: the callback a reader calls with the bytes read.
Progress = Callable[[Path, int], Callable[[int], None] | None]


def _open_log(path: Path, rule: str) -> int:
    if rule == GIVEN:
        return fsio.open_regular(path, "log")
    return fsio.open_trusted(path, "log", group_may_write=rule == NAMED)


def _lines(
    paths: Sequence[Path],
    cut: dict[str, list[int]],
    *,
    rule: str = GIVEN,
    progress: Progress | None = None,
) -> Iterator[matcher.Line]:
    """The candidate lines of ``paths`` in order: one pass per file (``tools/keyscan``);
    ``cut`` gets each file's lines longer than ``keyscan.MAX_LINE``."""
    catalog = failures.load()
    for path in paths:
        fd = _open_log(path, rule)
        try:
            tick = progress(path, os.fstat(fd).st_size) if progress else None
            found_cut = cut.setdefault(str(path), [])
            for found in keyscan.scan_file(
                fd, catalog.keys, catalog.after(), progress=tick, cut_lines=found_cut
            ):
                yield matcher.line_of(found, str(path))
        finally:
            os.close(fd)


def _cut_note(cut: dict[str, list[int]]) -> tuple[str, ...]:
    said = [f"{file}:{n}" for file, numbers in cut.items() for n in numbers]
    if not said:
        return ()
    more = f" and {len(said) - 5} more" if len(said) > 5 else ""
    return (
        f"{len(said)} line(s) longer than {keyscan.MAX_LINE >> 20} MiB ({', '.join(said[:5])}"
        f"{more}): hpcenv read the first {keyscan.MAX_LINE >> 20} MiB of each, not the rest",
    )


def read_report(path: Path | None) -> dict[str, object]:
    """A job's report.json as a dict ({} when absent or not JSON). It lies in a directory
    others may write: read by the reading rule (``fsio.read_yours``), so a report someone
    else planted, a link or a FIFO there is BadInput naming it."""
    if path is None:
        return {}
    try:
        data = fsio.load_json_yours(path, "job report", limit=MAX_REPORT_BYTES)
    except fsio.NotYours:
        raise
    except BadInput:
        return {}  # not JSON: no facts in it
    return data if isinstance(data, dict) else {}


def recorded_torch(report: object, depth: int = 0) -> str | None:
    """The torch version a job's report records (a probe rank's ``facts.torch``)."""
    if depth > 6:
        return None
    if isinstance(report, dict):
        facts = report.get("facts")
        if isinstance(facts, dict) and isinstance(facts.get("torch"), str):
            return str(facts["torch"])
        values: list[object] = list(report.values())
    elif isinstance(report, list):
        values = list(report)
    else:
        return None
    for value in values:
        if found := recorded_torch(value, depth + 1):
            return found
    return None


def explain_files(
    paths: Sequence[Path],
    *,
    rule: str = GIVEN,
    progress: Progress | None = None,
    facts: Facts | None = None,
    torch: str | None = None,
    nodes: Sequence[str] = (),
    tasks_per_node: int = 0,
    expect_net: str = "any",
) -> Explanation:
    """What the job whose output is in ``paths`` died of, in the node's words (``rule``:
    how the logs are opened, GIVEN, FOUND or NAMED)."""
    cut: dict[str, list[int]] = {}
    found = matcher.explain(
        _lines(paths, cut, rule=rule, progress=progress),
        failures.load(),
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        expect_net=expect_net,
    )
    found = replace(found, notes=(*found.notes, *_cut_note(cut)))
    return matcher.with_node(found, facts, torch)


def explain_job(
    logs: Sequence[Path],
    report: Path | None,
    *,
    facts: Facts | None = None,
    expect_net: str = "any",
    progress: Progress | None = None,
) -> Explanation:
    """``explain_files`` of the logs hpcenv's job wrote in a log directory (each opened by
    the reading rule), with the torch its report records."""
    try:
        torch = recorded_torch(read_report(report))
    except fsio.NotYours:  # a report someone else planted says nothing of this job
        torch = None
    return explain_files(
        logs, rule=FOUND, facts=facts, torch=torch, expect_net=expect_net, progress=progress
    )


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One explained job (or task of an array, or the files given): what SLURM says of
    it (None for files, or hpcenv's own job explained from its log directory)."""

    what: str  # the job id, or the files
    explanation: Explanation
    task: jobrecord.Task | None = None

    def to_json(self) -> dict[str, object]:
        data = self.explanation.to_json()
        if self.task is not None:
            data["job"] = self.task.to_json()
        return data


def _task_logs(task: jobrecord.Task) -> tuple[list[Path], list[str]]:
    """The task's stdout and stderr that can be read by the reading rule (SLURM named
    them, so a group-writable one of yours is read), and why the others are not."""
    logs, refused = [], []
    for name in dict.fromkeys(p for p in (task.stdout, task.stderr) if p and p != "/dev/null"):
        try:
            os.close(fsio.open_trusted(Path(name), "log", group_may_write=True))
        except BadInput as exc:
            refused.append(f"left out: {exc}")
            continue
        logs.append(Path(name))
    return logs, refused


def explain_task(
    task: jobrecord.Task,
    *,
    facts: Facts | None = None,
    expect_net: str = "any",
    progress: Progress | None = None,
) -> Explanation:
    """A job SLURM ran (one task of an array): its logs (the paths SLURM gives), with
    SLURM's own verdict (OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, PREEMPTED) as evidence."""
    logs, refused = _task_logs(task)
    if logs:
        found = explain_files(
            logs, rule=NAMED, facts=facts, expect_net=expect_net, progress=progress
        )
    else:
        found = matcher.explain([], failures.load())
    where = f"{'scontrol show job' if task.said_by == 'scontrol' else 'sacct -j'} {task.job_id}"
    words = {"job_id": task.job_id, "state": task.state, "exit_code": task.exit_code,
             "nodes": task.nodes or "(no node)", "reason": task.reason}  # fmt: skip
    out = matcher.with_slurm(
        found, failures.load(), state=task.state, words=words, said=task.words(), where=where,
        nodes=task.nodes,
    )  # fmt: skip
    return replace(out, notes=(*out.notes, *refused))


def explain_id(
    job_id: str,
    log_dir: Path,
    *,
    facts: Facts | None = None,
    expect_net: str = "any",
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Answer]:
    """``job_id`` explained: hpcenv's own job from the logs it wrote in ``log_dir``, any
    other from what SLURM says of it (each task of an array, ``4242``, or one, ``4242_7``)."""
    logs, report, refused = own_logs(job_id, log_dir)
    if logs:
        found = explain_job(logs, report, facts=facts, expect_net=expect_net, progress=progress)
        notes = (*found.notes, *(f"left out: {why}" for why in refused))
        return [Answer(what=job_id, explanation=replace(found, notes=notes))]
    try:
        tasks = jobrecord.tasks(job_id, env=env)
    except BadInput as exc:
        raise BadInput(_no_log(job_id, log_dir, refused)) from exc
    return [
        Answer(
            what=task.job_id,
            task=task,
            explanation=explain_task(task, facts=facts, expect_net=expect_net, progress=progress),
        )
        for task in tasks
    ]


def record(report: Path, explanation: Explanation, **about: object) -> dict[str, object]:
    """The job's report with ``explanation`` in it, written back (created for a job of
    your own command, which writes none: ``about`` says which job). Only a report the job
    wrote is kept (``read_report``: the reading rule); anything else found at the path (a
    link to a file of yours, a neighbour's report) is not read, and the report is written
    fresh, by a rename (never through a link), readable by you alone (0600: the
    explanation quotes the job's log)."""
    try:
        data = read_report(report) or dict(about)
    except fsio.NotYours:
        data = dict(about)
    data["explanation"] = explanation.to_json()
    fsio.ensure_dir(report.parent, sticky=True)
    text = json.dumps(redact.deep(data), indent=2, default=str) + "\n"
    fsio.write_bytes(report, text.encode(), mode=0o600)
    return data
