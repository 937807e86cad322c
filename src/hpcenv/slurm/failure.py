"""A failed job's logs read for ``hpcenv explain`` and ``hpcenv sbatch --wait``: the files
``hpcenv sbatch`` writes for a job id (``<log_dir>/<name>-<id>.out`` and ``.err``, the
report ``<output_dir>/<id>/report.json``), streamed block by block into the matcher
(``decide/explain.py``), and the explanation kept in the job's report (``explanation``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from hpcenv.decide import explain as matcher
from hpcenv.knowledge import failures
from hpcenv.models.explanation import Explanation
from hpcenv.models.facts import Facts
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput

#: The most of a report.json read for the facts it records.
MAX_REPORT_BYTES = 16 << 20


def job_files(job_id: str, log_dir: Path) -> tuple[list[Path], Path | None]:
    """The logs ``hpcenv sbatch`` wrote for ``job_id`` under ``log_dir`` (``.out`` before
    ``.err``) and the job's report, if any; BadInput naming where it looked otherwise."""
    if not job_id.isdigit():
        raise BadInput(f"{job_id!r} is neither a log file nor a job id")
    logs = sorted(log_dir.glob(f"*-{job_id}.out")) + sorted(log_dir.glob(f"*-{job_id}.err"))
    if not logs:
        raise BadInput(
            f"no log of job {job_id} in {log_dir} (hpcenv sbatch writes <name>-{job_id}.out "
            "there); give --log-dir, the profile's [job] log_dir, or the log files"
        )
    report = log_dir / job_id / "report.json"
    return logs, report if report.is_file() else None


def _lines(paths: Sequence[Path]) -> Iterator[matcher.Line]:
    catalog = failures.load()
    for path in paths:
        blocks = fsio.read_blocks(path, "log")
        yield from matcher.scan(blocks, catalog.keys, file=str(path), after=catalog.after())


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
    facts: Facts | None = None,
    torch: str | None = None,
    nodes: Sequence[str] = (),
    tasks_per_node: int = 0,
    expect_net: str = "any",
) -> Explanation:
    """What the job whose output is in ``paths`` died of, in the node's words."""
    for path in paths:
        if not path.is_file():
            raise BadInput(f"{path}: no such log file")
    found = matcher.explain(
        _lines(paths),
        failures.load(),
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        expect_net=expect_net,
    )
    return matcher.with_node(found, facts, torch)


def explain_job(
    logs: Sequence[Path],
    report: Path | None,
    *,
    facts: Facts | None = None,
    expect_net: str = "any",
) -> Explanation:
    """``explain_files`` of a job's logs, with the torch its report records."""
    torch = recorded_torch(read_report(report))
    return explain_files(logs, facts=facts, torch=torch, expect_net=expect_net)


def record(report: Path, explanation: Explanation, **about: object) -> dict[str, object]:
    """The job's report with ``explanation`` in it, written back (created for a job of
    your own command, which writes none: ``about`` says which job)."""
    data = read_report(report) or dict(about)
    data["explanation"] = explanation.to_json()
    fsio.ensure_dir(report.parent)
    fsio.write_json(report, data)
    return data
