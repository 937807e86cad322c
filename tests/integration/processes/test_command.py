"""command.run / run_parallel: argument lists, exit codes, deadlines that stop process groups."""

from __future__ import annotations

import sys
import time

import pytest

from hpcenv.tools import command
from hpcenv.utils.errors import CommandFailed


def test_run_parallel_keeps_order_and_exit_codes() -> None:
    done = command.run_parallel(
        [
            [sys.executable, "-c", "import time; time.sleep(0.3); print('slow')"],
            [sys.executable, "-c", "import sys; print('fast'); sys.exit(3)"],
        ],
        timeout=60,
    )
    assert [d.stdout.strip() for d in done] == ["slow", "fast"]
    assert [d.returncode for d in done] == [0, 3]


def test_run_parallel_runs_at_the_same_time() -> None:
    start = time.monotonic()
    command.run_parallel([[sys.executable, "-c", "import time; time.sleep(2)"]] * 2, timeout=60)
    assert time.monotonic() - start < 3.5  # one after the other would take >= 4 s


def test_run_parallel_deadline_stops_everything() -> None:
    start = time.monotonic()
    with pytest.raises(CommandFailed) as info:
        command.run_parallel(
            [[sys.executable, "-c", "import time; time.sleep(60)"], [sys.executable, "-c", "pass"]],
            timeout=1,
        )
    assert info.value.returncode == 124
    assert time.monotonic() - start < 30


def test_run_reports_exit_code_and_missing_program() -> None:
    with pytest.raises(CommandFailed) as info:
        command.run([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert info.value.returncode == 7
    with pytest.raises(CommandFailed) as missing:
        command.run(["hpcenv-no-such-program"])
    assert missing.value.returncode == 127
