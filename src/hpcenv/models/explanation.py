"""What a failed job died of, as data (``hpcenv explain``, ``hpcenv sbatch --wait``):
the cause in one line, the evidence (file, line, rank, node), the fix, its source."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

#: The most of the evidence line shown to people (``--json`` has it whole).
SHOWN = 2000


@dataclass(frozen=True, kw_only=True)
class Evidence:
    file: str
    line: int  # 1-based
    text: str  # the line as the log has it (prefix included), whole
    rank: int | None = None
    node: str | None = None
    cut: bool = False  # the line was longer than hpcenv reads of one (``text`` is its head)
    local_rank: int | None = None  # where the log names only the rank on its node
    context: str = ""  # a Python exception's innermost frame (``File "x.py", line 3, in f``)

    def where(self) -> str:
        rank = (
            f"rank {self.rank}" if self.rank is not None
            else f"local rank {self.local_rank}" if self.local_rank is not None
            else ""
        )  # fmt: skip
        who = [rank, self.node or ""]
        said = ", ".join(w for w in who if w)
        place = f"{self.file}:{self.line}" if self.line else self.file  # 0: not a file's line
        return place + (f" ({said})" if said else "")

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file, "line": self.line, "rank": self.rank, "node": self.node,
            "text": self.text, "cut": self.cut, "local_rank": self.local_rank,
            "context": self.context,
        }  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """``known``: a cause of the catalog; otherwise ``evidence`` is the first failing line
    (or None when no line failed) and ``cause`` says it is not known."""

    known: bool
    cause_id: str | None
    cause: str
    fix: str
    source: str = ""
    evidence: Evidence | None = None
    details: tuple[tuple[str, str], ...] = ()  # collective, missing ranks, signal...
    notes: tuple[str, ...] = ()  # other findings (NCCL on sockets, the node's facts)

    def to_json(self) -> dict[str, object]:
        return {
            "known": self.known,
            "cause_id": self.cause_id,
            "cause": self.cause,
            "fix": self.fix,
            "source": self.source,
            "evidence": self.evidence.to_json() if self.evidence else None,
            "details": dict(self.details),
            "notes": list(self.notes),
        }

    def text(self, width: int | None = None) -> str:
        """For people: the cause, the evidence, the fix, the notes; one line each, or
        wrapped to ``width`` (a terminal's) with the evidence indented under its place."""
        lines = [f"cause: {self.cause}"]
        if self.evidence:
            lines += _evidence_lines(self.evidence, width)
        if self.fix:
            lines.append(f"fix: {self.fix}")
        lines += [f"note: {n}" for n in self.notes]
        if self.source:
            lines.append(f"known from: {self.source}")
        if width:
            lines = [w for line in lines for w in _wrapped(line, width)]
        return "\n".join(lines) + "\n"


def _evidence_lines(evidence: Evidence, width: int | None) -> list[str]:
    said = evidence.text.strip()
    more = len(said) - SHOWN
    if more > 0 or evidence.cut:
        said = said[:SHOWN] + (
            f" [... {max(more, 0)} more characters"
            + ("; the line was longer than hpcenv reads of one, and cut" if evidence.cut else "")
            + "; --json has all hpcenv read]"
        )
    head = f"evidence: {evidence.where()}:"
    context = [f"context: {evidence.context}"] if evidence.context else []
    if not width:
        return [f"{head} {said}", *context]
    return [head, "    " + said, *context]


def _wrapped(line: str, width: int) -> list[str]:
    """``line`` wrapped to ``width`` (a terminal's), the lines after the first indented."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width=max(width, 20), subsequent_indent="    ",
                         break_long_words=True, break_on_hyphens=False)  # fmt: skip
