"""``hpcenv.kit.threads``: helper threads that never take a stop signal, and the map and
background runs built on them (RECORD hashing, tree removal, pair probes, facts)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from hpcenv.kit import threads

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _blocked_here() -> set[int]:
    line = next(
        ln
        for ln in Path("/proc/thread-self/status").read_text().splitlines()
        if ln.startswith("SigBlk:")
    )
    mask = int(line.split()[1], 16)
    return {s for s in STOPS if mask & (1 << (s - 1))}


def test_map_keeps_order_and_every_worker_blocks_the_stop_signals() -> None:
    def work(i: int) -> tuple[int, set[int]]:
        time.sleep(0.001 * (i % 3))  # finish out of order
        return i * i, _blocked_here()

    got = threads.map_threads(work, list(range(50)), 8)
    assert [square for square, _ in got] == [i * i for i in range(50)]
    assert all(blocked == set(STOPS) for _, blocked in got)
    assert _blocked_here() == set()  # the caller's own mask is back as it was


def test_map_raises_the_first_error_and_takes_no_new_item_after_it() -> None:
    done: list[int] = []

    def work(i: int) -> int:
        if i == 3:
            raise ValueError("item 3")
        time.sleep(0.01)
        done.append(i)
        return i

    with pytest.raises(ValueError, match="item 3"):
        threads.map_threads(work, list(range(200)), 2)
    assert len(done) < 20


def test_map_of_nothing_is_nothing() -> None:
    assert threads.map_threads(lambda i: i, [], 8) == []


def test_beside_returns_or_raises_what_its_function_did() -> None:
    assert threads.Beside(_blocked_here).result() == set(STOPS)

    def fails() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        threads.Beside(fails).result()


def test_start_runs_a_thread_that_blocks_the_stop_signals() -> None:
    seen: list[set[int]] = []
    threads.start(lambda: seen.append(_blocked_here())).join()
    assert seen == [set(STOPS)]
    assert threading.current_thread() is threading.main_thread()
