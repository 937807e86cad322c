"""The hang watchdog (``hpcenv.slurm.watchdog``) and its stack dump (``hpcenv.slurm.stacks``)
on real processes of this machine, with the real py-spy installed with hpcenv: a silent
command's function is named, SIGUSR1 reaches it first, a heartbeat keeps it alive, and
a torch rank waiting in a gloo allreduce is named as sitting in a collective. Across
nodes on SLURM: ``test_survive_slurm.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.slurm import stacks, survive, watchdog
from hpcenv.utils.errors import BadNodes, JobHung
from support import require

SILENT = """\
import pathlib, signal, sys, time
def checkpoint(*_):
    pathlib.Path(sys.argv[1]).write_text("checkpointed")
    sys.exit(0)
signal.signal(signal.SIGUSR1, checkpoint)
def stuck_in_here():
    time.sleep(600)
print("started", flush=True)
stuck_in_here()
"""

BEATS = """\
import os, pathlib, sys, time
beat = pathlib.Path(os.environ["HPCENV_HEARTBEAT"])
for _ in range(int(sys.argv[1])):
    beat.touch()
    time.sleep(0.2)
def after_the_beats():
    time.sleep(600)
after_the_beats()
"""


def _start(tmp_path: Path, code: str, *args: str, token: str = "t1") -> subprocess.Popen[bytes]:
    """``code`` as the command: its own process group, output to tmp_path/out, marked."""
    script = tmp_path / "cmd.py"
    script.write_text(code)
    out = (tmp_path / "out").open("ab")
    env = {**os.environ, stacks.TOKEN_VAR: token, "HPCENV_HEARTBEAT": str(tmp_path / "beat")}
    (tmp_path / "beat").touch()
    return subprocess.Popen([sys.executable, str(script), *args], stdout=out, stderr=out,
                            env=env, start_new_session=True)  # fmt: skip


def _watch(
    tmp_path: Path, proc: subprocess.Popen[bytes], timeout: float, token: str = "t1"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-m", "hpcenv.slurm.watchdog", "--pid", str(proc.pid),
         "--timeout", str(timeout), "--token", token, "--watch", str(tmp_path / "out"),
         "--heartbeat", str(tmp_path / "beat"), "--grace", "5",
         "--outcome", str(tmp_path / "outcome.json")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def reaped() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_a_silent_command_is_named_where_it_sits_then_checkpoints_and_ends(
    tmp_path: Path, reaped: list[subprocess.Popen[bytes]]
) -> None:
    proc = _start(tmp_path, SILENT, str(tmp_path / "ckpt"))
    reaped.append(proc)
    started = time.monotonic()
    done = _watch(tmp_path, proc, 1.5)
    assert done.returncode == watchdog.EXIT_HUNG == JobHung.exit_code == 10, done.stderr
    assert time.monotonic() - started < 30
    log = done.stdout
    assert "the command wrote nothing to stdout or stderr for 2 s" in log, log
    assert f"rank ? (pid {proc.pid}): {sys.executable}" in log
    assert "        stuck_in_here (" in log and "cmd.py:7)" in log, log
    assert "not in a collective:" in log and "at stuck_in_here" in log
    assert "the command ended after SIGUSR1" in log
    assert (tmp_path / "ckpt").read_text() == "checkpointed"  # SIGUSR1 came first
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["ended_by"] == "watchdog" and outcome["in_collective"] == []
    error = survive.read_outcome(tmp_path / "outcome.json", "7")
    assert isinstance(error, JobHung) and "job 7: the command wrote nothing" in str(error)


@pytest.mark.slow
def test_a_heartbeat_keeps_a_quiet_command_alive_until_it_stops(
    tmp_path: Path, reaped: list[subprocess.Popen[bytes]]
) -> None:
    """20 touches 0.2 s apart (4 s, past a 1.5 s timeout): the watchdog waits; then it
    judges by the heartbeat alone."""
    proc = _start(tmp_path, BEATS, "20")
    reaped.append(proc)
    started = time.monotonic()
    done = _watch(tmp_path, proc, 1.5)
    assert done.returncode == 10, done.stderr
    assert time.monotonic() - started > 4.5
    assert f"the heartbeat file {tmp_path / 'beat'} was not touched" in done.stdout
    assert "after_the_beats (" in done.stdout


def test_a_command_that_ends_ends_the_watchdog_quietly(
    tmp_path: Path, reaped: list[subprocess.Popen[bytes]]
) -> None:
    proc = _start(tmp_path, "import time\nfor i in range(8):\n print(i, flush=True)\n "
                  "time.sleep(0.25)\n")  # fmt: skip
    reaped.append(proc)
    done = _watch(tmp_path, proc, 1.0)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    assert not (tmp_path / "outcome.json").exists()


GLOO = """\
import os, sys, time
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1],
                        rank=rank, world_size=2)
print("joined", rank, flush=True)
if rank == 0:
    dist.all_reduce(torch.ones(4))
else:
    def busy_elsewhere():
        time.sleep(600)
    busy_elsewhere()
"""


def test_a_rank_waiting_in_a_gloo_allreduce_sits_in_a_collective(
    tmp_path: Path, torch_python: Path, reaped: list[subprocess.Popen[bytes]]
) -> None:
    """Real torch on CPU: rank 0 enters all_reduce, rank 1 never does."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    (tmp_path / "gloo.py").write_text(GLOO)
    env = {**os.environ, stacks.TOKEN_VAR: "g1"}
    out = (tmp_path / "out").open("ab")
    for rank in ("0", "1"):
        reaped.append(subprocess.Popen(
            [str(torch_python), str(tmp_path / "gloo.py"), port], env={**env, "RANK": rank},
            stdout=out, stderr=out, start_new_session=True,
        ))  # fmt: skip
    deadline = time.monotonic() + 120
    while (tmp_path / "out").read_text().count("joined") < 2:
        assert time.monotonic() < deadline, (tmp_path / "out").read_text()
        assert all(p.poll() is None for p in reaped), (tmp_path / "out").read_text()
        time.sleep(0.2)
    time.sleep(1)
    found = [stacks.dump(pid, rank, stacks.py_spy()) for pid, rank in stacks.processes("g1")]
    by_rank = {p.rank: p for p in found}
    assert set(by_rank) == {"0", "1"}, [p.serialize() for p in found]
    waiting = by_rank["0"].collective()
    assert waiting is not None and waiting.function == "all_reduce", by_rank["0"].serialize()
    assert "torch/distributed/" in waiting.file
    assert by_rank["1"].collective() is None
    top = by_rank["1"].innermost()
    assert top is not None and top.function == "busy_elsewhere"
    said = watchdog.print_stacks([{"host": "here", "processes": [p.serialize() for p in found]}])
    assert said["in_collective"][0].startswith("here rank 0 (pid ")
    assert " in all_reduce (distributed/distributed_c10d.py:" in said["in_collective"][0]
    assert said["elsewhere"][0].startswith("here rank 1 ")


def test_what_counts_as_a_collective() -> None:
    def f(function: str, file: str) -> stacks.Frame:
        return stacks.Frame(function=function, file=file, line=1)

    c10d = "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    inner = [
        f("wrapper", "/v/torch/distributed/c10d_logger.py"),
        f("barrier", c10d),
        f("m", "t.py"),
    ]
    assert stacks.in_collective(inner) == inner[1]
    assert stacks.in_collective([f("all_reduce", "/home/me/mine.py")]) is None  # not torch's
    assert stacks.in_collective([f("step", "/v/torch/optim/adam.py")]) is None
    deepspeed = f("all_reduce", "/v/site-packages/deepspeed/comm/torch.py")
    assert stacks.in_collective([deepspeed]) == deepspeed


def test_without_py_spy_or_a_process_the_dump_says_why(tmp_path: Path) -> None:
    missing = stacks.dump(os.getpid(), "3", None)
    assert missing.error == "py-spy is missing beside hpcenv (reinstall hpcenv)"
    assert stacks.py_spy() == str(Path(sys.executable).parent / "py-spy")  # hpcenv's own
    gone = stacks.dump(2**22 + 7, None, stacks.py_spy())  # no such pid
    assert gone.error.startswith("py-spy failed: ") and not gone.threads


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("2h", 7200.0), ("5s", 5.0),
     ("00:10:00", 600.0), ("1-00:00:00", 86400.0)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert watchdog.parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "10x", "m", "0", "-5s", "1:2:3:4", "00:00:00", "0.0001", "4.9s", "400d", "nan", "inf",
     "1e999", "9" * 5000, "367-00:00:00"],
)  # fmt: skip
def test_bad_durations(text: str) -> None:
    """00:00:00 (SLURM's "no limit") became inf and 0.0001 fired at once: both refused."""
    with pytest.raises(ValueError, match=r"duration|between 5 s and 366 days"):
        watchdog.parse_duration(text)


def test_the_watchdog_looks_a_few_times_per_timeout_never_busily() -> None:
    assert watchdog.poll_interval(1.0) == 0.2 and watchdog.poll_interval(30) == 3.0
    assert watchdog.poll_interval(3600) == 5.0


def test_outcomes_name_the_exit_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    assert survive.read_outcome(path, "1") is None  # CMD's own exit: no file
    path.write_text(json.dumps({"ended_by": "requeue", "bad_nodes": ["nid3"],
                                "exclude": "nid1,nid3", "new_job": "45"}))  # fmt: skip
    error = survive.read_outcome(path, "44")
    assert isinstance(error, BadNodes) and error.exit_code == 11
    assert str(error) == (
        "job 44: the bad-node finder named nid3; requeued as job 45 with --exclude=nid1,nid3"
    )
    path.write_text(json.dumps({"ended_by": "bad-nodes", "bad_nodes": ["nid\x1b3"],
                                "exclude": "nid3", "new_job": None}))  # fmt: skip
    error = survive.read_outcome(path, "46")
    assert str(error) == (
        "job 46: the bad-node finder named nid\\x1b3; --requeue-bad used up: resubmit with "
        "--exclude=nid3"
    )
    path.write_text("not json")
    assert survive.read_outcome(path, "1") is None


def test_ptrace_hint_reads_this_node_s_setting() -> None:
    hint = stacks._ptrace_hint()
    setting = Path("/proc/sys/kernel/yama/ptrace_scope")
    expect = setting.read_text().strip() if setting.exists() else "absent"
    assert f"kernel.yama.ptrace_scope={expect}" in hint and "CAP_SYS_PTRACE" in hint
    require("py-spy", stacks.py_spy() is not None, "py-spy is installed with hpcenv")
