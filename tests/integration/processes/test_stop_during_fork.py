"""A stop signal is never lost, wherever it lands.

CI once sent SIGHUP to ``hpcenv build`` while it forked the import check: CPython ran
logging's at-fork hook (``_releaseLock``) in the parent, hpcenv's handler raised there,
CPython printed "Exception ignored in: <function _releaseLock>", and the build ran on to
exit 0. Children are now started with the stop signals held (``kit.children``), and a
stop whose exception something else swallowed still sets the exit code (``cli.main``).

Each case runs the real ``cli.main`` in a fresh interpreter. The signal is sent by the
process to itself at the exact place the race needs (an at-fork hook, a ``__del__``),
which a signal from outside hits only by chance.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from support import REPO

#: The start of each script: ``hpcenv profiles`` made to run one child (``command.run``).
PRELUDE = """
import os, signal, sys
from hpcenv import cli
from hpcenv.tools import command
from hpcenv.commands import profiles

def one_child(args):
    command.run([sys.executable, "-c", "pass"])
    return 0

profiles.run = one_child
"""


def _main_with(setup: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + textwrap.dedent(setup) + '\nsys.exit(cli.main(["profiles"]))\n'
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sigterm_during_the_forks_at_fork_hook_unwinds() -> None:
    done = _main_with(
        """
        def hook():  # runs in the parent right after the fork, as logging's does
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python code: where a pending handler runs
                pass

        os.register_at_fork(after_in_parent=hook)
        """
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "hpcenv: stopped by SIGTERM; everything it started was stopped"
    ), done.stderr


def test_a_stop_whose_exception_was_swallowed_still_sets_the_exit_code() -> None:
    done = _main_with(
        """
        class Swallows:
            def __del__(self):  # an exception raised in here is printed and dropped
                os.kill(os.getpid(), signal.SIGHUP)
                for _ in range(1000):
                    pass

        def swallowed(args):
            obj = Swallows()
            del obj
            return 0

        profiles.run = swallowed
        """
    )
    assert done.returncode == 128 + signal.SIGHUP, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "hpcenv: stopped by SIGHUP, which arrived where it could not interrupt; "
        "'profiles' finished (exit 0) before it took effect"
    ), done.stderr


def test_the_child_runs_with_the_stop_signals_unblocked() -> None:
    """Held in hpcenv across the fork, not in the child: a SIGTERM still stops it."""
    done = _main_with(
        """
        def one_child(args):
            out = command.run(["grep", "^SigBlk", "/proc/self/status"]).stdout
            print(out.strip())
            return 0

        profiles.run = one_child
        """
    )
    assert done.returncode == 0, done.stderr
    blocked = int(done.stdout.split()[-1], 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert not blocked & (1 << (sig - 1)), f"{sig.name} blocked in the child: {done.stdout}"


def test_a_stop_sent_while_a_helper_thread_runs_is_taken_by_the_main_thread() -> None:
    """CI: SIGHUP'd while a build's threads hashed files (and rich's spinner turned), the
    kernel gave the signal to such a thread, whose mask did not hold it, and CPython ran
    the handler in the main thread inside logging's at-fork hook all the same. Threads
    hpcenv starts (here rich's spinner, as a build shows a step) now hold it too."""
    done = _main_with(
        """
        import time
        from hpcenv.ui import report

        def hook():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # time for whichever thread took it to run the C handler
            for _ in range(1000):
                pass

        os.register_at_fork(after_in_parent=hook)

        def one_child(args):
            with report.BuildProgress().running("a step"):
                command.run([sys.executable, "-c", "pass"])
            return 0

        profiles.run = one_child
        """
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "hpcenv: stopped by SIGTERM; everything it started was stopped"
    ), done.stderr


def test_a_stop_during_a_work_directorys_removal_waits_for_it(tmp_path: Path) -> None:
    """CI: a SIGTERM'd build left ``hpcenv-run-*`` in $TMPDIR: the stop cut the work
    directory's removal short. The removal now finishes first, then the stop unwinds."""
    done = _main_with(
        f"""
        import shutil, tempfile
        from hpcenv.utils import fsio

        tempfile.tempdir = {str(tmp_path)!r}
        removing = shutil.rmtree

        def stopped_while_removing(path, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
            removing(path, **kwargs)

        def one_child(args):
            with fsio.work_dir("hpcenv-run-") as work:
                (work / "0.out").write_text("output")
                fsio.shutil.rmtree = stopped_while_removing
            return 0

        profiles.run = one_child
        """
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "stopped by SIGTERM" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
