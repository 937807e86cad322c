"""A failed job's logs read for ``hpcenv explain`` and ``hpcenv sbatch --wait``: the files
``hpcenv sbatch`` writes for a job id (``<log_dir>/<name>-<id>.out`` and ``.err``, the
report ``<output_dir>/<id>/report.json``), streamed block by block into the matcher
(``decide/explain.py``), and the explanation kept in the job's report (``explanation``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from hpcenv.decide import explain as matcher
from hpcenv.knowledge import failures
from hpcenv.models.explanation import Explanation
from hpcenv.models.facts import Facts
from hpcenv.tools import keyscan
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput

#: The most of a report.json read for the facts it records.
MAX_REPORT_BYTES = 16 << 20


#: A job id: ``4242``, or one task of an array, ``4242_7``.
JOB_ID = re.compile(r"\d{1,12}(_\d{1,9})?")


def is_job_id(text: str) -> bool:
    return JOB_ID.fullmatch(text) is not None


def job_files(job_id: str, log_dir: Path) -> tuple[list[Path], Path | None, list[str]]:
    """The logs ``hpcenv sbatch`` wrote for ``job_id`` under ``log_dir`` (``.out`` before
    ``.err``) that are yours (``fsio.open_trusted``: a log another user planted there is
    left out, and said in the third item), and the job's report, if any; BadInput naming
    where it looked when none is left."""
    if not is_job_id(job_id):
        raise BadInput(f"{job_id[:40]!r}{'...' if len(job_id) > 40 else ''} is neither a log "
                       "file nor a job id (digits, or JOBID_TASK for an array task)")  # fmt: skip
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
    if not logs:
        raise BadInput(
            f"no log of job {job_id} in {log_dir} (hpcenv sbatch writes <name>-{job_id}.out "
            "there); give --log-dir, the profile's [job] log_dir, or the log files"
            + "".join(f"; {why}" for why in refused)
        )
    report = log_dir / job_id / "report.json"
    return logs, report if report.is_file() else None, refused


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
    """A job's report.json as a dict ({} when absent or not JSON)."""
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(fsio.read_tail(path, MAX_REPORT_BYTES))
    except (ValueError, RecursionError):
        return {}
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
    torch = recorded_torch(read_report(report))
    return explain_files(
        logs, rule=FOUND, facts=facts, torch=torch, expect_net=expect_net, progress=progress
    )


def record(report: Path, explanation: Explanation, **about: object) -> dict[str, object]:
    """The job's report with ``explanation`` in it, written back (created for a job of
    your own command, which writes none: ``about`` says which job)."""
    data = read_report(report) or dict(about)
    data["explanation"] = explanation.to_json()
    fsio.ensure_dir(report.parent)
    fsio.write_json(report, data)
    return data
