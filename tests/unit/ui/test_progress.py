"""``ui/progress``: in a log, a task's lines are rate-limited (one per interval however
fast it advances) and alive (a heartbeat while it is silent); on a terminal, rich draws a
bar with counts where the total is known. Through a real pty and a pipe:
``tests/integration/projects/test_knowledge_update.py``."""

from __future__ import annotations

import io
import time

from hpcenv.ui import progress
from hpcenv.ui.report import MaskingConsole


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _log_console() -> MaskingConsole:
    return MaskingConsole(file=io.StringIO(), force_terminal=False, width=200)


def test_a_log_gets_one_line_per_interval_however_fast_the_work() -> None:
    out, clock = _log_console(), Clock()
    with progress.Progress(out, interval=10.0, clock=clock, heartbeat=False) as shown:
        shown.task("wheels", 50)
        for i in range(50):
            clock.now += 1.0  # 50 items in 50 s: lines at 10 s, 20 s, ... 50 s
            shown.note(f"reading w{i}")
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "wheels: 10/50 (1/s, 10 s) reading w9"
    assert len(lines) == 5 + 1 and lines[4].startswith("wheels: 50/50 (1/s, 50 s)")
    assert lines[-1] == "wheels: done, 50/50 in 50.0 s"


def test_work_shorter_than_an_interval_is_quiet_in_a_log() -> None:
    out, clock = _log_console(), Clock()
    with progress.Progress(out, interval=10.0, clock=clock, heartbeat=False) as shown:
        shown.task("survey")
        clock.now += 9.0
        shown.advance()
        shown.task("srun", 1)
        raise_nothing = clock.now
    assert out.file.getvalue() == "" and raise_nothing == 109.0  # type: ignore[attr-defined]


def test_a_task_without_a_total_counts_and_a_stop_is_said() -> None:
    out, clock = _log_console(), Clock()
    try:
        with progress.Progress(out, interval=5.0, clock=clock, heartbeat=False) as shown:
            shown.task("srun facts")
            clock.now += 7.0
            shown.advance()
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == ["srun facts: 1 done (0.14/s, 7 s)",
                     "srun facts: stopped, 1 in 7.0 s"]  # fmt: skip


def test_a_silent_task_stays_alive_in_a_log() -> None:
    out = _log_console()
    with progress.Progress(out, interval=0.05) as shown:
        shown.task("building flash-attn")
        time.sleep(0.4)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    alive = [x for x in lines if x.endswith("(still running)")]
    assert 2 <= len(alive) <= 9, lines
    assert alive[0].startswith("building flash-attn: (0 s)")
    assert lines[-1].startswith("building flash-attn: done, in")


def test_a_terminal_gets_a_bar_with_counts() -> None:
    out = MaskingConsole(file=io.StringIO(), force_terminal=True, width=120)
    with progress.Progress(out) as shown:
        shown.task("pairs", 6)
        for _ in range(6):
            shown.advance()
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "pairs" in text and "6/6" in text and "━" in text
