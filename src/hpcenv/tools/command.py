"""The one place hpcenv starts subprocesses.

Commands are argument lists, never shell strings. ``run`` logs the shlex-quoted
command, enforces a timeout, raises ``CommandFailed`` with the exit code, and on
Ctrl-C or timeout shuts the child down in escalating steps (SIGINT, SIGTERM, SIGKILL).

Every child starts its own *session*, and shutdown stops every process of that
session by PID, step by step, until none is left: also after the child itself has
exited, and also processes that moved to a process group of their own (Ray's workers
do; its DashboardAgent and RuntimeEnvAgent ignore SIGTERM and would otherwise live on
with PPID 1). Captured output is bounded (``MAX_CAPTURE`` bytes per stream, the tail
kept): a tool that prints gigabytes cannot take the login node's memory.
"""

from __future__ import annotations

import collections
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

from hpcenv.kit import threads
from hpcenv.kit.children import STOP_SIGNALS, stop_signals_held
from hpcenv.utils.errors import CommandFailed, Interrupted

#: Bytes of each captured stream kept (the tail; the head is dropped and counted).
MAX_CAPTURE = 8 << 20

#: Seconds to wait after each signal before escalating to the next one.
SHUTDOWN_STEPS: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGINT, 3.0),
    (signal.SIGTERM, 3.0),
    (signal.SIGKILL, 5.0),
)


@dataclass(frozen=True, kw_only=True)
class Completed:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _popen(
    argv: tuple[str, ...],
    *,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    **streams: Any,
) -> subprocess.Popen[Any]:
    """The one ``Popen``: argument list, own process group, dies with hpcenv, and a
    stop signal arriving while it forks unwinds after the child is known (it is stopped)."""
    started: list[subprocess.Popen[Any]] = []
    try:
        with stop_signals_held() as preexec:
            started.append(
                subprocess.Popen(  # noqa: S603 - argument list, never a shell
                    argv,
                    env=dict(env) if env is not None else None,
                    cwd=cwd,
                    start_new_session=True,
                    # dies with hpcenv: children lead their own process group (so a timeout
                    # can stop everything they started), so a SIGKILL of hpcenv's group
                    # would miss them, e.g. an orphaned `uv pip sync` writing into a build
                    # being cleaned
                    preexec_fn=preexec,  # noqa: PLW1509 - sigprocmask and prctl only
                    **streams,
                )
            )
    except FileNotFoundError as exc:
        raise CommandFailed(
            f"{argv[0]}: command not found (is it installed and on PATH?)", returncode=127
        ) from exc
    except BaseException:  # a stop signal held across the fork: the child goes too
        shutdown_all(started)
        raise
    return started[0]


def quote(args: Sequence[str | os.PathLike[str]]) -> str:
    """The command as a person would type it (for logs; never executed)."""
    return shlex.join(str(a) for a in args)


def shutdown(proc: subprocess.Popen[Any]) -> None:
    """Stop ``proc`` and every process of its session: SIGINT, then SIGTERM, then SIGKILL."""
    shutdown_all([proc])


def _sessions_members(sessions: set[int]) -> list[int] | None:
    """PIDs of the live (not zombie) processes in ``sessions``; None without /proc."""
    me = os.getpid()
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        # state ppid pgrp session ...
        if len(fields) > 3 and fields[0] not in (b"Z", b"X") and int(fields[3]) in sessions:
            members.append(int(name))
    return members


def _signal_sessions(procs: Sequence[subprocess.Popen[Any]], sig: signal.Signals) -> bool:
    """Send ``sig`` to every process of the children's sessions; False: none was left."""
    for p in procs:
        p.poll()  # reap a leader that exited, so it no longer counts
    members = _sessions_members({p.pid for p in procs})
    if members is None:  # no /proc: the process groups the children lead
        alive = False
        for p in procs:
            try:
                os.killpg(p.pid, sig)
                alive = True
            except (ProcessLookupError, PermissionError):
                continue
        return alive
    for pid in members:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue
    return bool(members)


def _sessions_empty(procs: Sequence[subprocess.Popen[Any]]) -> bool:
    for p in procs:
        p.poll()
    members = _sessions_members({p.pid for p in procs})
    if members is None:
        return all(p.poll() is not None for p in procs)
    return not members


def shutdown_all(procs: Sequence[subprocess.Popen[Any]]) -> None:
    """Stop several children and everything in their sessions together, escalating
    SIGINT -> SIGTERM -> SIGKILL until no process of those sessions is left.

    All get each signal at once, so stopping N hung ranks takes as long as stopping
    one; nothing is waited for when nothing is left. Each child must lead its own
    session (``start_new_session``, as ``spawn`` and ``run`` do). Ctrl-C, SIGTERM and
    SIGHUP are held back meanwhile, so a second one cannot cut the shutdown short.
    """
    if not procs:
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        for sig, wait in SHUTDOWN_STEPS:
            if not _signal_sessions(procs, sig):
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and not _sessions_empty(procs):
                time.sleep(0.05)
        for p in procs:  # reap; after SIGKILL this returns at once
            try:
                p.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                continue
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def spawn(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    inherit_output: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``args`` in its own process group without waiting (for parallel ranks).

    Output goes to the given files (never to pipes nobody drains), else is
    discarded, or with ``inherit_output`` goes where ours goes. Stop it with
    ``shutdown_all``. Raises ``CommandFailed`` (127) when the program does not exist.
    """
    from hpcenv.utils import fsio  # only here: `hpcenv facts` should not pay for it

    argv = tuple(str(a) for a in args)
    default = None if inherit_output else subprocess.DEVNULL
    out = fsio.open_new(stdout) if stdout is not None else default
    try:
        err = fsio.open_new(stderr) if stderr is not None else default
    except BaseException:
        if isinstance(out, int) and out != subprocess.DEVNULL:
            os.close(out)
        raise
    try:
        return _popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    finally:  # the child holds its own copies of the descriptors
        for fd in (out, err):
            if isinstance(fd, int) and fd != subprocess.DEVNULL:
                os.close(fd)


def filter_pipe(
    args: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start the filter ``args`` (``grep``) with pipes to its stdin and from its stdout,
    which the caller feeds (from a thread) and drains; its stderr is discarded. Stop it
    with ``shutdown`` when the caller leaves early."""
    argv = tuple(str(a) for a in args)
    return _popen(
        argv, env=env, cwd=None, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    log: IO[str] | None = None,
    stdin_text: str | None = None,
) -> Completed:
    """Run ``args`` and capture its output.

    ``env`` replaces the environment when given. ``log`` receives the quoted
    command line and, afterwards, the output. Raises ``CommandFailed`` on a
    non-zero exit (``check``) or a timeout, and ``Interrupted`` on Ctrl-C.
    """
    argv = tuple(str(a) for a in args)
    if log is not None:
        log.write(f"$ {quote(argv)}\n")
        log.flush()
    start = time.monotonic()
    proc = _popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    streams = [_Capture(proc.stdout), _Capture(proc.stderr)]
    try:
        if stdin_text is not None and proc.stdin is not None:
            _feed(proc.stdin, stdin_text)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        shutdown(proc)
        out, err = (c.text() for c in streams)
        raise CommandFailed(
            f"{quote(argv)} did not finish within {timeout:g} s and was stopped",
            returncode=124,
            output=out + err,
        ) from exc
    except KeyboardInterrupt as exc:
        shutdown(proc)
        raise Interrupted("interrupted; the command was stopped") from exc
    stdout, stderr = (c.text() for c in streams)
    seconds = time.monotonic() - start
    if log is not None:
        log.write(stdout)
        log.write(stderr)
        log.write(f"# exit {proc.returncode} after {seconds:.2f} s\n")
        log.flush()
    done = Completed(
        args=argv, returncode=proc.returncode, stdout=stdout, stderr=stderr, seconds=seconds
    )
    if check and proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-1:] or [""]
        raise CommandFailed(
            f"{Path(argv[0]).name} exited with {proc.returncode}: {tail[0]}",
            returncode=proc.returncode,
            output=stdout + stderr,
        )
    return done


def _feed(pipe: IO[bytes], text: str) -> None:
    """Write ``text`` to a child's stdin from a thread (a child that does not read it
    cannot block us past the timeout), then close it."""

    def write() -> None:
        try:
            pipe.write(text.encode())
            pipe.close()
        except OSError:  # the child exited without reading it all
            return

    threads.start(write)


class _Capture:
    """Reads one pipe of a child in a thread, keeping the last ``MAX_CAPTURE`` bytes."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._kept = 0
        self.dropped = 0
        self._thread = threads.start(lambda: self._read(pipe))

    def _read(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        with pipe:
            while chunk := pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16):
                self._chunks.append(chunk)
                self._kept += len(chunk)
                while self._kept - len(self._chunks[0]) >= MAX_CAPTURE:
                    gone = self._chunks.popleft()
                    self._kept -= len(gone)
                    self.dropped += len(gone)

    def text(self) -> str:
        """What was kept, decoded (bad bytes replaced), after the pipe closed (or after
        a few seconds: a descendant that escaped the shutdown may hold it open)."""
        self._thread.join(timeout=5.0)
        data = b"".join(list(self._chunks))
        note = f"[... {self.dropped} bytes of output not kept ...]\n" if self.dropped else ""
        return note + data.decode("utf-8", errors="replace")


def become(executable: str, argv: Sequence[str], env: Mapping[str, str]) -> NoReturn:
    """Replace this process by ``argv`` (``os.execve``; ``hpcenv run``): its exit code
    and every signal sent to this PID are then the program's own. Raises ``OSError``
    when it cannot be started. Nothing buffered is lost: hpcenv's output goes through
    the exits (``commands.print_text``...), which flush what they write. The program
    runs with the user's own umask (``modes.restore_umask``): what it writes is its own
    business, not hpcenv's."""
    from hpcenv.utils import modes

    modes.restore_umask()
    os.execve(executable, list(argv), dict(env))


def run_parallel(
    commands: Sequence[Sequence[str | os.PathLike[str]]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    log: IO[str] | None = None,
) -> list[Completed]:
    """Run ``commands`` at the same time and wait for all (like ``run(check=False)``).

    Output goes to temporary files, not pipes, so no child blocks on a full pipe while
    we wait on another. One deadline for all: past it every process group is stopped
    and ``CommandFailed`` (124) raised; Ctrl-C stops them and raises ``Interrupted``.
    """
    from hpcenv.utils import fsio  # only here: `hpcenv facts` should not pay for it

    argvs = [tuple(str(a) for a in c) for c in commands]
    start = time.monotonic()
    with fsio.work_dir("hpcenv-run-") as tmp:
        outs = [(tmp / f"{i}.out", tmp / f"{i}.err") for i in range(len(argvs))]
        procs: list[subprocess.Popen[Any]] = []
        try:
            for argv, (out, err) in zip(argvs, outs, strict=True):
                if log is not None:
                    log.write(f"$ {quote(argv)} &\n")
                procs.append(spawn(argv, env=env, cwd=cwd, stdout=out, stderr=err))
            for p in procs:
                left = None if timeout is None else max(0.0, start + timeout - time.monotonic())
                p.wait(timeout=left)
        except subprocess.TimeoutExpired as exc:
            shutdown_all(procs)
            raise CommandFailed(
                f"{len(argvs)} commands did not finish within {timeout:g} s and were stopped",
                returncode=124,
            ) from exc
        except KeyboardInterrupt as exc:
            shutdown_all(procs)
            raise Interrupted("interrupted; the commands were stopped") from exc
        except BaseException:
            shutdown_all(procs)
            raise
        seconds = time.monotonic() - start
        done = []
        for argv, p, (out, err) in zip(argvs, procs, outs, strict=True):
            stdout = fsio.read_tail(out, MAX_CAPTURE)
            stderr = fsio.read_tail(err, MAX_CAPTURE)
            if log is not None:
                log.write(stdout + stderr + f"# exit {p.returncode} ({argv[0]} ...)\n")
            done.append(
                Completed(
                    args=argv,
                    returncode=int(p.returncode),
                    stdout=stdout,
                    stderr=stderr,
                    seconds=seconds,
                )
            )
    if log is not None:
        log.flush()
    return done
