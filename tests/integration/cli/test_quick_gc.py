"""The quick commands (``cli.QUICK``: facts, plan, audit, ...) run with the cyclic GC
paused and, when hpcenv is the program, leave everything frozen for the exit; a caller in
the same process gets its collector back as it was and nothing frozen, and a long
command (build, probe, run) keeps the collector on throughout."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv import cli
from hpcenv.commands import profiles
from support import FACTS

#: Run as the program does (``main()`` with no argv); an exit handler registered before
#: it runs after hpcenv's (atexit is last in, first out) and says what the exit found.
_PROGRAM = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), file=sys.stderr))
from hpcenv.cli import main
sys.argv = ["hpcenv", *sys.argv[1:]]
raise SystemExit(main())
"""


def _program(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROGRAM, *argv],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "HPCENV_HOME": str(home)},
    )  # fmt: skip


def test_a_quick_command_as_the_program_freezes_for_the_exit(tmp_path: Path) -> None:
    done = _program("plan", "local", "--facts", str(FACTS / "gh200-isambard.json"), "--json",
                    home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["profile"] == "local"  # the whole JSON reached the pipe
    frozen = int(done.stderr.split("frozen at exit:")[1].split()[0])
    assert frozen > 10_000  # hpcenv's modules, the knowledge, the plan: all of it


@pytest.mark.parametrize("argv", [["explain", "--help"], ["sbatch", "--help"]])
def test_another_command_leaves_the_exit_alone(argv: list[str], tmp_path: Path) -> None:
    done = _program(*argv, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "frozen at exit: 0" in done.stderr


def test_in_process_the_collector_is_paused_and_given_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[bool] = []
    real = profiles.run

    def watched(args: object) -> int:
        seen.append(gc.isenabled())
        return real(args)  # type: ignore[arg-type]

    monkeypatch.setattr(profiles, "run", watched)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert "profiles" in cli.QUICK
    assert cli.main(["profiles"]) == 0
    assert seen == [False]  # paused while the command ran
    assert gc.isenabled()  # and on again for this process
    assert gc.get_freeze_count() == frozen  # nothing frozen for a caller that goes on
    capsys.readouterr()


def test_in_process_a_caller_that_turned_it_off_keeps_it_off(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gc.disable()
    try:
        assert cli.main(["profiles"]) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
    capsys.readouterr()
