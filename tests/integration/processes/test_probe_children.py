"""Helper processes a probe starts (ofi's NCCL-init workers) end with the probe.

A stand-in probe (written by the test, run by the real runner like any probe) starts
two sleeping Pythons through ``hpcenv.kit.children.run_children``, the way the ofi probe starts
its NCCL workers on a GPU node; the sleepers stand in for those workers, which need
GPUs. Each writes its pid and process group, so the test can check that they are in
the probe's group, that the probe's deadline (from the runner's ``timeout_s``)
stopped them, and that a probe stopped or killed from outside leaves none running.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from hpcenv.kit import probe
from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from hpcenv.tools import command

STANDIN = """
import json, os, signal, sys, time
from hpcenv.kit import children as kit_children, probe

if not {honour!r}:  # hung in C, as NCCL would be: SIGINT/SIGTERM do nothing, SIGKILL ends it
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)

SLEEPER = (
    "import os, sys, time; "
    "open(sys.argv[1], 'w').write(f'{{os.getpid()}} {{os.getpgid(0)}}'); time.sleep(600)"
)


def body(ctx):
    out = os.environ["HPCENV_RESULT_DIR"]
    until = probe.deadline(ctx.config) if {honour!r} else time.monotonic() + 600
    cmds = [
        ([sys.executable, "-c", SLEEPER, f"{{out}}/child{{k}}"], dict(os.environ))
        for k in range(2)
    ]
    children = kit_children.run_children(cmds, until, term_grace_s=2)
    ctx.details["children"] = [
        {{"pid": c.pid, "returncode": c.returncode, "timed_out": c.timed_out}} for c in children
    ]
    ctx.details["pgid"] = os.getpgid(0)
    ctx.check("children", "pass", "stopped at the deadline")


sys.exit(probe.main("standin", body))
"""


def write_standin(tmp_path: Path, *, honour: bool) -> Path:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "standin_probe.py").write_text(STANDIN.format(honour=honour))
    return scripts


def children_of(result_dir: Path) -> list[tuple[int, int]]:
    out = []
    for k in range(2):
        path = result_dir / f"child{k}"
        for _ in range(200):  # the sleeper writes its file right after it starts
            if path.is_file() and path.read_text():
                break
            time.sleep(0.05)
        pid, pgid = path.read_text().split()
        out.append((int(pid), int(pgid)))
    return out


def gone(pid: int) -> bool:
    """Exited (reaped, or a zombie left to a container's init that does not reap)."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_config_carries_the_runner_timeout(tmp_path: Path) -> None:
    spec = runner.ProbeSpec(name="x", python=Path(sys.executable), timeout_s=42, config={"a": 1})
    env = runner.probe_env(spec, tmp_path, {})
    assert json.loads(env["HPCENV_PROBE_CONFIG"]) == {"a": 1, "timeout_s": 42}


def test_deadline_from_the_timeout() -> None:
    now = time.monotonic()
    assert probe.deadline({"timeout_s": 20}) <= now + 15  # 5 s margin at least
    assert probe.deadline({"timeout_s": 400}) <= now + 300  # a quarter of it
    assert probe.deadline({}) <= now + probe.DEFAULT_TIMEOUT_S * 0.75
    assert probe.probe_timeout({"timeout_s": "soon"}) == probe.DEFAULT_TIMEOUT_S


def test_workers_share_the_probe_group_and_stop_at_its_deadline(tmp_path: Path) -> None:
    """Runner timeout 8 s: the probe stops its 600 s sleepers at its deadline (3 s),
    then still writes its own result, well before the runner would stop it."""
    spec = runner.ProbeSpec(name="standin", python=Path(sys.executable), timeout_s=8)
    result = runner.run_probe(
        spec,
        launcher=runner.LocalLauncher(),
        result_dir=tmp_path / "r",
        script_dir=write_standin(tmp_path, honour=True),
    )
    assert result.status == Status.PASS, result
    (rank,) = result.ranks
    details = rank.details
    started = json.loads((tmp_path / "r" / "standin.rank0.started").read_text())
    assert details["pgid"] == started["pid"]  # the runner made the probe lead its group
    for _pid, pgid in children_of(tmp_path / "r"):
        assert pgid == started["pid"], "a worker left the probe's process group"
    for child in details["children"]:
        assert child["timed_out"] is True
        assert child["returncode"] == -signal.SIGTERM


def test_runner_timeout_stops_the_workers_with_the_probe(tmp_path: Path) -> None:
    """A probe hung past the runner's timeout (deaf to SIGINT/SIGTERM, so its own cleanup
    never runs): the runner's SIGINT..SIGKILL of its group stops the workers too."""
    spec = runner.ProbeSpec(name="standin", python=Path(sys.executable), timeout_s=3)
    result = runner.run_probe(
        spec,
        launcher=runner.LocalLauncher(),
        result_dir=tmp_path / "r",
        script_dir=write_standin(tmp_path, honour=False),
    )
    for pid, _ in children_of(tmp_path / "r"):
        assert gone(pid), f"worker {pid} outlived the probe"
    # the runner's SIGINT to the probe's group reached the workers (the probe itself
    # ignored it, saw them end, and reported)
    (rank,) = result.ranks
    assert [c["returncode"] for c in rank.details["children"]] == [-signal.SIGINT] * 2


def test_workers_die_when_only_the_probe_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the probe process alone (not its group): PDEATHSIG ends the workers."""
    scripts = write_standin(tmp_path, honour=False)
    result_dir = tmp_path / "r"
    result_dir.mkdir()
    proc = command.spawn(
        [sys.executable, str(scripts / "standin_probe.py")],
        env={**os.environ, "HPCENV_RESULT_DIR": str(result_dir)},
        stdout=tmp_path / "out",
        stderr=tmp_path / "err",
    )
    try:
        children = children_of(result_dir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for pid, _ in children:
            assert gone(pid), f"worker {pid} outlived the probe"
    finally:
        command.shutdown_all([proc])
