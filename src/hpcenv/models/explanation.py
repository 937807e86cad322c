"""What a failed job died of, as data (``hpcenv explain``, ``hpcenv sbatch --wait``):
the cause in one line, the evidence (file, line, rank, node), the fix, its source."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Evidence:
    file: str
    line: int  # 1-based
    text: str  # the line as the log has it (prefix included), cut to 300 characters
    rank: int | None = None
    node: str | None = None

    def where(self) -> str:
        who = [f"rank {self.rank}" if self.rank is not None else "", self.node or ""]
        said = ", ".join(w for w in who if w)
        return f"{self.file}:{self.line}" + (f" ({said})" if said else "")

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file, "line": self.line, "rank": self.rank, "node": self.node,
            "text": self.text,
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

    def text(self) -> str:
        """For people: the cause, the evidence, the fix, the notes; one line each."""
        lines = [f"cause: {self.cause}"]
        if self.evidence:
            lines.append(f"evidence: {self.evidence.where()}: {self.evidence.text.strip()}")
        if self.fix:
            lines.append(f"fix: {self.fix}")
        lines += [f"note: {n}" for n in self.notes]
        if self.source:
            lines.append(f"known from: {self.source}")
        return "\n".join(lines) + "\n"
