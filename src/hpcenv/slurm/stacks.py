"""The Python stacks of a job's command on this node, with py-spy, for the hang watchdog.

``python -m hpcenv.slurm.stacks --token JOBID`` (run on every node of the job by
``hpcenv.slurm.watchdog``, one srun task per node) finds the command's processes: the
job script starts the command with ``HPCENV_CMD_OF=<job id>`` in its environment, which
srun passes to every task and every task to its children, so the processes are those
whose ``/proc/<pid>/environ`` holds it (the watchdog and this helper run without it).
Each Python one among them (``/proc/<pid>/exe`` a ``python*``/``pypy*``) is dumped with
``py-spy dump --pid PID --json``: py-spy is a dependency of hpcenv, installed beside the
interpreter running hpcenv, never into the user's environment, and it reads the target's
memory without stopping it for long (it does not need the target to cooperate).

It prints one JSON object per node on stdout: the host, and per process its pid, rank
(``RANK``, else ``SLURM_PROCID``), command line, threads and frames, or why it could
not be dumped. py-spy attaches with ``ptrace``: where that is refused (a kernel with
``kernel.yama.ptrace_scope`` >= 2, a container without ``CAP_SYS_PTRACE``, another
user's process), the error says so with the setting read from this node, and the dump
goes on with the other processes.

``in_collective`` names the frame of a stack that sits in a collective (torch.distributed,
DeepSpeed's comm, NCCL's Python bindings): the ranks the watchdog names as waiting for
the others.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcenv.tools import command
from hpcenv.utils.errors import CommandFailed
from hpcenv.utils.output import print_text

#: The variable the job script gives the command (its value: the job id).
TOKEN_VAR = "HPCENV_CMD_OF"
#: Seconds one ``py-spy dump`` may take.
DUMP_TIMEOUT_S = 30.0
#: Functions that are collectives (torch.distributed's, DeepSpeed's comm wraps them).
COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "allreduce", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "all_to_all", "all_to_all_single", "broadcast",
    "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "gather", "scatter",
    "send", "recv", "isend", "irecv", "batch_isend_irecv", "wait", "synchronize",
    "init_process_group", "new_group", "rendezvous",
})  # fmt: skip
#: Path parts of the files a collective's frame is in.
_COLLECTIVE_FILES = re.compile(r"(torch/distributed/|deepspeed/comm/|/nccl|cupy/cuda/nccl)")
_PYTHON_EXE = re.compile(r"^(python|pypy)[0-9.]*[a-z]?$")


@dataclass(frozen=True, kw_only=True)
class Frame:
    function: str
    file: str
    line: int

    def describe(self) -> str:
        """``function (dir/file.py:line)``: the file's last two path parts."""
        short = "/".join(self.file.replace("\\", "/").split("/")[-2:])
        return f"{self.function} ({short}:{self.line})"


@dataclass(frozen=True, kw_only=True)
class Thread:
    name: str
    ident: str
    idle: bool
    frames: tuple[Frame, ...]  # innermost first, as py-spy prints them


@dataclass(frozen=True, kw_only=True)
class ProcessStacks:
    pid: int
    rank: str | None
    cmdline: str
    threads: tuple[Thread, ...] = ()
    error: str = ""

    def collective(self) -> Frame | None:
        """The innermost collective frame of any thread (None: not in a collective)."""
        for t in self.threads:
            if (frame := in_collective(t.frames)) is not None:
                return frame
        return None

    def innermost(self) -> Frame | None:
        """The main thread's innermost frame (else the first thread's)."""
        main = next((t for t in self.threads if t.name == "MainThread"), None)
        threads = [main] if main else list(self.threads)
        return next((t.frames[0] for t in threads if t.frames), None)

    def serialize(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "rank": self.rank,
            "cmdline": self.cmdline,
            "error": self.error,
            "threads": [
                {
                    "name": t.name,
                    "id": t.ident,
                    "idle": t.idle,
                    "frames": [vars(f) for f in t.frames],
                }
                for t in self.threads
            ],
        }

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> ProcessStacks:
        threads = tuple(
            Thread(
                name=str(t.get("name") or ""),
                ident=str(t.get("id") or ""),
                idle=bool(t.get("idle")),
                frames=tuple(
                    Frame(function=str(f["function"]), file=str(f["file"]), line=int(f["line"]))
                    for f in t.get("frames") or ()
                ),
            )
            for t in data.get("threads") or ()
        )
        rank = data.get("rank")
        return cls(
            pid=int(data["pid"]),
            rank=None if rank is None else str(rank),
            cmdline=str(data.get("cmdline") or ""),
            threads=threads,
            error=str(data.get("error") or ""),
        )


def in_collective(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame that is a collective: a function of ``COLLECTIVES`` in
    torch.distributed, DeepSpeed's comm or an NCCL binding."""
    for f in frames:
        if f.function in COLLECTIVES and _COLLECTIVE_FILES.search(f.file.replace("\\", "/")):
            return f
    return None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _is_python(pid: int) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return bool(_PYTHON_EXE.match(Path(exe.removesuffix(" (deleted)")).name))


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(w.decode(errors="replace") for w in raw.split(b"\0") if w)[:300]


def processes(token: str, *, proc: Path = Path("/proc")) -> list[tuple[int, str | None]]:
    """(pid, rank) of the Python processes whose environment holds ``TOKEN_VAR=token``,
    this process and its parent left out, and those of another node's slurmd
    (``SLURMD_NODENAME``) where nodes share a kernel."""
    mine = {os.getpid(), os.getppid()}
    node = os.environ.get("SLURMD_NODENAME")
    out = []
    for entry in sorted(proc.iterdir(), key=lambda p: (len(p.name), p.name)):
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        pid = int(entry.name)
        env = _environ(pid)
        if env.get(TOKEN_VAR) != token or not _is_python(pid):
            continue
        if node and env.get("SLURMD_NODENAME", node) != node:
            continue  # another node's task (nodes that share one kernel, as in the tests)
        out.append((pid, env.get("RANK") or env.get("SLURM_PROCID")))
    return out


def py_spy() -> str | None:
    """hpcenv's own py-spy: beside the interpreter running hpcenv, else on PATH."""
    mine = Path(sys.executable).parent / "py-spy"
    if mine.is_file() and os.access(mine, os.X_OK):
        return str(mine)
    return shutil.which("py-spy")


def _ptrace_hint() -> str:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = "absent"
    return (
        f"py-spy attaches with ptrace: this node has kernel.yama.ptrace_scope={scope} (0 or 1 "
        "lets a user read their own processes; 2 needs CAP_SYS_PTRACE, 3 forbids it); in a "
        "container it needs CAP_SYS_PTRACE"
    )


def _threads(data: Any) -> tuple[Thread, ...]:
    threads = []
    for t in data if isinstance(data, list) else ():
        frames = tuple(
            Frame(
                function=str(f.get("name") or "?"),
                file=str(f.get("filename") or f.get("short_filename") or "?"),
                line=int(f.get("line") or 0),
            )
            for f in t.get("frames") or ()
        )
        threads.append(
            Thread(
                name=str(t.get("thread_name") or ""),
                ident=str(t.get("thread_id") or t.get("os_thread_id") or ""),
                idle=bool(t.get("idle")),
                frames=frames,
            )
        )
    return tuple(threads)


def dump(pid: int, rank: str | None, spy: str | None) -> ProcessStacks:
    """One process's stacks (``py-spy dump --json``), or why not."""
    base = ProcessStacks(pid=pid, rank=rank, cmdline=_cmdline(pid))
    if spy is None:
        return _with_error(base, "py-spy is missing beside hpcenv (reinstall hpcenv)")
    try:
        done = command.run(
            [spy, "dump", "--pid", str(pid), "--json"], timeout=DUMP_TIMEOUT_S, check=False
        )
    except CommandFailed as exc:
        return _with_error(base, f"py-spy did not answer in {DUMP_TIMEOUT_S:g} s: {exc}")
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["(nothing)"])[0][:300]
        hint = _ptrace_hint() if re.search(r"permission|not permitted|ptrace", said, re.I) else ""
        return _with_error(base, f"py-spy failed: {said}" + (f"; {hint}" if hint else ""))
    try:
        return ProcessStacks(
            pid=pid, rank=rank, cmdline=base.cmdline, threads=_threads(json.loads(done.stdout))
        )
    except (ValueError, TypeError, KeyError) as exc:
        return _with_error(base, f"py-spy's output was not understood: {exc}")


def _with_error(base: ProcessStacks, error: str) -> ProcessStacks:
    return ProcessStacks(pid=base.pid, rank=base.rank, cmdline=base.cmdline, error=error)


def node_report(token: str) -> dict[str, Any]:
    """This node's command processes and their stacks."""
    spy = py_spy()
    found = [dump(pid, rank, spy) for pid, rank in processes(token)]
    return {"host": socket.gethostname(), "processes": [p.serialize() for p in found]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcenv.slurm.stacks")
    parser.add_argument("--token", required=True, help=f"the value of {TOKEN_VAR} to look for")
    args = parser.parse_args(argv)
    print_text(json.dumps(node_report(args.token)) + "\n")
    return 0


__all__ = ["COLLECTIVES", "TOKEN_VAR", "Frame", "ProcessStacks", "in_collective", "processes"]

if __name__ == "__main__":
    sys.exit(main())
