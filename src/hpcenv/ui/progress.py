"""Progress on long work, for every command (``knowledge update``, the probe suite and its
NCCL sweep, the bad-node finder's rounds, ``profile init``'s srun, a build's steps such
as a flash-attn compile): the one owner of how it looks.

- On a terminal: rich's live display on stderr, a bar with counts and rate where the
  total is known, a spinner with the elapsed time where it is not.
- In a pipe or a job log: plain lines, rate-limited and alive: nothing for work shorter
  than an interval, then at most one line per interval as it advances, one at least per
  interval while it is silent (a heartbeat, so a 20-minute compile does not look hung),
  and one when it ends. The interval is 30 s (``HPCENV_PROGRESS_INTERVAL`` sets another,
  in seconds).

Lower layers never see this class: they call back (``log(line)``, ``on_done(result)``,
``expect(n)``), and the command hands them this object's methods.
A large file read (``hpcenv explain`` of a log over ``LARGE`` bytes) has its own small
line, ``ReadProgress``: on a terminal one line redrawn at most a few times a second, in a
pipe a plain line at most every ``PIPE_EVERY`` seconds; nothing for a small file.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text

from hpcenv.kit import threads
from hpcenv.utils.output import status_line

DEFAULT_INTERVAL = 30.0


def interval_from_env() -> float:
    """``HPCENV_PROGRESS_INTERVAL`` (seconds, > 0), else 30 s."""
    try:
        value = float(os.environ.get("HPCENV_PROGRESS_INTERVAL", ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if 0 < value < float("inf") else DEFAULT_INTERVAL


class _Count(ProgressColumn):
    """``12/95`` where the total is known, ``3 done`` where it is not (nothing before)."""

    def render(self, task: Task) -> Text:
        if task.total is not None:
            return Text(f"{int(task.completed)}/{int(task.total)}")
        return Text(f"{int(task.completed)} done" if task.completed else "")


class _Rate(ProgressColumn):
    """Items per second, once some are done."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.2g}/s" if speed else "", style="dim")


def plain_line(what: str, done: int, total: int | None, seconds: float, note: str = "") -> str:
    """One progress line for a log: ``what: 12/95 (1.3/s, 9 s) note``; ``what: (45 s)``
    for work that counts nothing."""
    count = f"{done}/{total} " if total is not None else f"{done} done " if done else ""
    rate = f"{done / seconds:.2g}/s, " if done and seconds > 0 else ""
    return f"{what}: {count}({rate}{seconds:.0f} s)" + (f" {note}" if note else "")


class Progress:
    """A sequence of tasks (``task(what, total)``, ``advance``), shown as the module says.
    Use as a context manager; ``clock`` and ``interval`` are the tests' handles."""

    def __init__(
        self,
        out: Console,
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
        transient: bool = False,
    ) -> None:
        self.out = out
        self.live = out.is_terminal
        self.interval = interval if interval is not None else interval_from_env()
        self.clock = clock
        self._lock = threading.Lock()
        self._what = ""
        self._total: int | None = None
        self._done = 0
        self._note = ""
        self._start = 0.0
        self._said = 0.0
        self._spoke = False  # this task said something in the log
        self._running = False
        self._stop = threading.Event()
        self._heartbeat = heartbeat and not self.live
        self._rich: RichProgress | None = None
        self._task_id: object = None
        self._transient = transient
        self._beater: threading.Thread | None = None

    # --- the context -------------------------------------------------------------------

    def __enter__(self) -> Progress:
        if self.live:
            self._rich = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(bar_width=30),
                _Count(),
                _Rate(),
                TimeElapsedColumn(),
                console=self.out,
                transient=self._transient,
            )
            with threads.stop_signals_blocked():  # rich's refresh thread never takes a stop
                self._rich.start()
        elif self._heartbeat:
            self._beater = threads.start(self._beat)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish(ok=kind is None)
        self._stop.set()
        if self._beater is not None:  # it wakes on the event: gone before hpcenv goes on
            self._beater.join()
        if self._rich is not None:
            self._rich.stop()

    # --- what the work calls ------------------------------------------------------------

    def task(self, what: str, total: int | None = None) -> None:
        """A new task (the one before it finished); a log hears of it after an interval."""
        self.finish()
        with self._lock:
            self._what, self._total, self._done, self._note = what, total, 0, ""
            self._start = self._said = self.clock()
            self._running = True
            self._spoke = False
        if self._rich is not None:  # (a log hears of it once it has run an interval)
            self._task_id = self._rich.add_task(what, total=total)

    def advance(self, note: str = "", n: int = 1) -> None:
        with self._lock:
            if not self._running:
                return
            self._done += n
            self._note = note
            now = self.clock()
            due = now - self._said >= self.interval
            line = plain_line(self._what, self._done, self._total, now - self._start, note)
            if due:
                self._said = now
                self._spoke = True
        if self._rich is not None:
            desc = f"{self._what} {note}".strip()
            self._rich.update(self._task_id, advance=n, description=desc)  # type: ignore[arg-type]
        elif due:
            self._say(line)

    def running(self, note: str) -> None:
        """What the task is doing now, nothing done yet (a log's heartbeat says it)."""
        with self._lock:
            self._note = note
        if self._rich is not None:
            self._rich.update(self._task_id, description=f"{self._what} {note}".strip())  # type: ignore[arg-type]

    def note(self, line: str) -> None:
        """A ``log(line)`` callback: each line is one item done."""
        self.advance(line)

    def finish(self, *, ok: bool = True) -> None:
        """End the current task: its last line (a log) or its bar completed (a terminal)."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            seconds = self.clock() - self._start
            what, done, total, spoke = self._what, self._done, self._total, self._spoke
        if self._rich is not None:
            self._rich.update(self._task_id, total=total if total is not None else done,  # type: ignore[arg-type]
                              completed=done, description=what)  # fmt: skip
            return
        if not spoke:  # it never said it started
            return
        end = "done" if ok else "stopped"
        count = f"{done}/{total} " if total is not None else f"{done} " if done else ""
        self._say(f"{what}: {end}, {count}in {seconds:.1f} s")

    # --- a log's heartbeat --------------------------------------------------------------

    def _beat(self) -> None:
        while not self._stop.wait(min(max(self.interval, 0.05), 5.0)):  # never a busy loop
            with self._lock:
                now = self.clock()
                if not self._running or now - self._said < self.interval:
                    continue
                self._said = now
                self._spoke = True
                line = plain_line(self._what, self._done, self._total, now - self._start,
                                  self._note)  # fmt: skip
            self._say(f"{line} (still running)")

    def _say(self, line: str) -> None:
        self.out.print(line, soft_wrap=True, highlight=False)


# --- a large file read ---------------------------------------------------------------

#: Files smaller than this read without a progress line.
LARGE = 100 << 20
#: Seconds between redraws on a terminal, between lines in a pipe.
TTY_EVERY = 0.25
PIPE_EVERY = 10.0


class ReadProgress:
    """``start(path, size)`` gives the callback a reader calls with the bytes read so far
    (None for a small file); on a terminal the line is cleared once the file is read."""

    def __init__(self, *, tty: bool | None = None, clock: Callable[[], float] = time.monotonic):
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._clock = clock

    def start(self, path: Path, size: int) -> Callable[[int], None] | None:
        if size < LARGE:
            return None
        every = TTY_EVERY if self.tty else PIPE_EVERY
        begun = self._clock()
        last = [begun]

        def tick(seen: int) -> None:
            now = self._clock()
            if now - last[0] < every and seen < size:
                return
            last[0] = now
            rate = seen / max(now - begun, 1e-6) / (1 << 20)
            status_line(
                f"reading {path}: {seen >> 20} of {size >> 20} MiB ({100 * seen // size} %, "
                f"{rate:.0f} MiB/s)", redraw=self.tty,
            )  # fmt: skip
            if seen >= size and self.tty:
                status_line("", redraw=True)  # the line goes when the file is read

        return tick
