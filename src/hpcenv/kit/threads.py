"""Threads that never take a stop signal: only hpcenv's main thread handles one.

Linux gives a signal sent to a process to any of its threads that does not block it.
hpcenv's main thread blocks SIGINT, SIGTERM and SIGHUP across each fork
(``children.stop_signals_held``), so that its handler (``cli._interrupt``) cannot run
inside an at-fork hook, where CPython ignores what a handler raises. A helper thread that
leaves them unblocked takes the signal instead, and CPython then runs the Python handler in
the main thread at its next bytecode: inside the hook after all ("Exception ignored ...
Traceback", the stop lost) or inside a cleanup, which it cut short (a work directory left
in $TMPDIR). Both were seen in CI while a build hashed files in threads beside its import
check, and rich's spinner is such a thread too. So every thread hpcenv starts is started
while its creator blocks the stop signals, and a new thread keeps the mask it was born with.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from hpcenv.kit.children import STOP_SIGNALS

T = TypeVar("T")
R = TypeVar("R")


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block ``STOP_SIGNALS`` in this thread for the block; threads started inside keep
    them blocked for good. One that arrived meanwhile is handled as the block ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def start(target: Callable[[], object], *, daemon: bool = True) -> threading.Thread:
    """Start ``target`` in a thread that never takes a stop signal."""
    thread = threading.Thread(target=target, daemon=daemon)
    with stop_signals_blocked():
        thread.start()
    return thread


class Beside(Generic[T]):
    """``fn()`` running in a thread beside the caller; ``result()`` waits for it and returns
    what it returned or raises what it raised."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = start(self._run, daemon=False)

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error


def map_threads(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    stop: threading.Event | None = None,
) -> list[R]:
    """``[fn(item) for item in items]``, ``workers`` threads at a time, in ``items``' order.

    The first exception raised by ``fn`` ends the work (no thread takes a new item) and is
    raised here once all threads ended; so is a stop signal arriving meanwhile, after
    ``stop`` (when given) was set for ``fn`` to see."""
    results: list[R | None] = [None] * len(items)
    errors: list[BaseException] = []
    halt = stop if stop is not None else threading.Event()
    taken = iter(range(len(items)))
    lock = threading.Lock()

    def work() -> None:
        while not halt.is_set() and not errors:
            with lock:
                i = next(taken, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # handed to the caller
                errors.append(exc)
                return

    count = max(1, min(workers, len(items)))
    pool = [threading.Thread(target=work, daemon=True) for _ in range(count)]
    try:
        with stop_signals_blocked():
            for thread in pool:
                thread.start()
        for thread in pool:
            thread.join()
    except BaseException:  # a stop signal in the main thread: the workers end at their next item
        halt.set()
        for thread in pool:
            if thread.is_alive():
                thread.join()
        raise
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]  # every slot was filled
