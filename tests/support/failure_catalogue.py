"""The failure catalogue's test set (issue 43) and its score: ``hpcenv explain`` of every
real failure log listed in ``tests/data/failures/index.toml``, against the cause its
thread established.

A log is *right* when hpcenv names its expected cause (or says it does not know, where
``expected`` is "unknown"); *wrong* when hpcenv claims a known cause the thread did not
find (the worst answer: a fix for the wrong problem); *unknown* when hpcenv says it does
not know a cause the catalogue should name.

Splits: "dev" logs the catalogue was written from, "holdout" logs kept out while it was
written (but read by its author), and "blind" logs collected after it was written by
someone who never changed it, each labelled from its thread before hpcenv was run on it.
A blind log hpcenv gives a wrong known cause is marked ``known_wrong = true`` with a
one-line ``why``: a defect documented, to fix later. Used by
``tests/integration/job/test_failure_catalogue.py`` and ``tests/tools/failure_score.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from support import DATA

FAILURES = DATA / "failures"
INDEX = FAILURES / "index.toml"
UNKNOWN = "unknown"


@dataclass(frozen=True, kw_only=True)
class Log:
    id: str
    path: Path
    source: str
    expected: str
    split: str  # "dev" | "holdout" | "blind"
    found: str  # the cause the thread established
    known_wrong: bool = False  # hpcenv names a wrong known cause for it (a defect to fix)
    why: str = ""  # why it does, in one line (with known_wrong)


@dataclass(frozen=True, kw_only=True)
class Answer:
    log: Log
    got: str  # the cause id hpcenv named, or "unknown"
    cause: str  # the cause in words
    evidence: str  # the line it showed

    @property
    def right(self) -> bool:
        return self.got == self.log.expected

    @property
    def wrong(self) -> bool:
        """A known cause claimed that the thread did not establish."""
        return not self.right and self.got != UNKNOWN

    @property
    def unknown(self) -> bool:
        """hpcenv said it does not know a cause the catalogue should name (a miss)."""
        return not self.right and self.got == UNKNOWN


def logs(folder: Path = FAILURES) -> list[Log]:
    """Every log of ``folder``'s index.toml, in its order."""
    rows = tomllib.loads((folder / "index.toml").read_text(encoding="utf-8"))["log"]
    return [_log(folder, row) for row in rows]


def _log(folder: Path, row: dict[str, str]) -> Log:
    return Log(
        id=row["id"], path=folder / row["file"], source=row["source"],
        expected=row["expected"], split=row["split"], found=row["found"],
        known_wrong=bool(row.get("known_wrong", False)), why=row.get("why", ""),
    )  # fmt: skip


def explain(log: Log) -> Answer:
    """``hpcenv explain LOG --json`` of one log, run in this process (the CLI's own
    ``main``: its parsing, reading and JSON, without 119 interpreter starts)."""
    from hpcenv import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["explain", str(log.path), "--json"])
    answer = json.loads(out.getvalue())
    assert code in (0, 1), (log.id, code, out.getvalue())
    got = answer["cause_id"] if answer["known"] else UNKNOWN
    evidence = (answer.get("evidence") or {}).get("text", "")
    return Answer(log=log, got=got or UNKNOWN, cause=answer["cause"], evidence=evidence)


def score(answers: Iterable[Answer], split: str = "") -> tuple[int, int, int]:
    """(right, wrong, total) of the answers of ``split`` (every split when empty)."""
    chosen = [a for a in answers if not split or a.log.split == split]
    return sum(a.right for a in chosen), sum(a.wrong for a in chosen), len(chosen)
