"""The one place hpcenv starts subprocesses.

Commands are argument lists, never shell strings. ``run`` logs the shlex-quoted
command, enforces a timeout, raises ``CommandFailed`` with the exit code, and on
Ctrl-C or timeout shuts the child's whole process group down in escalating steps
(SIGINT, SIGTERM, SIGKILL).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hpcenv.errors import CommandFailed, Interrupted
from hpcenv.kit.children import die_with

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
    """The one ``Popen``: argument list, own process group, dies with hpcenv."""
    try:
        return subprocess.Popen(  # noqa: S603 - argument list, never a shell
            argv,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            # dies with hpcenv: children lead their own process group (so a timeout can
            # stop everything they started), so a SIGKILL of hpcenv's group would miss
            # them, e.g. an orphaned `uv pip sync` writing into a build being cleaned
            preexec_fn=die_with(os.getpid()),  # noqa: PLW1509 - only prctl, async-signal-safe
            **streams,
        )
    except FileNotFoundError as exc:
        raise CommandFailed(
            f"{argv[0]}: command not found (is it installed and on PATH?)", returncode=127
        ) from exc


def quote(args: Sequence[str | os.PathLike[str]]) -> str:
    """The command as a person would type it (for logs; never executed)."""
    return shlex.join(str(a) for a in args)


def shutdown(proc: subprocess.Popen[Any]) -> None:
    """Stop ``proc`` and its process group: SIGINT, then SIGTERM, then SIGKILL."""
    shutdown_all([proc])


def shutdown_all(procs: Sequence[subprocess.Popen[Any]]) -> None:
    """Stop several process groups together, escalating SIGINT -> SIGTERM -> SIGKILL.

    All groups get each signal at once, so stopping N hung ranks takes as long as
    stopping one. Each process must lead its own group (``start_new_session``).
    """
    for sig, wait in SHUTDOWN_STEPS:
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            return
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(p.poll() is None for p in alive):
            time.sleep(0.05)
    for p in procs:  # reap; after SIGKILL this returns at once
        try:
            p.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            continue


def spawn(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``args`` in its own process group without waiting (for parallel ranks).

    Output goes to the given files (never to pipes nobody drains), else is
    discarded. Stop it with ``shutdown_all``. Raises ``CommandFailed`` (127) when the
    program does not exist.
    """
    argv = tuple(str(a) for a in args)
    out = open(stdout, "wb") if stdout is not None else subprocess.DEVNULL  # noqa: SIM115
    err = open(stderr, "wb") if stderr is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return _popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    finally:  # the child holds its own copies of the descriptors
        for f in (out, err):
            if not isinstance(f, int):
                f.close()


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
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(input=stdin_text, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        shutdown(proc)
        out, err = proc.communicate()
        raise CommandFailed(
            f"{quote(argv)} did not finish within {timeout:g} s and was stopped",
            returncode=124,
            output=(out or "") + (err or ""),
        ) from exc
    except KeyboardInterrupt as exc:
        shutdown(proc)
        raise Interrupted("interrupted; the command was stopped") from exc
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
    import tempfile  # only here: `hpcenv facts` should not pay for it

    argvs = [tuple(str(a) for a in c) for c in commands]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hpcenv-run-") as tmp:
        outs = [(Path(tmp) / f"{i}.out", Path(tmp) / f"{i}.err") for i in range(len(argvs))]
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
            stdout = out.read_text(errors="replace")
            stderr = err.read_text(errors="replace")
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
