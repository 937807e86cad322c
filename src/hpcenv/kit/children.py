"""Child processes that die with their parent, and helper processes a probe runs side by
side until a deadline.

``die_with(parent)`` is the one ``preexec_fn`` of hpcenv (``hpcenv.tools.command``) and of
the probes: Linux SIGKILLs the child when the parent dies (PR_SET_PDEATHSIG), which
covers a parent killed on its own (not its process group, e.g. by the OOM killer).
The fork race is handled too: a parent that died between ``fork`` and ``prctl`` has
already orphaned the child, which then exits at once instead of running unowned.

``stop_signals_held()`` is how both fork: SIGINT, SIGTERM and SIGHUP are blocked across
``Popen``. A Python ``preexec_fn`` makes CPython run the at-fork hooks in the parent
(logging's lock release is one); a signal handler that raises while a hook runs is
"ignored", so hpcenv's stop (``cli._interrupt``) was lost and a SIGHUP'd build ran on to
exit 0 (seen once in CI). Held, the signal is handled when the block ends, after ``Popen``
returned, where the exception unwinds like anywhere else; the child unblocks them first.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None
try:  # resolved here, before any fork: the child must not run the dynamic loader
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


#: The signals that stop hpcenv (``cli._interrupt``, Ctrl-C), held across a fork.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def die_with(parent: int, *, mask: Iterable[int] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when process ``parent`` dies; with
    ``mask``, the child's signal mask is set to it first (the parent's before holding).

    Only ``sigprocmask``, ``prctl`` and ``getppid`` run in the forked child
    (async-signal-safe).
    """
    restore = None if mask is None else set(mask)

    def preexec() -> None:
        if restore is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, restore)
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: do not run orphaned
            os._exit(1)

    return preexec


@contextlib.contextmanager
def stop_signals_held() -> Iterator[Callable[[], None]]:
    """Block ``STOP_SIGNALS`` for the block (see the module's docstring); yields the
    ``preexec_fn`` to start children with. One that arrived meanwhile is handled as the
    block ends (``signal.pthread_sigmask`` runs pending handlers), so a caller keeps the
    child it started inside the block, to stop it, before that exception reaches it."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # raises here: nothing held yet
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        yield die_with(os.getpid(), mask=before)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@dataclass(frozen=True, kw_only=True)
class Child:
    """How one helper process ended: exit code (negative: killed by that signal)."""

    argv: list[str]
    pid: int
    returncode: int
    output: str
    timed_out: bool


def run_children(
    commands: Sequence[tuple[Sequence[str], Mapping[str, str]]],
    until: float,
    *,
    term_grace_s: float = 5.0,
) -> list[Child]:
    """Run helper processes side by side until all exit or ``until`` (monotonic) passes.

    Those still running then get SIGTERM, and SIGKILL ``term_grace_s`` later. They stay
    in the caller's process group, so the runner's timeout (which stops the group) stops
    them too, and they die with the caller (``die_with``): none is left holding a GPU.
    stdout and stderr go to one temporary file each (no pipe to fill up and block).
    """
    import tempfile  # here: hpcenv.tools.command imports this module, `hpcenv facts` must not pay

    procs: list[subprocess.Popen[bytes]] = []
    late: list[bool] = []
    with contextlib.ExitStack() as stack:
        files: list[IO[bytes]] = []
        try:
            for argv, env in commands:
                out = stack.enter_context(tempfile.TemporaryFile())
                files.append(out)
                with stop_signals_held() as preexec:  # a stop then reaches the finally below
                    procs.append(
                        subprocess.Popen(  # noqa: S603 - an argument list, never a shell
                            [str(a) for a in argv],
                            env=dict(env),
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            preexec_fn=preexec,  # noqa: PLW1509 - sigprocmask and prctl only
                        )
                    )
            while time.monotonic() < until and any(p.poll() is None for p in procs):
                time.sleep(0.05)
        finally:
            late = [p.poll() is None for p in procs]
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            grace = time.monotonic() + term_grace_s
            while time.monotonic() < grace and any(p.poll() is None for p in procs):
                time.sleep(0.05)
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        children = []
        for (argv, _), p, was_late, f in zip(commands, procs, late, files, strict=True):
            f.seek(0)
            children.append(
                Child(
                    argv=[str(a) for a in argv],
                    pid=p.pid,
                    returncode=p.returncode,
                    output=f.read().decode(errors="replace"),
                    timed_out=was_late,
                )
            )
    return children
