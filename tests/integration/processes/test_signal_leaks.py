"""Signals leave nothing behind and say what happened.

Before: SIGTERM, SIGHUP (an SSH disconnect) and SIGKILL of a build left
``/tmp/hpcenv-run-*`` (the import check's output directory), a SIGKILL during lock
compilation left ``lockfiles/.lock-*`` in the repository, and SIGTERM/SIGHUP printed
nothing. Now SIGTERM/SIGHUP unwind like Ctrl-C (``cli``), temporary directories are
``fsio.work_dir``s named with their pid (the next run removes a SIGKILLed one's), and a
lock is compiled outside the lockfiles directory.

Real builds and locks of ``local`` through the real CLI; each test gives hpcenv a
private TMPDIR so that only its own temporary directories are looked at.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO
from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_local_build()
    root = tmp_path_factory.mktemp("leaks")
    shutil.copytree(REPO / "lockfiles", root / "lockfiles")
    env = {"HPCENV_HOME": str(root / "home"), "HPCENV_LOCKFILES": str(root / "lockfiles")}
    done = hpcenv("build", "local", env=env)
    assert done.returncode == 0, done.stderr
    return env


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hpcenv", *args],
        env={**os.environ, **env},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(proc: subprocess.Popen[str], pattern: str, tmp: Path) -> list[Path]:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = sorted(tmp.glob(pattern.format(pid=proc.pid)))
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"hpcenv ended before {pattern} appeared: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{pattern} never appeared")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_of_a_build_clean_up_and_say_so(
    home: dict[str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    env = {**home, "TMPDIR": str(tmp_path)}
    before = os.readlink(Path(home["HPCENV_HOME"]) / "venvs" / "local")
    proc = _start(["build", "local", "--force"], env)
    _wait_for(proc, "hpcenv-run-{pid}-*", tmp_path)  # the import check is running
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name}" in err and "Traceback" not in err
    assert list(tmp_path.glob("hpcenv-*")) == []
    assert os.readlink(Path(home["HPCENV_HOME"]) / "venvs" / "local") == before


def test_a_sigkilled_builds_temporary_directory_is_removed_by_the_next_run(
    home: dict[str, str], tmp_path: Path
) -> None:
    env = {**home, "TMPDIR": str(tmp_path)}
    proc = _start(["build", "local", "--force"], env)
    left = _wait_for(proc, "hpcenv-run-{pid}-*", tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert all(p.exists() for p in left)  # nothing can run on SIGKILL...
    done = hpcenv("build", "local", "--force", env=env)
    assert done.returncode == 0, done.stderr
    assert not any(p.exists() for p in left)  # ...the next run removes it


def test_sigkill_during_lock_compilation_leaves_nothing_in_lockfiles(
    home: dict[str, str], tmp_path: Path
) -> None:
    locks = tmp_path / "lockfiles"
    locks.mkdir()
    work = tmp_path / "tmp"
    work.mkdir()
    env = {**home, "HPCENV_LOCKFILES": str(locks), "TMPDIR": str(work)}
    proc = _start(["lock", "local"], env)
    _wait_for(proc, "hpcenv-lock-{pid}-*/requirements.in", work)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert list(locks.iterdir()) == []  # the repository's lockfiles/ stays clean
    done = hpcenv("lock", "local", env=env)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in locks.iterdir()] == [f"local-{os.uname().machine}.txt"]
    assert list(work.glob("hpcenv-lock-*")) == []


def _threads_masks(pid: int) -> dict[int, int]:
    """thread id -> its blocked-signal mask (``/proc/PID/task/TID/status``, SigBlk)."""
    masks = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            text = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith("SigBlk:"):
                masks[int(task.name)] = int(line.split()[1], 16)
    return masks


def test_no_thread_of_a_build_but_the_main_one_takes_a_stop_signal(
    home: dict[str, str], tmp_path: Path
) -> None:
    """Every helper thread of a real build (the RECORD hashing beside the import check,
    rich's spinner, pipe readers) blocks SIGINT, SIGTERM and SIGHUP, so the kernel gives
    those only to the main thread, where ``cli`` can take them (``hpcenv.kit.threads``)."""
    env = {**home, "TMPDIR": str(tmp_path)}
    proc = _start(["build", "local", "--force"], env)
    stops = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
    helpers: dict[int, int] = {}
    while proc.poll() is None:
        for tid, mask in _threads_masks(proc.pid).items():
            if tid != proc.pid:
                helpers[tid] = helpers.get(tid, stops) & mask  # a mask seen once unblocked stays so
        time.sleep(0.01)
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert len(helpers) >= 2, f"the build ran no helper threads to look at: {helpers}"
    unblocked = {tid: hex(mask) for tid, mask in helpers.items() if mask & stops != stops}
    assert unblocked == {}, f"threads that could take a stop signal: {unblocked} of {len(helpers)}"
