"""One build of an environment at a time: an fcntl lock file next to it.

``venvs/<profile>.lock`` is locked with ``flock`` (works across processes on one
host, and on the shared filesystems HPC sites use for home and project space
where they support it). The holder writes its pid, host and start time into the
file, so a second build that gives up after its timeout can say who holds it.
The kernel drops the lock when the holder dies, even by SIGKILL: no stale locks.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hpcenv.errors import Busy

#: Seconds a build waits for another build of the same environment by default.
DEFAULT_TIMEOUT = 900.0
POLL = 0.2


def default_timeout() -> float:
    value = os.environ.get("HPCENV_LOCK_TIMEOUT")
    try:
        return float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


def holder(path: Path) -> str:
    """Who holds the lock, as written by them (``pid 123 on host since ...``)."""
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "unknown process"
    return (
        f"pid {data.get('pid', '?')} on {data.get('host', '?')} "
        f"since {data.get('since', '?')} ({data.get('what', 'build')})"
    )


@contextmanager
def hold(path: Path, *, timeout: float | None = None, what: str = "build") -> Iterator[None]:
    """Hold the lock at ``path``; wait up to ``timeout`` s, then raise ``Busy``."""
    timeout = default_timeout() if timeout is None else timeout
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
