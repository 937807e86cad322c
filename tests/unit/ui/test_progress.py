"""The progress line of ``hpcenv explain`` while it reads a log over 100 MB: none for a
smaller one; in a pipe a plain line at most every 10 s (and one at the end); on a
terminal one line redrawn in place and cleared when the file is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.ui import progress


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
