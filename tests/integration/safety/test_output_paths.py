"""Every output hpcenv writes is a regular file (``fsio``): a FIFO, socket or device node
standing at the path is refused naming it, never replaced and never opened for a blocking
write. Before, ``--junit``/``--output``/``profile init --output ... --force`` replaced a
device node with a regular file (as root, ``/dev/null``) and ``--summary FIFO`` blocked
forever."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput
from support import FACTS, REPO, require

WRITERS: dict[str, Callable[[Path], object]] = {
    "write_text": lambda p: fsio.write_text(p, "x\n"),
    "write_json": lambda p: fsio.write_json(p, {"a": 1}),
    "append_text": lambda p: fsio.append_text(p, "x\n"),
    "open_new": lambda p: os.close(fsio.open_new(p)),
}


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _socket(tmp_path: Path) -> Path:
    path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the name stays
    return path


def _device(tmp_path: Path) -> Path:
    require("root", os.geteuid() == 0, "mknod of a character device needs root")
    path = tmp_path / "null"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    return path


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("make", [_fifo, _socket, _device], ids=["fifo", "socket", "device"])
def test_a_special_file_at_an_output_path_is_refused_untouched(
    tmp_path: Path, writer: str, make: Callable[[Path], Path]
) -> None:
    path = make(tmp_path)
    before = os.lstat(path)
    with pytest.raises(BadInput, match=r"is a (FIFO|socket|character device); hpcenv writes only"):
        WRITERS[writer](path)  # a FIFO nobody reads: returns at once, never blocks
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)  # not replaced


def test_a_fifo_with_a_reader_is_not_written_either(tmp_path: Path) -> None:
    path = _fifo(tmp_path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        for write in WRITERS.values():
            with pytest.raises(BadInput, match="is a FIFO"):
                write(path)
        assert os.read(reader, 10) == b""
    finally:
        os.close(reader)


def _hpcenv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", *args],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip


def test_profile_init_force_does_not_replace_a_device_node(tmp_path: Path) -> None:
    path = _device(tmp_path)
    gh200 = FACTS / "gh200-isambard.json"
    done = _hpcenv("profile", "init", "site", "--facts", str(gh200), "--output", str(path),
                   "--force")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith("give the path of a file"), done.stderr
    assert f"{path} is a character device" in done.stderr and done.stderr.count("\n") == 1
    assert stat.S_ISCHR(os.lstat(path).st_mode)
