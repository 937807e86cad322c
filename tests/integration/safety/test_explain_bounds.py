"""``hpcenv explain`` is linear in the longest line and bounded in memory for a line
without end (issue 42, cases 08 and 09): a line longer than ``keyscan.MAX_LINE`` is cut
there and said.

Before: one 1 MB line of repeated ``NCCL INFO `` ran past 60 s (quadratic: a pattern
with ``.*`` between two words); a 512 MB log without a newline peaked at 1,055 MB (the
partial line was carried from block to block)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from support import REPO

MiB = 1 << 20


def _explain(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hpcenv", "explain", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120, check=False)


def test_a_megabyte_line_of_one_key_repeated_takes_about_a_second(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"NCCL INFO " * (MiB // 10) + b"\n" + b"0: RuntimeError: boom\n")
    began = time.monotonic()
    done = _explain(str(log), "--json")
    took = time.monotonic() - began
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)
    assert found["evidence"]["line"] == 2 and found["evidence"]["rank"] == 0
    assert took < 15, took  # main: past 60 s


#: The peak RSS of a fresh Python that explains the log (``VmHWM``, its own memory).
PEAK = """
import sys
from pathlib import Path
from hpcenv.slurm import failure
found = failure.explain_files([Path(sys.argv[1])])
print(found.notes[-1])
print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))
"""


def test_a_log_without_a_newline_is_read_in_bounded_memory_and_the_cut_said(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.out"
    with log.open("wb") as fh:
        for _ in range(16):
            fh.write(b"NCCL INFO y " * (8 * MiB // 12))
        fh.write(b" RuntimeError: past the cut\n")
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(log)], capture_output=True, text=True, cwd=REPO,
        timeout=120, check=True,
    )  # fmt: skip
    note, peak_kib = done.stdout.strip().splitlines()
    assert f"{log}:1" in note and "read the first 1 MiB" in note
    assert int(peak_kib) / 1024 < 100, peak_kib  # main: over 200 MiB for these 128 MiB


def test_every_pattern_of_the_catalogue_is_linear_on_a_line_of_one_key_repeated() -> None:
    """The matcher meets a line of up to 1 MiB: a pattern with ``.*`` between two words
    is quadratic on a line of one of them repeated (case 08 was ``NCCL INFO .*\\bnranks``).
    Each pattern on 64 KiB of each key repeated: a quadratic one takes seconds."""
    from hpcenv.knowledge import failures

    catalog = failures.load()
    patterns = [*catalog.prefixes, *catalog.in_line, *catalog.world, *catalog.cascade,
                *catalog.unknown]  # fmt: skip
    patterns += [p for cause in catalog.causes for p in (*cause.patterns, *cause.fields)]
    if catalog.carries:
        patterns.append(catalog.carries)
    slow = []
    for key in catalog.keys:
        line = (key.decode() + " ") * (64 * 1024 // (len(key) + 1))
        for pattern in patterns:
            began = time.process_time()
            pattern.search(line)
            if (took := time.process_time() - began) > 0.5:
                slow.append(f"{pattern.pattern!r} on {key!r} repeated: {took:.1f} s")
    assert not slow, slow
