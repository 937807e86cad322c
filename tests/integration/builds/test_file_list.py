"""The file list a no-op compares with (``venv_check.record_tree``), made from the walk
``protect`` already did before the import check (``tree_of``) instead of a walk of its own
after it: the same list, kept only when the check added or removed nothing but bytecode.
Small trees laid out as a venv, with real files, directories, a link and bytecode."""

from __future__ import annotations

import os
import py_compile
import sys
from pathlib import Path

from hpcenv.build import venv_check
from hpcenv.utils import paths


def _venv(root: Path) -> Path:
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "pkg" / "sub").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("X = 1\n")
    (site / "pkg" / "sub" / "data.bin").write_bytes(b"\0" * 100)
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    py_compile.compile(str(site / "pkg" / "__init__.py"))  # carried-over bytecode
    (root / paths.BUILD_MARKER).write_text("{}")
    return site


def _protected(venv: Path) -> tuple[venv_check.Walk, list[str]]:
    walk = venv_check.Walk()
    venv_check.protect(venv, walk)
    return walk, venv_check.tree_of(venv, walk)


def test_the_list_from_protects_walk_is_the_list_a_walk_makes(tmp_path: Path) -> None:
    _venv(tmp_path)
    _, listed = _protected(tmp_path)
    assert listed == venv_check.tree(tmp_path)
    assert any(line.startswith("bin/python\tl\t") for line in listed)
    assert not any("__pycache__" in line or paths.BUILD_MARKER in line for line in listed)


def test_the_list_is_kept_when_the_import_check_wrote_only_bytecode(tmp_path: Path) -> None:
    site = _venv(tmp_path)
    walk, listed = _protected(tmp_path)
    tag = sys.implementation.cache_tag
    py_compile.compile(  # a new __pycache__, as the import check makes them
        str(site / "pkg" / "__init__.py"),
        cfile=str(site / "pkg" / "sub" / "__pycache__" / f"m.{tag}.pyc"),
    )
    venv_check.record_tree(tmp_path, walk, listed)
    assert venv_check.tree_changes(tmp_path) == []
    # kept, not walked again: a file changed in place since protect (no package does on
    # import) is what the next no-op names and rebuilds, never an "up to date"
    data = site / "pkg" / "sub" / "data.bin"
    walk, listed = _protected(tmp_path)
    os.utime(data, ns=(0, 10**9))
    venv_check.record_tree(tmp_path, walk, listed)
    assert venv_check.tree_changes(tmp_path) == [f"{data.relative_to(tmp_path)} was changed"]


def test_an_entry_added_or_removed_since_protect_is_walked_again(tmp_path: Path) -> None:
    site = _venv(tmp_path)
    walk, listed = _protected(tmp_path)
    (site / "pkg" / "cache.json").write_text("{}")  # a package that writes on import
    (site / "pkg" / "sub" / "data.bin").unlink()
    venv_check.record_tree(tmp_path, walk, listed)
    assert venv_check.tree_changes(tmp_path) == []  # the list is the tree as it is now
    written = (tmp_path / venv_check.FILES).read_text()
    assert "pkg/cache.json" in written and "data.bin" not in written


def test_a_directory_whose_mtime_is_as_it_was_is_not_listed_again(tmp_path: Path) -> None:
    """Adding or removing an entry sets its directory's mtime, so a directory whose inode
    and mtime are as protect saw them is taken as it was. An entry added behind an mtime
    set back (no import does that) is missing from the list, and the next no-op, which
    walks the whole tree, names it and rebuilds: never an "up to date"."""
    site = _venv(tmp_path)
    walk, listed = _protected(tmp_path)
    folder = site / "pkg" / "sub"
    before = folder.stat()
    (folder / "planted.py").write_text("")
    os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))
    venv_check.record_tree(tmp_path, walk, listed)
    assert venv_check.tree_changes(tmp_path) == [
        f"{(folder / 'planted.py').relative_to(tmp_path)} was added"
    ]
