"""``tools/keyscan``: the lines of a log that hold a key, in one pass, every line cut to
``MAX_LINE``: GNU grep fed through a pipe and the pure Python scan give the same lines,
numbers, summaries and cuts, however the log is split into blocks."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from hpcenv.knowledge import failures
from hpcenv.tools import keyscan
from support import REPO

CATALOG = failures.load()
DATA = REPO / "tests" / "data" / "failures"
WORDS = [b"Error x", b"ok", b"NCCL INFO a", b"Root Cause y", b"z" * 50, b"Traceback",
         b"\n", b"\n\n", b"xx" * 30, b"\r\n", "é".encode()]  # fmt: skip


def _file(tmp_path: Path, data: bytes, **kw: object) -> tuple[list[keyscan.Found], list[int]]:
    log = tmp_path / "job.out"
    log.write_bytes(data)
    cut: list[int] = []
    fd = os.open(log, os.O_RDONLY)
    try:
        found = list(keyscan.scan_file(fd, CATALOG.keys, CATALOG.after(), cut_lines=cut, **kw))  # type: ignore[arg-type]
    finally:
        os.close(fd)
    return found, cut


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_grep_python_and_any_split_find_the_same_lines_of_real_logs(
    tmp_path: Path, name: str
) -> None:
    data = (DATA / name).read_bytes() * 2
    with_grep, _ = _file(tmp_path, data)
    python, _ = _file(tmp_path, data, use_grep=False)
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    split = list(keyscan.scan_blocks(pieces, CATALOG.keys, CATALOG.after()))
    assert with_grep == python == split


def test_long_lines_are_cut_the_same_way_by_both_and_said(tmp_path: Path) -> None:
    rng = random.Random(42)
    for _ in range(60):
        data = b"".join(
            rng.choice(WORDS) + (b"\n" if rng.random() < 0.5 else b"")
            for _ in range(rng.randint(0, 60))
        )
        max_line = rng.choice([5, 16, 40])
        with_grep, cut = _file(tmp_path, data, max_line=max_line)
        python, cut_python = _file(tmp_path, data, max_line=max_line, use_grep=False)
        assert (with_grep, cut) == (python, cut_python), data
        assert cut == [i + 1 for i, line in enumerate(data.split(b"\n")) if len(line) > max_line]
        for found in with_grep:
            assert len(found.text) <= max_line
            assert found.cut == (found.number in cut)


def test_a_key_past_the_cut_of_a_line_is_not_read(tmp_path: Path) -> None:
    data = b"x" * 100 + b" RuntimeError: boom\nok\n"
    for use_grep in (True, False):
        found, cut = _file(tmp_path, data, max_line=64, use_grep=use_grep)
        assert (found, cut) == ([], [1])
