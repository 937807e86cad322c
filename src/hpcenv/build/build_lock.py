"""One build of an environment at a time: an fcntl lock file next to it.

``venvs/<profile>.lock`` is locked with ``flock`` (works across processes on one
host, and on the shared filesystems HPC sites use for home and project space
where they support it). The holder writes its pid, host and start time into the
file, so a second build that gives up after its timeout can say who holds it.
The kernel drops the lock when the holder dies, even by SIGKILL: no stale locks.

The file is opened through ``fsio.open_lock``: never through a symlink (a planted
``local.lock -> ~victim/.bashrc`` is refused, not truncated), created with the umask's
mode (group-writable under ``umask 002``, so the rest of a group can build), and a lock
file another user made read-only is still locked (``flock`` needs no write access),
only without the holder note.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, Busy

#: Seconds a build waits for another build of the same environment by default.
DEFAULT_TIMEOUT = 900.0
POLL = 0.2


def default_timeout() -> float:
    value = os.environ.get("HPCENV_LOCK_TIMEOUT")
    try:
        timeout = float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        timeout = math.nan
    if not (math.isfinite(timeout) and timeout >= 0):
        raise BadInput(
            f"HPCENV_LOCK_TIMEOUT={value!r} is not a number of seconds (0 or more); fix or unset it"
        )
    return timeout


def holder(path: Path) -> str:
    """Who holds the lock, as written by them (``pid 123 on host since ...``)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(4096) or b"{}")
    except (OSError, ValueError, RecursionError):
        return "unknown process"
    if not isinstance(data, dict):
        return "unknown process"
    return (
        f"pid {data.get('pid', '?')} on {data.get('host', '?')} "
        f"since {data.get('since', '?')} ({data.get('what', 'build')})"
    )


@contextmanager
def hold(path: Path, *, timeout: float | None = None, what: str = "build") -> Iterator[None]:
    """Hold the lock at ``path``; wait up to ``timeout`` s, then raise ``Busy``."""
    timeout = default_timeout() if timeout is None else timeout
    fd, writable = fsio.open_lock(path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Busy(
                        f"{path.name}: another build of this environment is running "
                        f"({holder(path)}); waited {timeout:g} s. Wait for it to finish, or "
                        f"raise HPCENV_LOCK_TIMEOUT"
                    ) from None
                time.sleep(POLL)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "what": what,
        }
        if writable:  # who holds it, for a waiting build's message; a full disk may refuse
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield
        finally:
            if writable:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
