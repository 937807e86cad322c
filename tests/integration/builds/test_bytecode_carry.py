"""A new build takes over the bytecode of the build it replaces, only where the source is
the very same file (``venv_check.carry_bytecode``); Python's own check of each ``.pyc``
does the rest. Real CPython imports on small trees laid out as a venv's site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcenv.build import venv_check

TAG = sys.implementation.cache_tag  # cpython-311


def _site(venv: Path) -> Path:
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def _compile(site: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site)], check=True)


def test_only_bytecode_of_the_same_source_file_is_taken_over(tmp_path: Path) -> None:
    old, new = _site(tmp_path / "old"), _site(tmp_path / "new")
    (old / "pkg").mkdir()
    (new / "pkg").mkdir()
    (old / "pkg" / "same.py").write_text("VALUE = 'from the cache'\n")
    os.link(old / "pkg" / "same.py", new / "pkg" / "same.py")  # uv links one cache entry
    (old / "pkg" / "other.py").write_text("VALUE = 'old'\n")
    (new / "pkg" / "other.py").write_text("VALUE = 'new'\n")  # a new version: another file
    _compile(old)

    carried = venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new")

    assert carried == 1
    same = new / "pkg" / "__pycache__" / f"same.{TAG}.pyc"
    assert same.stat().st_ino == (old / "pkg" / "__pycache__" / f"same.{TAG}.pyc").stat().st_ino
    assert not (new / "pkg" / "__pycache__" / f"other.{TAG}.pyc").exists()
    assert same.stat().st_mode & 0o222 == 0  # shared by both builds: read-only
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pkg.same, pkg.other; print(pkg.same.VALUE, pkg.other.VALUE)",
        ],
        env={**os.environ, "PYTHONPATH": str(new)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["from", "the", "cache", "new"]


def test_a_symlinked_pycache_in_the_new_build_is_not_written_through(tmp_path: Path) -> None:
    old, new = _site(tmp_path / "old"), _site(tmp_path / "new")
    (old / "mod.py").write_text("X = 1\n")
    os.link(old / "mod.py", new / "mod.py")
    _compile(old)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (new / "__pycache__").symlink_to(elsewhere)

    assert venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new") == 0
    assert list(elsewhere.iterdir()) == []


def test_nothing_to_take_over_from_a_build_without_bytecode(tmp_path: Path) -> None:
    old, new = _site(tmp_path / "old"), _site(tmp_path / "new")
    (old / "mod.py").write_text("X = 1\n")
    os.link(old / "mod.py", new / "mod.py")
    assert venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new") == 0
    assert not (new / "__pycache__").exists()


def test_a_link_on_the_way_or_a_planted_pyc_link_is_not_followed(tmp_path: Path) -> None:
    """A directory of the new build that is a symlink (an intermediate one too) is not
    written through, and a ``.pyc`` in the old build that is a symlink is neither
    chmodded through nor linked."""
    old, new = _site(tmp_path / "old"), _site(tmp_path / "new")
    (old / "pkg" / "sub").mkdir(parents=True)
    (old / "pkg" / "sub" / "mod.py").write_text("X = 1\n")
    _compile(old)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    os.link(old / "pkg" / "sub" / "mod.py", elsewhere / "sub" / "mod.py")
    (new / "pkg").symlink_to(elsewhere)  # new/pkg/sub/__pycache__ would land elsewhere
    assert venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new") == 0
    assert not (elsewhere / "sub" / "__pycache__").exists()

    victim = tmp_path / "victim"
    victim.write_text("not bytecode")
    victim.chmod(0o644)
    (old / "top.py").write_text("Y = 2\n")
    os.link(old / "top.py", new / "top.py")
    (old / "__pycache__").mkdir(exist_ok=True)
    (old / "__pycache__" / f"top.{TAG}.pyc").symlink_to(victim)
    assert venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new") == 0
    assert victim.stat().st_mode & 0o777 == 0o644
