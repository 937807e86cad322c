"""The RECORD proof's record of files already proven (``venv_check.prove``): one per user
and uv cache, so a first build in a new $HPCENV_HOME that links the same cache entries
does not hash them again; and never a way for someone else to make a build trust a file.

Small trees laid out as a venv's site-packages with a real RECORD (sha256 of each file),
the second "build" hard-linking the first one's files as uv links its cache entries;
``proofs_path`` asks the real uv for its cache. Root hands files to another user with a
real ``chown``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcenv.build import venv_check

FILES = {"pkg/__init__.py": b"X = 1\n", "pkg/core.py": b"def f():\n    return 2\n"}
INSTALLER = b"uv\n"


def _site(venv: Path) -> Path:
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def _sha(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _settle(path: Path) -> None:
    """An mtime older than ``SETTLED_NS`` (a file written this second is read again)."""
    old = time.time_ns() - 10 * venv_check.SETTLED_NS
    os.utime(path, ns=(old, old))


def _cache_entry(root: Path) -> Path:
    """What uv unpacked once: the files of ``pkg`` 1.0, read-only as a build leaves them."""
    for rel, data in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        _settle(path)
        path.chmod(0o444)
    return root


def _build(venv: Path, entry: Path) -> Path:
    """A venv whose ``pkg`` files are hard links to ``entry`` (uv's cache), with the
    RECORD and INSTALLER that uv writes anew into each venv."""
    site = _site(venv)
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    rows = []
    for rel, data in FILES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(entry / rel, site / rel)
        rows.append(f"{rel},sha256={_sha(data)},{len(data)}\n")
    (info / "INSTALLER").write_bytes(INSTALLER)
    _settle(info / "INSTALLER")
    rows.append(f"pkg-1.0.dist-info/INSTALLER,sha256={_sha(INSTALLER)},{len(INSTALLER)}\n")
    rows.append("pkg-1.0.dist-info/RECORD,,\n")
    (info / "RECORD").write_text("".join(rows))
    return site


@pytest.fixture
def proven(tmp_path: Path) -> tuple[Path, Path]:
    """uv's cache entry, proven once by a first build: (the entry, the record)."""
    entry = _cache_entry(tmp_path / "uv-cache" / "archive" / "pkg")
    record = tmp_path / "uv-cache" / f"hpcenv-proofs-{os.getuid()}" / "record.txt"
    first = venv_check.prove(tmp_path / "home-1" / "venv", record=record)
    assert (first.read, first.known) == (0, 0)  # no venv there yet: nothing to read
    _build(tmp_path / "home-1" / "venv", entry)
    first = venv_check.prove(tmp_path / "home-1" / "venv", record=record)
    assert (first.bad, first.read, first.known) == ({}, 3, 0)
    assert len(venv_check._load_proofs(record)) == 2  # not INSTALLER: no other build has it
    return entry, record


def test_a_build_in_a_new_home_takes_the_proven_cache_files_from_the_record(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    entry, record = proven
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert (again.bad, again.read, again.known) == ({}, 1, 2)  # INSTALLER is new


def test_the_record_is_kept_per_uv_cache_not_per_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it lived in $HPCENV_HOME/cache: a build in a fresh home read every file."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "home-1"))
    first = venv_check.proofs_path()
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "home-2"))
    assert venv_check.proofs_path() == first
    assert first is not None and first.is_relative_to(tmp_path / "uv-cache")
    assert str(os.getuid()) in first.parent.name  # one per user
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "other-uv-cache"))
    assert venv_check.proofs_path() != first  # and one per uv cache


def test_a_file_replaced_or_changed_since_its_proof_is_read_again(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    entry, record = proven
    core = entry / "pkg" / "core.py"
    st = core.stat()
    core.unlink()  # another file (another inode), same content, size and mtime
    core.write_bytes(FILES["pkg/core.py"])
    os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns))
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert (again.bad, again.read, again.known) == ({}, 2, 1)
    init = entry / "pkg" / "__init__.py"
    init.chmod(0o644)
    init.write_bytes(b"X = 9\n")  # same size, new mtime: read, and found to differ
    _build(tmp_path / "home-3" / "venv", entry)
    third = venv_check.prove(tmp_path / "home-3" / "venv", record=record)
    assert third.bad == {"pkg": ["pkg/__init__.py"]} and (third.read, third.known) == (2, 1)


def test_a_file_others_may_write_is_never_taken_from_the_record(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    """Only the owner can set an mtime back after a write; the group could write a
    group-writable file. Either one's file, proven once, could be changed unseen."""
    entry, record = proven
    (entry / "pkg" / "core.py").chmod(0o664)
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert (again.read, again.known) == (2, 1)


def test_another_users_file_is_never_taken_from_the_record(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    """A shared uv cache: another user's entry, proven by you once, then changed by its
    owner, who set its mtime back (``touch -d``)."""
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    entry, record = proven
    core = entry / "pkg" / "core.py"
    st = core.stat()
    os.chown(core, 12345, 12345)
    core.chmod(0o644)
    core.write_bytes(b"def f():\n    return 7\n")  # as long as the real one
    os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (core.stat().st_size, core.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert again.bad == {"pkg": ["pkg/core.py"]} and (again.read, again.known) == (2, 1)


def test_a_record_in_a_directory_others_may_write_proves_nothing(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    """Someone who can write in the record's directory can replace the record."""
    entry, record = proven
    assert venv_check._load_proofs(record)
    record.parent.chmod(0o775)
    assert venv_check._load_proofs(record) == {}
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert (again.read, again.known) == (3, 0)


def test_the_record_is_written_for_this_user_alone_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 002 the directory would be group-writable, and the record ignored."""
    entry = _cache_entry(tmp_path / "uv-cache" / "archive" / "pkg")
    record = tmp_path / "uv-cache" / f"hpcenv-proofs-{os.getuid()}" / "record.txt"
    _build(tmp_path / "home-1" / "venv", entry)
    old = os.umask(0o002)
    try:
        venv_check.prove(tmp_path / "home-1" / "venv", record=record)
    finally:
        os.umask(old)
    assert (record.parent.stat().st_mode & 0o777, record.stat().st_mode & 0o777) == (0o755, 0o644)
    assert len(venv_check._load_proofs(record)) == 2


def test_the_proof_takes_the_protect_walks_stats_with_the_same_answer(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    """The build hands the proof what ``protect`` saw (one walk, not a second ``stat`` of
    every file); the answer is the same, and a file the walk did not see is ``stat``-ed."""
    entry, record = proven
    venv = tmp_path / "home-2" / "venv"
    site = _build(venv, entry)
    walk = venv_check.Walk()
    venv_check.protect(venv, walk)
    seen = walk.stats
    assert str(site / "pkg" / "core.py") in seen
    got = venv_check.prove(venv, record=record, seen=seen)
    assert (got.bad, got.read, got.known) == ({}, 1, 2)
    del seen[str(site / "pkg" / "core.py")]
    again = venv_check.prove(venv, record=record, seen=seen)
    assert (again.bad, again.read, again.known) == ({}, 1, 2)


# -- a neighbour who can rename entries of a group-writable uv cache ---------------------

NEIGHBOUR = 12345  # another user's uid: the symlinks they plant are theirs (``lchown``)


def _plant_link(link: Path, target: Path) -> None:
    """What the neighbour does: the record's directory renamed away (the parent is
    group-writable, without the sticky bit), a symlink of theirs standing in its place."""
    if link.exists() or link.is_symlink():
        link.rename(link.with_name(link.name + "-moved"))
    link.symlink_to(target)
    os.lchown(link, NEIGHBOUR, NEIGHBOUR)


def _victim(tmp_path: Path, record: bytes | None = None) -> Path:
    """A directory of yours the neighbour points at (a checkout, ~/.ssh), 0700, maybe
    holding a ``record.txt`` of yours whose lines they chose (a file of their repo)."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    victim.chmod(0o700)
    if record is not None:
        (victim / "record.txt").write_bytes(record)
        (victim / "record.txt").chmod(0o644)
    return victim


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a symlink of another user needs root's lchown")


def test_a_record_directory_planted_as_a_symlink_is_never_read(
    tmp_path: Path, proven: tuple[Path, Path]
) -> None:
    """Before, ``os.stat`` followed the link to a directory of yours, and a ``record.txt``
    of yours there with the neighbour's lines vouched for a damaged file."""
    _needs_root()
    entry, record = proven
    core = entry / "pkg" / "core.py"
    core.chmod(0o644)
    core.write_bytes(b"def f():\n    return 7\n")  # damaged in place, as long as before
    st = core.stat()
    line = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {_sha(FILES['pkg/core.py'])}\n"
    victim = _victim(tmp_path, line.encode())
    _plant_link(record.parent, victim)
    _build(tmp_path / "home-2" / "venv", entry)
    again = venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    assert again.bad == {"pkg": ["pkg/core.py"]}
    assert (victim / "record.txt").read_bytes() == line.encode()  # not written through
    assert sorted(p.name for p in victim.iterdir()) == ["record.txt"]


def test_a_record_directory_swapped_for_a_symlink_as_it_is_made_is_not_chmod_ed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The neighbour wins the race right after ``mkdir``: before, ``os.chmod`` by name
    followed their link and made a 0700 directory of yours 0755."""
    _needs_root()
    entry = _cache_entry(tmp_path / "uv-cache" / "archive" / "pkg")
    record = tmp_path / "uv-cache" / f"hpcenv-proofs-{os.getuid()}" / "record.txt"
    victim = _victim(tmp_path)
    _build(tmp_path / "home-1" / "venv", entry)
    real_mkdir = os.mkdir

    def mkdir(path: str | os.PathLike[str], mode: int = 0o777, **kw: object) -> None:
        real_mkdir(path, mode, **kw)  # type: ignore[arg-type]
        if Path(path) == record.parent:
            _plant_link(record.parent, victim)

    monkeypatch.setattr(os, "mkdir", mkdir)
    venv_check.prove(tmp_path / "home-1" / "venv", record=record)
    monkeypatch.undo()
    assert victim.stat().st_mode & 0o777 == 0o700
    assert list(victim.iterdir()) == []


def test_a_record_directory_swapped_for_a_symlink_before_the_write_is_not_written_through(
    tmp_path: Path, proven: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The neighbour wins the race between the checks and the write: before, the
    temporary file was opened by its path, through their link, and renamed over
    ``record.txt`` in the directory it led to."""
    _needs_root()
    entry, record = proven
    core = entry / "pkg" / "core.py"
    core.unlink()  # a new cache file (a new inode): the proof has a line to add
    core.write_bytes(FILES["pkg/core.py"])
    _settle(core)
    victim = _victim(tmp_path, b"mine\n")
    real_open = os.open

    def opening(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object) -> int:
        swapped = record.parent.is_symlink()
        if flags & os.O_CREAT and "record.txt" in os.fspath(path) and not swapped:
            _plant_link(record.parent, victim)
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    _build(tmp_path / "home-2" / "venv", entry)
    monkeypatch.setattr(os, "open", opening)
    venv_check.prove(tmp_path / "home-2" / "venv", record=record)
    monkeypatch.undo()
    assert record.parent.is_symlink()  # the neighbour did swap it
    assert sorted(p.name for p in victim.iterdir()) == ["record.txt"]
    assert (victim / "record.txt").read_bytes() == b"mine\n"


def test_a_record_bigger_than_any_hpcenv_writes_is_not_read(proven: tuple[Path, Path]) -> None:
    """Bounded input: a record past ``PROOFS_MAX_BYTES`` is ignored, not read whole."""
    _, record = proven
    lines = record.read_bytes()
    assert venv_check._load_proofs(record)
    pad = b"#" * 150 + b"\n"
    record.write_bytes(lines + pad * (venv_check.PROOFS_MAX_BYTES // len(pad) + 1))
    assert venv_check._load_proofs(record) == {}


def test_a_record_naming_a_device_a_fifo_or_a_file_outside_the_venv_is_not_read(
    tmp_path: Path,
) -> None:
    """A wheel's RECORD is the wheel's data: ``/dev/zero`` (directly or through ``..``),
    a FIFO or another user's file named in it were hashed (forever, or blocking for
    ever: the build hung in the proof, before any timeout of the import check)."""
    entry = _cache_entry(tmp_path / "uv-cache" / "archive" / "pkg")
    venv = tmp_path / "home-1" / "venv"
    site = _build(venv, entry)
    os.mkfifo(site / "pkg" / "pipe")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the venv's\n")
    ups = "../" * len(site.relative_to("/").parts)
    with (site / "pkg-1.0.dist-info" / "RECORD").open("a") as fh:
        for rel in ("/dev/zero", f"{ups}dev/zero", "pkg/pipe", str(outside)):
            fh.write(f"{rel},sha256={_sha(b'')},0\n")
    code = (
        "import sys; from pathlib import Path; from hpcenv.build import venv_check; "
        "p = venv_check.prove(Path(sys.argv[1])); print(p.bad, p.read)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(venv)], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{} 3"  # the two files and INSTALLER, nothing else
