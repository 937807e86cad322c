"""What a failed job died of: the first real failure among its ranks' interleaved output.

Pure: ``scan`` takes the bytes of a log (an iterable of blocks, read by the caller) and
yields only the lines that contain one of the catalog's literal keys (``bytes.find`` in
C, so a 1 GB log costs seconds and one block of memory); ``explain`` reads those lines,
takes each one's rank and node from its prefix (srun ``--label``, torchrun's
``[default3]:``, c10d's ``[rank3]:``, NCCL's ``host:pid:tid``), skips the cascade that
follows a failure (ProcessGroup aborts, SIGTERM to the other ranks, their watchdog
timeouts after the first error), and picks the cause of the lowest tier, the earliest
within a tier (``knowledge/failures.toml``). A failure the catalog does not know is said
so, with the first failing line, never guessed. ``with_node`` joins what hpcenv knows of
the node (its facts) into the fix: the torch variant the driver runs, from
``decide/torch_choice``, the one owner of that choice.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hpcenv.knowledge import failures
from hpcenv.knowledge.failures import Catalog, Cause, search
from hpcenv.models.explanation import Evidence, Explanation
from hpcenv.models.facts import Facts
from hpcenv.tools import keyscan

#: Causes whose fix names the torch variant the node's driver runs.
TORCH_CAUSES = ("driver_too_old", "cuda_runtime_missing", "no_kernel_image", "torch_cpu_build")


@dataclass(frozen=True)
class Line:
    file: str
    number: int  # 1-based
    text: str
    after: tuple[str, ...] = ()  # the lines that follow (a multi-line summary)
    cut: bool = False  # longer than ``keyscan.MAX_LINE``: ``text`` is its head


def line_of(found: keyscan.Found, file: str) -> Line:
    return Line(file, found.number, found.text, found.after, found.cut)


def scan(
    blocks: Iterable[bytes],
    keys: Sequence[bytes],
    *,
    file: str,
    after: Mapping[bytes, int] | None = None,
) -> Iterator[Line]:
    """The lines of a log (given as blocks of bytes) that contain one of ``keys``, with
    their numbers (``tools/keyscan.scan_blocks``: one search for all keys, every line cut
    to ``keyscan.MAX_LINE``); a line with a key of ``after`` (a summary's first line) also
    carries that many of the lines that follow it."""
    for found in keyscan.scan_blocks(blocks, keys, after):
        yield line_of(found, file)


def lines_of(text: str, catalog: Catalog, *, file: str = "<log>") -> list[Line]:
    """``scan`` of a text in memory (tests, short logs)."""
    return list(scan([text.encode()], catalog.keys, file=file, after=catalog.after()))


# --- the matcher ----------------------------------------------------------------------


@dataclass
class _Hit:
    cause: Cause | None
    line: Line
    order: int
    rank: int | None
    node: str | None
    groups: dict[str, str]
    local_rank: int | None = None
    context: str = ""  # an exception's innermost frame


@dataclass
class _State:
    order: int = 0
    ranks: set[int] = field(default_factory=set)
    rank_node: dict[int, str] = field(default_factory=dict)
    world: int | None = None
    first: dict[str, _Hit] = field(default_factory=dict)  # cause id -> first hit
    grouped: dict[str, set[int]] = field(default_factory=dict)  # cause id -> ranks
    unknown: _Hit | None = None


@dataclass(frozen=True)
class _Who:
    rank: int | None = None
    local_rank: int | None = None
    node: str | None = None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _prefix(catalog: Catalog, text: str) -> tuple[_Who, str]:
    """The rank, local rank and node a line's prefixes give (else its words, the
    catalog's ``in_line``), and the line without the prefixes."""
    rank: int | None = None
    local: int | None = None
    node: str | None = None
    rest = text
    for pattern in catalog.prefixes:
        m = pattern.match(rest)
        if not m:
            continue
        groups = m.groupdict()
        rank = _int(groups.get("rank")) if rank is None else rank
        local = _int(groups.get("local_rank")) if local is None else local
        node = groups.get("node") or node
        rest = rest[m.end() :].lstrip()
    for pattern in catalog.in_line if rank is None else ():
        if m := search(pattern, rest):
            groups = m.groupdict()
            rank, local = _int(groups.get("rank")), _int(groups.get("local_rank")) or local
            break
    return _Who(rank, local, node), rest


def _fields(cause: Cause, line: Line) -> dict[str, str]:
    found: dict[str, str] = {}
    for text in line.after[: cause.after]:
        for pattern in cause.fields:
            if m := search(pattern, text):
                found.update({k: v for k, v in m.groupdict().items() if v is not None})
    return found


def _rank_in(catalog: Catalog, texts: Sequence[str]) -> dict[str, str]:
    """The rank (or local rank) the first of ``texts`` that names one gives in its words
    (a summary's table whose fields did not say it: torchrun's, flattened)."""
    for text in texts:
        for pattern in catalog.in_line:
            if m := search(pattern, text):
                return {k: v for k, v in m.groupdict().items() if v is not None}
    return {}


#: A Python exception line (its type, then ``: message`` or nothing); a frame's line.
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::(?: .*)?|(?<=Error)|(?<=Exception)"
                        r"|(?<=Interrupt)|(?<=Exit))$")  # fmt: skip
_FRAME = re.compile(r'File ".*", line \d+')


def _exception(catalog: Catalog, line: Line, who: _Who) -> tuple[Line, str] | None:
    """A traceback's exception line (the rank's own, where the header had a rank) and
    its innermost frame, from the lines after the header ``line``."""
    frame = ""
    for i, text in enumerate(line.after):
        other, body = _prefix(catalog, text)
        if (other.rank, other.local_rank, other.node) != (who.rank, who.local_rank, who.node):
            continue  # another rank's line, interleaved
        body = body.strip()
        if _FRAME.match(body):
            frame = body
        elif body.startswith(("Traceback ", "During handling", "The above exception")):
            frame = ""
        elif _EXCEPTION.match(body):
            return Line(line.file, line.number + i + 1, text, cut=False), frame
    return None


def _see(state: _State, catalog: Catalog, line: Line, gate: re.Pattern[str] | None) -> None:
    state.order += 1
    who, rest = _prefix(catalog, line.text)
    rank, node = who.rank, who.node
    if rank is not None:
        state.ranks.add(rank)
        if node:
            state.rank_node.setdefault(rank, node)
    if gate is not None and not gate.search(rest):
        return  # none of the patterns' words: no pattern can match (NCCL INFO lines)
    for pattern in catalog.world:
        if m := search(pattern, rest):
            state.world = max(state.world or 0, int(m.group("world")))
    if any(search(p, rest) for p in catalog.cascade):
        carried = catalog.carries.search(rest) if catalog.carries else None
        if carried is None:
            return
        rest = carried.group("inner")  # the error the cascade line reports
    for cause in catalog.causes:
        if m := cause.match(rest):
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            groups.update(_fields(cause, line) if cause.after else {})
            if cause.after and rank is None and not {"rank", "local_rank"} & groups.keys():
                groups.update(_rank_in(catalog, line.after[: cause.after]))
            _record(state, _Hit(cause, line, state.order, rank, node, groups, who.local_rank))
            return
    if state.unknown is not None:
        return
    key = catalog.traceback_key.decode()
    if key and key in rest and (found := _exception(catalog, line, who)):
        state.unknown = _Hit(None, found[0], state.order, rank, node, {}, who.local_rank,
                             context=found[1])  # fmt: skip
    elif any(search(p, rest) for p in catalog.unknown):
        state.unknown = _Hit(None, line, state.order, rank, node, {}, who.local_rank)


def _record(state: _State, hit: _Hit) -> None:
    assert hit.cause is not None
    cid = hit.cause.id
    if "rank" in hit.groups:
        hit.rank = int(hit.groups["rank"])
    if hit.local_rank is None and "local_rank" in hit.groups:
        hit.local_rank = _int(hit.groups["local_rank"])
    hit.node = hit.groups.get("node") or hit.node
    first = state.first.get(cid)
    if first is None or (first.rank is None and hit.rank is not None and not hit.cause.group_by):
        state.first[cid] = hit  # a later line of the same cause that names the rank wins
        first = hit
    key = hit.cause.group_by
    if key and hit.groups.get(key) == first.groups.get(key) and hit.rank is not None:
        state.grouped.setdefault(cid, set()).add(hit.rank)


def _node_of(state: _State, hit: _Hit, nodes: Sequence[str], per_node: int) -> str | None:
    if hit.node:
        return hit.node
    if hit.rank is None:
        return None
    if hit.rank in state.rank_node:
        return state.rank_node[hit.rank]
    if nodes and per_node > 0 and hit.rank // per_node < len(nodes):
        return nodes[hit.rank // per_node]
    return None


#: What srun says of a task a signal ended, as the signal.
_SRUN_SIGNALS = {"Killed": "SIGKILL", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT",
                 "Bus error": "SIGBUS"}  # fmt: skip


def _death(groups: dict[str, str]) -> str:
    """How a rank died, in words: its exit code and the signal, where the log says."""
    code = groups.get("exitcode", "")
    name = groups.get("signame") or _SRUN_SIGNALS.get(groups.get("how", ""))
    if not name and code.startswith("-") and code[1:].isdigit():
        try:
            name = signal.Signals(int(code[1:])).name
        except ValueError:
            name = None
    said = [f"exit code {code}" if code else "", f"signal {name}" if name else ""]
    return ", ".join(w for w in said if w) or "how is not in the log"


def _missing(state: _State, cid: str) -> str:
    waiting = state.grouped.get(cid, set())
    everyone = set(range(state.world)) if state.world else state.ranks
    missing = sorted(everyone - waiting)
    return ", ".join(map(str, missing)) if missing else "(not named in the log)"


class _Words(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def _evidence(hit: _Hit, node: str | None) -> Evidence:
    return Evidence(
        file=hit.line.file, line=hit.line.number, text=hit.line.text, cut=hit.line.cut,
        rank=hit.rank, local_rank=hit.local_rank, node=node, context=hit.context,
    )  # fmt: skip


#: "rank ?" and "node ?": what a cause's words say where the log names neither.
_NO_RANK = re.compile(r"\brank \?")
_NO_NODE = re.compile(r"\bnode \?")


def _said(text: str, hit: _Hit) -> str:
    """``text`` without a "rank ?": the local rank where the log gives only that, else
    that the log does not name it (and the same of the node)."""
    if hit.rank is None:
        who = (
            f"local rank {hit.local_rank}" if hit.local_rank is not None
            else "a rank (not named in the log)"
        )  # fmt: skip
        text = _NO_RANK.sub(who, text)
    return _NO_NODE.sub("node (not named in the log)", text)


def _known(state: _State, hit: _Hit, node: str | None) -> Explanation:
    cause = hit.cause
    assert cause is not None
    words = _Words(hit.groups)
    words.update(rank="?" if hit.rank is None else str(hit.rank), node=node or "?")
    words["death"] = _death(hit.groups)
    details = dict(hit.groups)
    if cause.group_by:
        words["missing"] = details["missing"] = _missing(state, cause.id)
        details["timed_out"] = ", ".join(map(str, sorted(state.grouped.get(cause.id, ()))))
    return Explanation(
        known=True,
        cause_id=cause.id,
        cause=_said(cause.cause.format_map(words), hit),
        fix=_said(cause.fix.format_map(words), hit),
        source=cause.source,
        evidence=_evidence(hit, node),
        details=tuple(sorted((k, str(v)) for k, v in details.items())),
    )


def _unknown(hit: _Hit | None, node: str | None) -> Explanation:
    if hit is None:
        return Explanation(
            known=False, cause_id=None,
            cause="no failing line found in the log: not a failure hpcenv knows",
            fix="look at the job's state (sacct -j JOBID) and the end of its logs",
        )  # fmt: skip
    return Explanation(
        known=False, cause_id=None,
        cause="not a failure hpcenv knows; the first failing line is below",
        fix="read the log around that line (it is the first error, before the other ranks "
        "stopped)",
        evidence=_evidence(hit, node),
    )  # fmt: skip


#: The NCCL-on-sockets cause, and the networks a profile may expect instead.
SOCKET = "nccl_socket"
EXPECTED_NETS = ("ofi", "ib")


def _tier(hit: _Hit, expect_net: str) -> float:
    """Which cause wins; NCCL on sockets where OFI/IB was expected is the lead of a
    timeout (between a rank that died, tier 2, and a collective that timed out, 3)."""
    if hit.cause is None:
        return 99
    if hit.cause.id == SOCKET and expect_net in EXPECTED_NETS:
        return 2.5
    return hit.cause.tier


#: How a rank the collective's watchdog took down died (``exitcode: -6``, SIGABRT).
_ABORTED = ("-6", "SIGABRT", "Aborted", "134")


def _aborted(hit: _Hit) -> bool:
    return any(hit.groups.get(k) in _ABORTED for k in ("exitcode", "signame", "how"))


def _cascade_last(hits: list[_Hit]) -> list[_Hit]:
    """``hits`` with a death by SIGABRT seen after a collective timed out (the watchdog
    aborting its process, and torchrun's summary of that) moved after the timeout: the
    summary line after a cascade never wins over the cascade's cause."""
    timeouts = [h.order for h in hits if h.cause and h.cause.group_by]
    if not timeouts:
        return hits
    after = [
        h for h in hits if h.cause and h.cause.tier == 2 and _aborted(h) and h.order > min(timeouts)
    ]
    return [h for h in hits if h not in after] + after


def explain(
    lines: Iterable[Line],
    catalog: Catalog,
    *,
    nodes: Sequence[str] = (),
    tasks_per_node: int = 0,
    expect_net: str = "any",
) -> Explanation:
    """The first real failure in ``lines`` (the candidate lines of ``scan``, files in
    the order given). ``nodes`` and ``tasks_per_node`` (the job's, when known) name the
    node of a rank no line does. ``expect_net`` (the profile's ``[platform] nccl_net``):
    NCCL on sockets where it expects ``ofi`` or ``ib`` comes before a timeout or a hang."""
    state = _State()
    passes = failures.gate(catalog)
    for line in lines:
        _see(state, catalog, line, passes)
    hits = sorted(state.first.values(), key=lambda h: (_tier(h, expect_net), h.order))
    hits = _cascade_last(hits)
    if not hits:
        hit = state.unknown
        return _unknown(hit, _node_of(state, hit, nodes, tasks_per_node) if hit else None)
    chosen = hits[0]
    out = _known(state, chosen, _node_of(state, chosen, nodes, tasks_per_node))
    if chosen.cause and chosen.cause.id == SOCKET and expect_net in EXPECTED_NETS:
        out = replace(out, cause=f"{out.cause}, where the profile expects nccl_net = {expect_net}")
    notes = [
        f"also seen: {h.cause.cause.format_map(_Words(h.groups))} ({h.line.file}:{h.line.number})"
        for h in hits[1:]
        if h.cause and h.cause.tier in (1, 5)
    ]
    return replace(out, notes=tuple(notes[:3]))


# --- what SLURM says of the job -------------------------------------------------------


def with_slurm(
    found: Explanation,
    catalog: Catalog,
    *,
    state: str,
    words: Mapping[str, str],
    said: str,
    where: str,
    nodes: str = "",
) -> Explanation:
    """``found`` (the logs' explanation) with SLURM's own verdict on the job (``state``,
    and ``said``, its fields, as ``where`` gave them): the verdict is the cause where it
    names one (OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, PREEMPTED) that the logs do not beat
    (a known cause of a lower or the same tier); otherwise it is a note."""
    fact = f"SLURM ({where}): {said}"
    verdict = catalog.verdict(state.split(maxsplit=1)[0] if state else "")
    tiers = {c.id: c.tier for c in catalog.causes}
    beaten = found.known and tiers.get(found.cause_id or "", 99) <= (verdict.tier if verdict else 0)
    if verdict is None or beaten:
        return replace(found, notes=(*found.notes, fact))
    filled = _Words(words)
    logs_said = (
        [f"the logs: {found.cause} ({found.evidence.where()})"] if found.evidence else []
    )  # fmt: skip
    return Explanation(
        known=True,
        cause_id=verdict.cause_id,
        cause=verdict.cause.format_map(filled),
        fix=verdict.fix.format_map(filled),
        source=verdict.source,
        evidence=Evidence(file=where, line=0, text=said, node=nodes or None),
        details=tuple(sorted((k, str(v)) for k, v in words.items())),
        notes=(*logs_said, *found.notes),
    )


# --- what hpcenv knows of the node ----------------------------------------------------


def _torch_spec(torch: str | None) -> str:
    """``torch==X`` for the job's torch (``2.9.1+cu130``), else any torch."""
    if torch and re.fullmatch(r"\d+(\.\d+)*", base := torch.split("+")[0]):
        return f"=={base}"
    return ">=0"


def with_node(
    explanation: Explanation, facts: Facts | None, torch: str | None = None
) -> Explanation:
    """``explanation`` with the node's facts in its words: for a CUDA build the driver
    cannot run (or GPU code missing), the variant hpcenv would install on that node."""
    if facts is None or explanation.cause_id not in TORCH_CAUSES:
        return explanation
    notes = list(explanation.notes)
    if facts.nvidia:
        runs = facts.nvidia.cuda_driver_version or "?"
        notes.append(
            f"node {facts.hostname or '?'}: driver {facts.nvidia.driver_version} "
            f"runs CUDA <= {runs}" + (f"; the job's torch is {torch}" if torch else "")
        )
    from hpcenv.decide.torch_choice import TorchWish, choose_torch  # packaging: only here

    choice = choose_torch(facts, TorchWish(spec=_torch_spec(torch))).choice
    if choice.backend and choice.version:
        fix = (
            f"install torch {choice.version} of variant {choice.backend} ({choice.index_url}): "
            f"the variant hpcenv chooses for this node (hpcenv build does); " + explanation.fix
        )
    else:
        fix = f"{choice.error or 'no torch build runs on this node'}; {explanation.fix}"
    return replace(explanation, fix=fix, notes=tuple(notes))
