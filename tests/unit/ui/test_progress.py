"""``ui/progress``: in a log, a task's lines are rate-limited (one per interval however
fast it advances) and alive (a heartbeat while it is silent); on a terminal, rich draws a
bar with counts where the total is known. Through a real pty and a pipe:
``tests/integration/projects/test_knowledge_update.py``. And ``hpcenv explain``'s line while
it reads a log over 100 MB: none for a smaller one; in a pipe a plain line at most every
10 s (and one at the end); on a terminal one line redrawn in place and cleared when read."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

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


def test_a_pipe_gets_rate_limited_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0.0]
    reading = progress.ReadProgress(tty=False, clock=lambda: now[0])
    assert reading.start(Path("small.log"), progress.LARGE - 1) is None
    tick = reading.start(Path("big.log"), 400 << 20)
    assert tick is not None
    for step in range(1, 41):  # 10 MiB a second for 40 s
        now[0] = float(step)
        tick(step * 10 << 20)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and "\r" not in "".join(lines)
    assert lines[-1] == "reading big.log: 400 of 400 MiB (100 %, 10 MiB/s)"


def test_a_terminal_gets_one_line_redrawn_and_cleared(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0.0]
    tick = progress.ReadProgress(tty=True, clock=lambda: now[0]).start(Path("b"), 200 << 20)
    assert tick is not None
    now[0] = 1.0
    tick(100 << 20)
    now[0] = 2.0
    tick(200 << 20)
    err = capsys.readouterr().err
    assert "\n" not in err and err.count("\r") == 3 and err.endswith("\r\x1b[K")
