"""The job-script lines of a job that survives a bad node and a hang (``hpcenv sbatch
--gate pairs --requeue-bad N --hang-timeout DURATION -- CMD``), for ``hpcenv.job.render``.

- ``exclude_lines``: ``HPCENV_EXCLUDE``, the nodes the chain keeps out (your ``--exclude``,
  then every node a requeue added), passed to each later link's ``sbatch``;
- ``pairs_gate_lines``: the bad-node finder before the command, and with ``--requeue-bad``
  the requeue (``hpcenv.slurm.requeue``) when it names nodes;
- ``watchdog_setup/start/end``: ``$HPCENV_HEARTBEAT``, the command's mark
  (``HPCENV_CMD_OF``, how the stack dump finds its processes on every node), the
  watchdog (``hpcenv.slurm.watchdog``) beside the command, and the link's exit code
  when the watchdog ended it (``JobHung``, 10).

Every value is ``shlex.quote``d; the script stays free of user text.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from hpcenv.slurm import requeue, sbatch, stacks, watchdog
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, BadNodes, HpcenvError, JobHung
from hpcenv.utils.output import shell_join, shell_quote, visible


class CommandJob(Protocol):
    """What these lines read of ``hpcenv.job.render.CommandJob``."""

    @property
    def gate(self) -> tuple[str, ...]: ...
    @property
    def venv(self) -> str | None: ...
    @property
    def lead_s(self) -> int | None: ...
    @property
    def request(self) -> sbatch.Request: ...
    @property
    def hang_timeout_s(self) -> float | None: ...
    @property
    def requeue_bad(self) -> int: ...


#: The --gate word for the bad-node finder.
PAIRS_GATE = "pairs"
#: The later links' sbatch option carrying the exclusion (empty: no option at all).
EXCLUDE_ARG = '${HPCENV_EXCLUDE:+"--exclude=$HPCENV_EXCLUDE"} '


def _python(module: str) -> list[str]:
    return [sys.executable, "-I", "-m", module]


def exclude_lines(spec: CommandJob) -> list[str]:
    if not spec.requeue_bad:
        return []
    given = dict(spec.request.options).get("exclude", "")
    return [
        "# the nodes this chain keeps out: your --exclude, then those a requeue added",
        f"export HPCENV_EXCLUDE=${{HPCENV_EXCLUDE:-{shell_quote(given)}}} "
        "HPCENV_REQUEUE=${HPCENV_REQUEUE:-0}",
        '[ -z "$HPCENV_EXCLUDE" ] || echo "hpcenv: nodes kept out of this chain: $HPCENV_EXCLUDE '
        '($HPCENV_REQUEUE requeue(s) so far)"',
    ]


def pairs_gate_lines(spec: CommandJob, hpcenv: Sequence[str], ref: str, own: str) -> list[str]:
    """The bad-node finder as the last gate (after preflight and the probes)."""
    if PAIRS_GATE not in spec.gate:
        return []
    argv = [*hpcenv, "probe", "nccl", "--env", spec.venv or ref]
    argv += [*(["--profile", ref] if spec.venv else []), "--pairs"]
    what = "bad-node finder: allreduce between pairs of nodes"
    if not spec.requeue_bad:
        return [f'gate "{what} on $nodes nodes" {shell_join(argv)}']
    helper = [
        *_python("hpcenv.slurm.requeue"), "--report", '"$pairs_report"', "--script", '"$0"',
        "--link", '"$link"', "--attempt", '"$HPCENV_REQUEUE"', "--max", str(spec.requeue_bad),
        "--exclude", '"$HPCENV_EXCLUDE"', "--cancel", '"$next"', "--outcome", '"$outcome"',
    ]  # fmt: skip
    quoted = " ".join(w if w.startswith('"') else shell_quote(w) for w in helper)
    return [
        "# the finder's JSON report: when it names nodes, this link is resubmitted without",
        f"# them (at most {spec.requeue_bad} times in the chain), then it ends naming them",
        f"pairs_report={own}.pairs.json",
        f'echo "hpcenv gate: {what} on $nodes nodes (report: $pairs_report)"',
        f'rc=0; {shell_join([*argv, "--json"])} > "$pairs_report" || rc=$?',
        'if [ "$rc" -ne 0 ]; then',
        '  echo "hpcenv: gate failed: the bad-node finder (exit $rc)" >&2',
        f"  rq=0; {quoted} || rq=$?",
        f'  if [ "$rq" -eq {requeue.REQUEUED} ]; then next=; exit {requeue.REQUEUED}; fi',
        f'  if [ "$rq" -eq {requeue.USED_UP} ]; then end_chain "bad nodes, --requeue-bad '
        f'{spec.requeue_bad} used up"; exit {requeue.REQUEUED}; fi',
        '  end_chain "the gate failed"',
        '  exit "$rc"',
        "fi",
    ]


def watchdog_setup(spec: CommandJob, own: str) -> list[str]:
    """Before the command: the heartbeat file, unbuffered Python output, the mark."""
    if not spec.hang_timeout_s:
        return []
    return [
        f"# the hang watchdog: {spec.hang_timeout_s:g} s without output (or, once the command",
        "# touches it, without a touch of $HPCENV_HEARTBEAT) dumps the command's Python stacks",
        "# on every node here, then SIGUSR1, SIGTERM, and the link ends (exit 10)",
        f"export HPCENV_HEARTBEAT={own}.heartbeat",
        ': > "$HPCENV_HEARTBEAT"',
        "export PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1}  # print() reaches the log at once",
        f'export {stacks.TOKEN_VAR}="$SLURM_JOB_ID"  # the command\'s processes, for the dump',
    ]


def watchdog_start(spec: CommandJob, own: str) -> list[str]:
    if not spec.hang_timeout_s:
        return []
    argv = [
        *(shell_quote(w) for w in _python("hpcenv.slurm.watchdog")), "--pid", '"$cmd_pid"',
        "--timeout", f"{spec.hang_timeout_s:g}", "--token", '"$SLURM_JOB_ID"',
        "--nodes", '"$nodes"', "--watch", f"{own}.out", "--watch", f"{own}.err",
        "--heartbeat", '"$HPCENV_HEARTBEAT"', "--outcome", '"$outcome"',
    ]  # fmt: skip
    if spec.lead_s is not None:
        argv += ["--grace", str(spec.lead_s)]
    return [f"unset {stacks.TOKEN_VAR}", f"{' '.join(argv)} &", "watch_pid=$!"]


def watchdog_end(spec: CommandJob) -> list[str]:
    """After the command: the watchdog's verdict (it ended the command: exit 10)."""
    if not spec.hang_timeout_s:
        return []
    code = watchdog.EXIT_HUNG
    return [
        'kill -TERM "$watch_pid" 2>/dev/null || true  # done watching (finishes a dump first)',
        "while :; do",
        "  trapped=0 verdict=0",
        '  wait "$watch_pid" || verdict=$?',
        '  [ "$trapped" = 1 ] || break',
        "done",
        'rm -f -- "$HPCENV_HEARTBEAT"',
        f'if [ "$verdict" -eq {code} ]; then',
        f'  echo "hpcenv: the watchdog ended the command (hung: its stacks are above); '
        f'this link ends with exit {code}"',
        f"  exit {code}",
        "fi",
    ]


#: The most of an outcome file read back (the job writes a few hundred bytes).
MAX_OUTCOME_BYTES = 1 << 20


def load_outcome(path: Path) -> dict[str, object] | None:
    """The outcome file a link wrote (``--hang-timeout``, ``--requeue-bad``), None when
    there is none. It lies in the job's log directory, which others may write: it is read
    by the reading rule (``fsio.read_yours``: never through a link, never a FIFO, yours
    alone, bounded in size and nesting), else BadInput naming it."""
    data = fsio.load_json_yours(path, "outcome file", limit=MAX_OUTCOME_BYTES)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: outcome file is not a JSON object; remove it")
    return data


def requeued_to(data: dict[str, object] | None) -> str | None:
    """The job id an outcome says the link was requeued as, else None."""
    if not data or data.get("ended_by") != "requeue":
        return None
    new = str(data.get("new_job") or "")
    return new if new.isdigit() and len(new) <= MAX_JOB_ID else None


#: The longest job id believed (SLURM's are 32-bit).
MAX_JOB_ID = 10


def requeued_as(path: Path) -> str | None:
    """The job id a link was requeued as by the bad-node gate (its outcome file), else None
    (also when the file is refused: ``load_outcome``)."""
    try:
        return requeued_to(load_outcome(path))
    except BadInput:
        return None


def outcome_error(data: dict[str, object] | None, job_id: str) -> HpcenvError | None:
    """The error a link ended by the watchdog or the bad-node gate reports (``JobHung``,
    exit 10; ``BadNodes``, exit 11), from its outcome (``load_outcome``); None when the
    command's own exit ended it."""
    if not data:
        return None
    ended = data.get("ended_by")
    if ended == "watchdog":
        where = "; ".join(map(str, _items(data.get("in_collective")))) or "none"
        return JobHung(
            visible(
                f"job {job_id}: {data.get('why')} for {data.get('silent_s')} s; the watchdog "
                f"dumped its stacks into the log and ended it (in a collective: {where})"
            )
        )
    if ended in ("requeue", "bad-nodes"):
        nodes = ", ".join(map(str, _items(data.get("bad_nodes"))))
        then = (
            f"requeued as job {data.get('new_job')} with --exclude={data.get('exclude')}"
            if data.get("new_job")
            else f"--requeue-bad used up: resubmit with --exclude={data.get('exclude')}"
        )
        return BadNodes(visible(f"job {job_id}: the bad-node finder named {nodes}; {then}"))
    return None


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def read_outcome(path: Path, job_id: str) -> HpcenvError | None:
    """``outcome_error`` of the outcome file at ``path`` (None when it is refused)."""
    try:
        return outcome_error(load_outcome(path), job_id)
    except BadInput:
        return None


__all__ = [
    "EXCLUDE_ARG",
    "PAIRS_GATE",
    "exclude_lines",
    "load_outcome",
    "outcome_error",
    "pairs_gate_lines",
    "read_outcome",
    "requeued_as",
    "requeued_to",
    "watchdog_end",
    "watchdog_setup",
    "watchdog_start",
]
