"""The hang watchdog of ``hpcenv sbatch --hang-timeout DURATION -- CMD``.

The job script starts it beside the command (``python -I -m hpcenv.slurm.watchdog``, in
the batch step, on the first node). It never reads the command's output: every
``poll`` seconds it looks at the size and modification time of the job's log files
(what srun relays from every task lands there) and of ``$HPCENV_HEARTBEAT``, a file the
script creates on the shared log directory. The command is silent when neither log has
changed for ``timeout`` seconds; once the command has touched the heartbeat file, the
heartbeat alone counts (a job that prints rarely but touches it each step). A watchdog
that only calls ``stat`` a few times a second costs next to nothing (``bench/
bench_watchdog.py`` measures it).

When the command is silent for that long:

1. the Python stacks of the command's processes on every node go into the job log
   (``hpcenv.slurm.stacks``: py-spy, one srun task per node with ``--overlap``);
2. the nodes and ranks whose stacks sit in a collective are named, and those that do
   not (where they are instead: often the rank the others wait for);
3. the command's process group gets SIGUSR1 (checkpoint, as before the walltime), then,
   ``grace`` seconds later if it still runs, SIGTERM, then SIGKILL;
4. ``outcome`` (a JSON file beside the logs) says the watchdog ended the link, which
   ``hpcenv sbatch --wait`` reads, and the watchdog exits ``EXIT_HUNG`` (10): the job
   script ends the link with that code and a queued next link (``--chain``) starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcenv.slurm import stacks
from hpcenv.tools import command
from hpcenv.utils import fsio
from hpcenv.utils.errors import CommandFailed, JobHung
from hpcenv.utils.output import print_text

#: The watchdog's exit code when it ended the command (that of ``JobHung``).
EXIT_HUNG = JobHung.exit_code
#: Seconds between SIGUSR1 and SIGTERM when the command does not end by itself.
DEFAULT_GRACE_S = 60.0
#: Seconds the stack dump over all nodes may take.
DUMP_TIMEOUT_S = 180.0
_DURATION = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,9})?)\s*(s|m|h)?\s*$")
#: The shortest and longest ``--hang-timeout``: under 5 s the watchdog (looking every
#: 0.2 s at best, py-spy taking a second a node) fires on a healthy command's pauses (0.0001
#: fired at once); over a year is no watchdog at all (00:00:00, SLURM's "no limit", was inf).
MIN_HANG_S = 5.0
MAX_HANG_S = 366 * 86400.0


def parse_duration(text: str) -> float:
    """Seconds of ``90``, ``90s``, ``10m``, ``2h`` or a walltime (``00:10:00``); ValueError
    naming the forms."""
    from hpcenv.models import walltime

    m = _DURATION.match(text)
    if m:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    elif ":" in text and walltime.problem(text) is None:
        seconds = walltime.seconds(text)
    else:
        raise ValueError(
            "is not a duration: give seconds (90, 90s), minutes (10m), hours (2h) or HH:MM:SS"
        )
    if not MIN_HANG_S <= seconds <= MAX_HANG_S:  # 00:00:00 is SLURM's "no limit": inf
        raise ValueError(
            f"must be between {MIN_HANG_S:g} s and {MAX_HANG_S / 86400:g} days "
            "(e.g. 90s, 10m, 2h, 01:30:00)"
        )
    return seconds


def poll_interval(timeout_s: float) -> float:
    """How often the files are looked at: a tenth of the timeout, within 0.2-5 s."""
    return min(5.0, max(0.2, timeout_s / 10))


def _mark(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, ended but not yet waited for, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


@dataclass
class Silence:
    """When the command last showed a sign of life."""

    watch: tuple[Path, ...]
    heartbeat: Path | None
    last: float = field(default_factory=time.monotonic)
    marks: dict[Path, tuple[int, int] | None] = field(default_factory=dict)
    beat0: tuple[int, int] | None = None
    beating: bool = False

    def __post_init__(self) -> None:
        self.marks = {p: _mark(p) for p in self.watch}
        self.beat0 = _mark(self.heartbeat) if self.heartbeat else None

    def look(self, now: float) -> float:
        """Seconds of silence as of ``now``."""
        if self.heartbeat is not None:
            beat = _mark(self.heartbeat)
            if beat is not None and beat != self.beat0:
                self.beating = True  # touched by the command: it alone counts from now
                self.beat0, self.last = beat, now
        if not self.beating:
            for p in self.watch:
                m = _mark(p)
                if m != self.marks[p]:
                    self.marks[p], self.last = m, now
        return now - self.last

    def what(self) -> str:
        return (
            f"the heartbeat file {self.heartbeat} was not touched"
            if self.beating
            else "the command wrote nothing to stdout or stderr"
        )


def _say(text: str) -> None:
    print_text(f"hpcenv watchdog: {text}\n")


def gather(token: str, nodes: int) -> list[dict[str, Any]]:
    """Every node's stacks report: one srun task per node (``--overlap``: beside the
    command's step), or this node alone."""
    if nodes <= 1:
        return [stacks.node_report(token)]
    argv = [
        "srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--overlap",
        "--kill-on-bad-exit=0", "--", sys.executable, "-I", "-m", "hpcenv.slurm.stacks",
        "--token", token,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != stacks.TOKEN_VAR}
    try:
        done = command.run(argv, timeout=DUMP_TIMEOUT_S, env=env, check=False)
    except (OSError, CommandFailed) as exc:
        _say(f"the stack dump over {nodes} nodes did not finish: {exc}")
        return []
    reports = []
    for line in done.stdout.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            reports.append(data)
    if len(reports) < nodes:
        _say(
            f"stacks from {len(reports)} of {nodes} nodes; srun said: {done.stderr.strip()[-500:]}"
        )
    return reports


def _who(host: str, p: stacks.ProcessStacks) -> str:
    return f"{host} rank {p.rank if p.rank is not None else '?'} (pid {p.pid})"


def print_stacks(reports: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Each process's stacks into the log; returns who sits in a collective, who not."""
    waiting: list[str] = []
    elsewhere: list[str] = []
    for report in sorted(reports, key=lambda r: str(r.get("host"))):
        host = str(report.get("host"))
        found = [stacks.ProcessStacks.load(p) for p in report.get("processes") or ()]
        if not found:
            _say(f"{host}: no Python process of the command found")
        for p in found:
            _say(f"--- {_who(host, p)}: {p.cmdline}")
            if p.error:
                _say(f"    no stacks: {p.error}")
                continue
            for t in p.threads:
                _say(f"    thread {t.name or t.ident}{' (idle)' if t.idle else ''}:")
                for f in t.frames:
                    _say(f"        {f.describe()}")
            if (c := p.collective()) is not None:
                waiting.append(f"{_who(host, p)} in {c.describe()}")
            elif (top := p.innermost()) is not None:
                elsewhere.append(f"{_who(host, p)} at {top.describe()}")
    return {"in_collective": waiting, "elsewhere": elsewhere}


def _end(pid: int, grace_s: float) -> str:
    """SIGUSR1 to the command's process group, SIGTERM after ``grace_s``, SIGKILL after
    as long again; what it took."""
    steps = ((signal.SIGUSR1, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0))
    for sig, wait_s in steps:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return f"the command ended before {sig.name}"
        except PermissionError:  # not a group leader after all: the process alone
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if not _alive(pid):
            return f"the command ended after {sig.name}"
    return "the command was killed"


def run(args: argparse.Namespace) -> int:
    silence = Silence(tuple(args.watch), args.heartbeat)
    interval = poll_interval(args.timeout)
    stop = False

    def stopped(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, stopped)
    while not stop and _alive(args.pid):
        quiet = silence.look(time.monotonic())
        if quiet >= args.timeout:
            return hung(args, silence, quiet)
        time.sleep(min(interval, max(0.05, args.timeout - quiet)))
    return 0


def hung(args: argparse.Namespace, silence: Silence, quiet: float) -> int:
    _say(
        f"{silence.what()} for {quiet:.0f} s (--hang-timeout {args.timeout:g} s): the "
        f"Python stacks of the command's processes on {args.nodes} node(s) follow"
    )
    who = print_stacks(gather(args.token, args.nodes))
    if who["in_collective"]:
        _say("in a collective (waiting for the others): " + "; ".join(who["in_collective"]))
    if who["elsewhere"]:
        _say("not in a collective: " + "; ".join(who["elsewhere"]))
    _say(f"SIGUSR1 to the command (checkpoint); SIGTERM in {args.grace:g} s if it still runs")
    how = _end(args.pid, args.grace)
    _say(f"{how}; the link ends with exit {EXIT_HUNG} (hung)")
    if args.outcome:
        outcome = {
            "ended_by": "watchdog",
            "exit_code": EXIT_HUNG,
            "silent_s": round(quiet, 1),
            "why": silence.what(),
            **who,
        }
        fsio.write_text(args.outcome, json.dumps(outcome) + "\n")
    return EXIT_HUNG


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcenv.slurm.watchdog")
    parser.add_argument("--pid", type=int, required=True, help="the command's process group")
    parser.add_argument("--timeout", type=float, required=True, help="seconds of silence")
    parser.add_argument("--watch", type=Path, action="append", default=[], help="a log file")
    parser.add_argument("--heartbeat", type=Path, default=None)
    parser.add_argument("--token", required=True, help=f"{stacks.TOKEN_VAR} of the command")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_S)
    parser.add_argument("--outcome", type=Path, default=None, help="JSON file for --wait")
    return run(parser.parse_args(argv))


__all__ = ["EXIT_HUNG", "Silence", "gather", "parse_duration", "poll_interval", "print_stacks"]

if __name__ == "__main__":
    sys.exit(main())
