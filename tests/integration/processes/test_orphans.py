"""Nothing hpcenv starts outlives it: Ctrl-C or SIGTERM of ``hpcenv probe ray`` or
``hpcenv doctor`` leaves no process of that run, and a probe's descendants end with it.

Before: the shutdown stopped escalating once the group leader had exited, and Ray's
workers move to process groups of their own, so Ray's ``DashboardAgent`` and
``RuntimeEnvAgent`` (which ignore SIGTERM) and its idle workers lived on with PPID 1;
SIGTERM of hpcenv itself ran no cleanup at all. Now every child starts its own session
and shutdown stops every process of that session by PID until none is left
(``command.shutdown_all``), and ``cli`` turns SIGTERM/SIGHUP into the Ctrl-C path.

Every process of a run is found by a marker variable in its environment (Ray's
processes inherit it); real Ray from the tests' probe venv (``tests/support/probe_env.py``),
in a loopback-only network namespace where the machine allows it (see test_probe_ray).
A test double holds Ray's ``shutdown`` (``HOLD_MODULE``), so the signal always lands while
Ray is up: the probe's whole Ray session is ~4 s, and a CI run once missed it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support import REPO, require
from support.buildkit import hpcenv as run_hpcenv
from support.buildkit import require_local_build
from support.netns import LOOPBACK_ONLY, can_unshare_net
from support.probe_env import has_ray

pytestmark = pytest.mark.slow

MARK = "HPCENV_TEST_RUN"


def marked(tag: str) -> list[tuple[int, str]]:
    """(pid, command) of every live process whose environment holds ``MARK=tag``."""
    want = f"{MARK}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if want not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X"):
            found.append((int(name), cmd))
    return found


def kill_marked(tag: str) -> None:
    """Clean up after a failed test: only the processes this test started (by PID)."""
    for pid, _ in marked(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def wait_for(what: str, ok: Callable[[], bool], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def ray_is_up(tag: str) -> bool:
    return any("raylet" in cmd for _, cmd in marked(tag)) and any(
        "ray::" in cmd or "default_worker" in cmd for _, cmd in marked(tag)
    )


HOLD = "HPCENV_TEST_HOLD_RAY"
HOLD_MODULE = f"""
\"\"\"Test double for a long Ray job, written by tests/integration/processes/test_orphans.py
and inert unless {HOLD} is set: Ray's ``shutdown`` waits, so that Ray's processes are
certainly up when the test signals hpcenv. Without it the probe's whole Ray session (~4 s)
could pass between two looks at /proc, and the test waited for nothing.\"\"\"
import time

import ray

_shutdown = ray.shutdown


def _held_shutdown(*args, **kwargs):
    time.sleep(600)  # hpcenv's shutdown sweep stops this process long before
    _shutdown(*args, **kwargs)


ray.shutdown = _held_shutdown
"""


def hold_ray_in(python: Path) -> None:
    """Install the hold (see HOLD_MODULE) into the venv of ``python``."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(purelib)
    (site / "hpcenv_test_hold_ray.py").write_text(HOLD_MODULE)
    (site / "hpcenv_test_hold_ray.pth").write_text(
        f"import os; os.environ.get({HOLD!r}) and __import__('hpcenv_test_hold_ray')\n"
    )


def _in_loopback(argv: list[str]) -> list[str]:
    return (
        ["unshare", "--net", "--", "sh", "-c", LOOPBACK_ONLY, *argv] if can_unshare_net() else argv
    )


def _start_until_ray_is_up(argv: list[str], env: dict[str, str], tag: str) -> subprocess.Popen[str]:
    """Start ``argv`` (in a loopback-only network where possible) and wait until Ray's
    raylet and a worker of this run are up."""
    proc = subprocess.Popen(
        _in_loopback(argv),
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("Ray's raylet and a worker", lambda: ray_is_up(tag) or proc.poll() is not None)
        if proc.poll() is not None:  # it ended before Ray was up: say how, not "timed out"
            _out, err = proc.communicate()
            pytest.fail(f"{argv[-3:]} exited {proc.returncode} before Ray was up: {err[-3000:]}")
    except BaseException:
        proc.kill()
        kill_marked(tag)
        raise
    return proc


def _stop_and_check(proc: subprocess.Popen[str], tag: str, sig: signal.Signals) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = marked(tag)
    kill_marked(tag)
    assert left == [], f"processes of the run outlived hpcenv: {left}"
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_of_probe_ray_leaves_no_process(
    probe_python: Path,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    require("ray", has_ray(probe_python), "ray could not be installed from PyPI")
    hold_ray_in(probe_python)
    tag = uuid.uuid4().hex
    env = {**os.environ, MARK: tag, HOLD: "1", "HPCENV_HOME": str(tmp_path)}
    env["CUDA_VISIBLE_DEVICES"] = ""
    argv = [sys.executable, "-m", "hpcenv", "probe", "ray", "--env", str(probe_python)]
    proc = _start_until_ray_is_up(argv, env, tag)
    code, err = _stop_and_check(proc, tag, sig)
    assert code == 128 + sig, err
    assert f"by {sig.name}; everything it started was stopped" in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def built_local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An HPCENV_HOME with ``local`` built (real uv, CPU torch, Ray from PyPI), and a
    profile that runs only the ray probe, named ``local`` so it uses that build."""
    require_local_build()
    root = tmp_path_factory.mktemp("orphans")
    env = {"HPCENV_HOME": str(root / "home"), "HPCENV_LOCKFILES": str(REPO / "lockfiles")}
    done = run_hpcenv("build", "local", env=env)
    assert done.returncode == 0, done.stderr
    text = (REPO / "envs" / "local.toml").read_text()
    text = text.replace("[profile]\n", '[profile]\nname = "local"\n', 1)
    start = text.index("run = [")
    text = text[:start] + 'run = ["ray"]' + text[text.index("]", start) + 1 :]
    (root / "ray-only.toml").write_text(text)
    env["PROFILE"] = str(root / "ray-only.toml")
    venv = root / "home" / "venvs" / "local"
    hold_ray_in(venv / "bin" / "python")
    # The hold stands in for something the build installed: recorded in the build's file
    # list, or doctor's build would see an added .pth, rebuild (issue 24) and need PyPI
    # from inside the loopback-only network
    from hpcenv.build import venv_check

    venv_check.record_tree(venv.resolve())
    return env


def test_signal_of_doctor_leaves_no_process(built_local: dict[str, str]) -> None:
    """SIGTERM only: SIGINT and SIGTERM differ before the command runs (Python's
    KeyboardInterrupt, ``cli``'s handler raising it), which the ray probe's two cases
    prove; from there doctor unwinds the same way for both."""
    sig = signal.SIGTERM
    tag = uuid.uuid4().hex
    env = {**os.environ, **built_local, MARK: tag, HOLD: "1", "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "hpcenv", "doctor", built_local["PROFILE"]]
    proc = _start_until_ray_is_up(argv, env, tag)
    code, err = _stop_and_check(proc, tag, sig)
    assert code == 128 + sig, err
    assert "Traceback" not in err


BACKGROUNDS = r"""
import json, os, subprocess, sys
d, name = os.environ["HPCENV_RESULT_DIR"], os.environ["HPCENV_PROBE_NAME"]
# one child in our process group, one in a group of its own (as Ray's workers are)
subprocess.Popen(["sleep", "300"])
subprocess.Popen(["sleep", "301"], process_group=0)
with open(os.path.join(d, f"{name}.rank0.json"), "w") as f:
    json.dump({"status": "pass", "summary": "left two children behind"}, f)
"""


def test_a_probes_descendants_do_not_outlive_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex
    monkeypatch.setenv(MARK, tag)
    scripts = tmp_path / "probes"
    scripts.mkdir()
    (scripts / "bg_probe.py").write_text(BACKGROUNDS)  # registry.script_name
    spec = runner.ProbeSpec(name="bg", python=Path(sys.executable), timeout_s=60)
    try:
        result = runner.run_probe(
            spec, launcher=runner.LocalLauncher(), result_dir=tmp_path / "r", script_dir=scripts
        )
        assert result.status is Status.PASS, result.summary
        assert marked(tag) == []
    finally:
        kill_marked(tag)
