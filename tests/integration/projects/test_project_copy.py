"""What a project build copies: git-tracked files of a checkout (real git), else the
tree less tool output, sockets, FIFOs, devices and huge files, each kind said once
(a real UNIX socket and a real FIFO; before issue 21 a socket anywhere in the tree failed
the build after the whole install, with a raw Python list as the error)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from hpcenv.project.copy_tree import copy_project
from support import require


def make_tree(root: Path) -> Path:
    root.mkdir()
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "ckpt.bin").write_bytes(b"\0" * 4096)
    (root / ".git_not").mkdir()
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"x")
    os.mkfifo(root / "pipe")
    (root / "link.py").symlink_to("pkg/__init__.py")
    return root


def test_a_tree_outside_git_skips_sockets_fifos_and_huge_files(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "proj")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "run.sock"))
    try:
        done = copy_project(src, tmp_path / "copy", max_bytes=1024)
    finally:
        sock.close()
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["link.py", "pkg", "pkg/__init__.py", "setup.py"]
    assert (tmp_path / "copy" / "link.py").is_symlink()
    assert sorted(done.skipped) == [
        "not copied: 1 FIFOs (pipe)",
        "not copied: 1 files of 1024 bytes or more (ckpt.bin)",
        "not copied: 1 sockets (run.sock)",
    ]  # each kind said once; tool output (__pycache__) is never copied, never said


def test_a_git_checkout_copies_the_tracked_files_only(tmp_path: Path) -> None:
    git = shutil.which("git")
    require("git", git is not None, "git not on PATH")
    assert git is not None
    src = make_tree(tmp_path / "proj")
    run = {"cwd": src, "check": True, "capture_output": True}
    subprocess.run([git, "init", "-q"], **run)  # type: ignore[call-overload]
    subprocess.run([git, "add", "setup.py", "pkg/__init__.py", "link.py"], **run)  # type: ignore[call-overload]
    (src / "big-untracked.safetensors").write_bytes(b"\0" * 10)
    done = copy_project(src, tmp_path / "copy")
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["link.py", "pkg", "pkg/__init__.py", "setup.py"]
    assert done.files == 3 and done.skipped == ()
