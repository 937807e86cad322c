"""A progress line while hpcenv reads a large file (``hpcenv explain`` of a log over
``LARGE`` bytes): on a terminal one line redrawn at most a few times a second, in a pipe
a plain line at most every ``PIPE_EVERY`` seconds; nothing for a small file."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from hpcenv.utils.output import status_line

#: Files smaller than this read without a progress line.
LARGE = 100 << 20
#: Seconds between redraws on a terminal, between lines in a pipe.
TTY_EVERY = 0.25
PIPE_EVERY = 10.0


class ReadProgress:
    """``start(path, size)`` gives the callback a reader calls with the bytes read so far
    (None for a small file); on a terminal the line is cleared once the file is read."""

    def __init__(self, *, tty: bool | None = None, clock: Callable[[], float] = time.monotonic):
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._clock = clock

    def start(self, path: Path, size: int) -> Callable[[int], None] | None:
        if size < LARGE:
            return None
        every = TTY_EVERY if self.tty else PIPE_EVERY
        begun = self._clock()
        last = [begun]

        def tick(seen: int) -> None:
            now = self._clock()
            if now - last[0] < every and seen < size:
                return
            last[0] = now
            rate = seen / max(now - begun, 1e-6) / (1 << 20)
            status_line(
                f"reading {path}: {seen >> 20} of {size >> 20} MiB ({100 * seen // size} %, "
                f"{rate:.0f} MiB/s)", redraw=self.tty,
            )  # fmt: skip
            if seen >= size and self.tty:
                status_line("", redraw=True)  # the line goes when the file is read

        return tick
