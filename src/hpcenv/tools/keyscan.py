"""The lines of a log that hold one of several literal keys, found in one pass.

A job log can be a gigabyte, with lines of any length (a progress bar without a newline,
a hostile log of one 512 MB line). ``scan_file`` reads it once, in blocks: every line is
cut to ``MAX_LINE`` bytes (the rest skipped up to its newline, and the line marked
``cut``), so memory is bounded by a block and the work is linear in the log, however long
its longest line. All keys are searched at once: by GNU ``grep -F`` where it is on PATH
(fed the cut lines through a pipe, so it never holds more than ``MAX_LINE`` of a line
either), else by one compiled alternation of the keys (``scan_blocks``, pure, the same
answers). A line holding a key of ``after`` (the first line of a multi-line summary)
also carries that many of the lines that follow it (at most ``TAIL`` bytes of them).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import re
import shutil
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

from hpcenv.kit import threads
from hpcenv.tools import command
from hpcenv.utils.errors import CommandFailed

#: The most of one line kept; a longer line is cut there and marked.
MAX_LINE = 1 << 20
#: Bytes kept after the last line handled in a block, for the lines a summary reads.
TAIL = 256 << 10
#: Bytes read at once.
BLOCK = 8 << 20


@dataclass(frozen=True, kw_only=True)
class Found:
    number: int  # 1-based
    text: str  # the line (its first MAX_LINE bytes), decoded, bad bytes replaced
    after: tuple[str, ...] = ()  # the lines that follow (a multi-line summary)
    cut: bool = False  # the line was longer than MAX_LINE


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


@functools.lru_cache(maxsize=8)
def _alternation(keys: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """One search for all keys (the longest first, so none hides a longer one)."""
    ordered = sorted(set(keys), key=len, reverse=True)
    return re.compile(b"|".join(re.escape(k) for k in ordered))


def _after_count(line: bytes, after: Mapping[bytes, int]) -> int:
    return max((n for key, n in after.items() if key in line), default=0)


def _following(buf: bytes, pos: int, count: int, max_line: int) -> tuple[str, ...]:
    """Up to ``count`` lines of ``buf`` after the newline at ``pos``, up to the first
    line longer than ``max_line`` (its head the last)."""
    out: list[str] = []
    while count and pos < len(buf) - 1:
        start = pos + 1
        end = buf.find(b"\n", start)
        end = len(buf) if end == -1 else end
        out.append(_decode(buf[start : min(end, start + max_line)]))
        if end - start >= max_line:  # a summary ends at a line cut (or as long)
            break
        pos, count = end, count - 1
    return tuple(out)


def scan_blocks(
    blocks: Iterable[bytes],
    keys: Sequence[bytes],
    after: Mapping[bytes, int] | None = None,
    *,
    max_line: int = MAX_LINE,
    tail: int = TAIL,
) -> Iterator[Found]:
    """The lines of the log given as ``blocks`` that hold a key, with their numbers
    (pure: one compiled alternation per block; the answer of ``scan_file`` without grep)."""
    rx = _alternation(tuple(keys))
    after = after or {}
    number, buf = 1, b""
    skipping: bytes | None = None  # the kept head of an over-long line, its rest skipped
    for block in chain(blocks, [None]):
        eof = block is None
        data = block or b""
        if skipping is not None:
            nl = data.find(b"\n")
            if nl == -1 and not eof:
                continue
            if rx.search(skipping):
                yield Found(number=number, text=_decode(skipping), cut=True)
            number, skipping = number + 1, None
            data = b"" if nl == -1 else data[nl + 1 :]
        buf += data
        last = buf.rfind(b"\n")
        if not eof and len(buf) - (last + 1) > max_line:  # a line longer than max_line
            end = last + 1
            head = buf[end : end + max_line]
        else:
            end = len(buf) if eof else buf.rfind(b"\n", 0, max(0, len(buf) - tail)) + 1
            head = None
        number = yield from _hits(buf, end, rx=rx, after=after, number=number, max_line=max_line)
        buf = b"" if head is not None else buf[end:]
        skipping = head


def _hits(
    buf: bytes,
    end: int,
    *,
    rx: re.Pattern[bytes],
    after: Mapping[bytes, int],
    number: int,
    max_line: int,
) -> Generator[Found, None, int]:
    """The lines of ``buf[:end]`` (whole lines) that hold a key; returns the number of
    the line at ``end``."""
    pos = 0
    while m := rx.search(buf, pos, end):
        start = buf.rfind(b"\n", pos, m.start()) + 1 or pos
        number += buf.count(b"\n", pos, start)
        stop = buf.find(b"\n", m.end(), end)
        stop = end if stop == -1 else stop
        line = buf[start : min(stop, start + max_line)]
        if m.end() - start > max_line and not rx.search(line):  # only the head counts
            pos, number = min(stop + 1, end), number + (1 if stop < end else 0)
            if stop >= end:
                return number
            continue
        cut = stop - start > max_line
        more = _after_count(line, after) if after and not cut else 0
        yield Found(
            number=number, text=_decode(line), cut=cut,
            after=_following(buf, stop, more, max_line) if more else (),
        )  # fmt: skip
        pos = min(stop + 1, end)
        number += 1 if stop < end else 0
        if stop >= end:
            return number
    return number + buf.count(b"\n", pos, end)


# --- the same through grep -----------------------------------------------------------


@functools.cache
def _grep() -> str | None:
    """GNU grep's path (its -F -n -b -a), else None (the pure scan is used)."""
    path = shutil.which("grep")
    if path is None:
        return None
    try:
        done = command.run([path, "--version"], timeout=10, check=False)
    except Exception:  # any failure means: not usable
        return None
    return path if done.returncode == 0 and "GNU grep" in done.stdout else None


@dataclass
class _Cuts:
    """Where ``_bounded`` cut lines: each cut line's number and its start in the stream
    it wrote, and the bytes removed up to each cut's end (a stream offset to the file's)."""

    lines: list[int]
    starts: list[int]
    removed: list[int]  # cumulative, after each cut


def _bounded(
    fd: int, max_line: int, cuts: _Cuts, progress: Callable[[int], None] | None
) -> Iterator[bytes]:
    """The bytes of ``fd`` with every line cut to ``max_line`` bytes (each cut recorded
    in ``cuts``): linear, one block in memory. Lines are checked ``max_line`` bytes at a
    time (the last newline of each window), not one by one."""
    out = removed = partial = seen = lines = 0  # partial: bytes of the current line out
    skipping = False
    while block := os.read(fd, BLOCK):
        n = len(block)
        seen += n
        if progress:
            progress(seen)
        pos = start = 0
        if skipping:
            nl = block.find(b"\n")
            removed += n if nl == -1 else nl
            cuts.removed[-1] = removed
            if nl == -1:
                continue
            skipping, partial, pos, start = False, 0, nl + 1, nl
        while pos < n:
            limit = max_line - partial
            nl = block.rfind(b"\n", pos, pos + limit + 1)
            if nl != -1:
                pos, partial = nl + 1, 0
                continue
            if pos + limit >= n:  # the line goes on in the next block
                partial += n - pos
                break
            cut = pos + limit
            cuts.starts.append(out + (pos - start) - partial)
            cuts.lines.append(lines + block.count(b"\n", start, pos) + 1)
            out += cut - start
            lines += block.count(b"\n", start, cut)
            yield block[start:cut]
            nl = block.find(b"\n", cut)
            removed += (n if nl == -1 else nl) - cut
            cuts.removed.append(removed)
            if nl == -1:
                skipping, start = True, n
                break
            pos, start, partial = nl + 1, nl, 0
        if start < n:
            out += n - start
            lines += block.count(b"\n", start)
            yield block[start:] if start else block


def scan_file(
    fd: int,
    keys: Sequence[bytes],
    after: Mapping[bytes, int] | None = None,
    *,
    max_line: int = MAX_LINE,
    progress: Callable[[int], None] | None = None,
    cut_lines: list[int] | None = None,
    use_grep: bool = True,
) -> Iterator[Found]:
    """The lines of the open regular file ``fd`` (from its offset to its end) that hold a
    key, as ``scan_blocks`` finds them: by GNU grep where it is on PATH, else in Python.
    ``progress`` gets the bytes read so far; ``cut_lines`` the numbers of the lines
    longer than ``max_line`` (with a key or not)."""
    cuts = _Cuts(lines=[] if cut_lines is None else cut_lines, starts=[], removed=[])
    grep = _grep() if use_grep else None
    if grep is None:
        stream = _bounded(fd, max_line, cuts, progress)
        known: set[int] = set()
        for found in scan_blocks(stream, keys, after, max_line=max_line):
            known.update(cuts.lines[len(known) :])
            cut = found.number in known
            yield Found(number=found.number, text=found.text, cut=cut,
                        after=() if cut else found.after)  # fmt: skip
        return
    yield from _grep_scan(
        grep, fd, keys=keys, after=after or {}, max_line=max_line, progress=progress, cuts=cuts
    )


def _read_following(fd: int, offset: int, count: int, max_line: int) -> tuple[str, ...]:
    """``_following`` of the file at ``offset`` (the newline ending a line): 64 KiB read
    first, up to ``TAIL`` only when the lines asked for go on past it."""
    size = min(64 << 10, TAIL)
    while True:
        data = os.pread(fd, size, offset)
        whole = data if len(data) < size else data[: data.rfind(b"\n") + 1]  # no half line
        lines = _following(whole, 0, count, max_line)
        if len(lines) >= count or len(data) < size or size >= TAIL:
            return (
                lines if size < TAIL or len(data) < size else _following(data, 0, count, max_line)
            )
        size = TAIL


def _grep_scan(
    grep: str,
    fd: int,
    *,
    keys: Sequence[bytes],
    after: Mapping[bytes, int],
    max_line: int,
    progress: Callable[[int], None] | None,
    cuts: _Cuts,
) -> Iterator[Found]:
    base = os.lseek(fd, 0, os.SEEK_CUR)
    args = [grep, "-a", "-n", "-b", "-F"]
    for key in keys:
        args += ["-e", key.decode("utf-8", "surrogateescape")]
    proc = command.filter_pipe(args, env={**os.environ, "LC_ALL": "C"})
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None

    def feed() -> None:
        try:
            for chunk in _bounded(fd, max_line, cuts, progress):
                stdin.write(chunk)
        except (OSError, ValueError):  # grep is gone (the reader left early)
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    feeder = threads.start(feed)
    done = False
    try:
        for raw in stdout:
            number, offset, line = raw.rstrip(b"\n").split(b":", 2)
            at = int(offset)
            i = bisect.bisect_left(cuts.starts, at)
            cut = i < len(cuts.starts) and cuts.starts[i] == at
            more = 0 if cut or not after else _after_count(line, after)
            following: tuple[str, ...] = ()
            if more:
                shift = cuts.removed[i - 1] if i else 0
                following = _read_following(fd, base + at + shift + len(line), more, max_line)
            yield Found(number=int(number), text=_decode(line), cut=cut, after=following)
        done = True
    finally:
        if not done:
            stdout.close()
            command.shutdown(proc)
        feeder.join()
        proc.wait()
    if proc.returncode not in (0, 1):
        raise CommandFailed(
            f"grep failed ({proc.returncode}) while reading a log", returncode=proc.returncode
        )
