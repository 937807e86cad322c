"""``hpcenv explain JOBID`` believes only the logs that are yours (issue 42, cases 07
and 15): a log found by the job id in a log directory others may write is read through
``fsio.open_trusted`` (no link followed, a regular file, owned by you or root, writable
by nobody else); one a neighbour planted is left out and said. An over-long JOBID or
--log-dir is bad input (exit 2, one line), not an unknown failure (exit 1).

Before: a neighbour's ``0-<jobid>.out`` sorted first and its cause was named, exit 0
(07); a JOBID or --log-dir of 5,000 characters exited 1 (15). The neighbour is a real
second user (``nobody``, uid 65534) owning the planted file; the test runs as root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support import REPO, require

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.02 GiB is free.\n"
)
PLANTED = "ModuleNotFoundError: No module named 'the_neighbours_story'\n"


def _explain(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hpcenv", "explain", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=60, check=False)


def test_a_log_a_neighbour_planted_for_your_job_id_is_left_out_and_said(tmp_path: Path) -> None:
    require("root", os.geteuid() == 0, "giving a file to another user needs root")
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o2775)  # a group's log directory (setgid, group-writable, no sticky bit)
    (logs / "hpcenv-local-train-77.out").write_text("step 1\n" + OOM)
    planted = logs / "0-77.out"  # sorts before yours
    planted.write_text(PLANTED)
    os.chown(planted, 65534, 65534)
    (logs / "1-77.err").symlink_to(logs / "hpcenv-local-train-77.out")  # a link: never read
    writable = logs / "2-77.err"
    writable.write_text(PLANTED)
    writable.chmod(0o666)
    done = _explain("77", "--log-dir", str(logs), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    assert found["cause_id"] == "cuda_oom", found
    assert found["evidence"]["file"].endswith("hpcenv-local-train-77.out")
    notes = " ".join(found["notes"])
    assert "0-77.out: log is owned by nobody, not by you" in notes
    assert "1-77.err: log is a symlink" in notes
    assert "2-77.err: log is writable by others" in notes
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "0-78.out").write_text(PLANTED)
    os.chown(alone / "0-78.out", 65534, 65534)
    refused = _explain("78", "--log-dir", str(alone))
    assert refused.returncode == 2 and "owned by nobody" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_an_over_long_job_id_or_log_dir_is_bad_input_in_one_line(tmp_path: Path) -> None:
    for argv in (
        ["7" * 5000],
        ["4" * 300],
        ["x" * 300],
        ["4242", "--log-dir", "d" * 5000],
        ["4242", "--log-dir", "d" * 300],
    ):
        done = _explain(*argv, cwd=tmp_path)
        assert done.returncode == 2, (argv[0][:10], done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert len(done.stderr) < 400 and "Traceback" not in done.stderr
