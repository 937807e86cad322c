"""Parsed TOML kept between runs (``utils/data_cache.py``): a uv.lock read again is the same
lock without a second parse; a changed file is parsed again; an entry someone else could
have written is never believed; bad TOML is still one line naming the file."""

from __future__ import annotations

import marshal
import os
import shutil
from pathlib import Path

import pytest

from hpcenv.project import uv_lock
from hpcenv.utils import data_cache, fsio
from hpcenv.utils.errors import BadInput
from support import REPO

#: A real lock (prime-rl's, tests/data/projects/prime-rl/ORIGIN says where from).
LOCK = REPO / "tests" / "data" / "projects" / "prime-rl" / "uv.lock"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hpcenv" / "toml"


def _no_parse(*_: object) -> object:
    raise AssertionError("parsed the TOML again although the cache holds it")


def test_a_lock_read_again_is_the_same_lock_unparsed(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = uv_lock.read_lock(LOCK)
    assert first == uv_lock.read_lock(LOCK, fsio.load_toml(LOCK, "uv.lock"))  # as parsed
    assert len(list(cache.parent.glob("uv-lock/*.marshal"))) == 1  # what read_lock took
    monkeypatch.setattr(fsio, "parse_toml", _no_parse)
    assert uv_lock.read_lock(LOCK) == first


def test_a_changed_lock_is_parsed_again(cache: Path, tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    shutil.copy(LOCK, lock)
    before = uv_lock.read_lock(lock)
    lock.write_text(
        lock.read_text().replace('requires-python = "==3.12.*"', 'requires-python = ">=3.12"', 1)
    )
    after = uv_lock.read_lock(lock)
    assert after.requires_python != before.requires_python
    assert after.requires_python == uv_lock.read_lock(lock, fsio.load_toml(lock)).requires_python


def test_a_planted_entry_is_believed_only_when_nobody_else_could_write_it(
    cache: Path, tmp_path: Path
) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('answer = "parsed"\n')
    data_cache.load_toml(toml, "test file")
    (entry,) = cache.glob("*.marshal")
    digest = data_cache.key([("toml", toml.read_bytes())])
    entry.write_bytes(marshal.dumps({"key": digest, "value": {"answer": "planted"}}))
    entry.chmod(0o644)
    assert data_cache.load_toml(toml, "test file") == {"answer": "planted"}  # the control
    entry.chmod(0o664)
    assert data_cache.load_toml(toml, "test file") == {"answer": "parsed"}  # group could write
    entry.write_bytes(marshal.dumps({"key": digest, "value": {"answer": "planted"}}))
    entry.chmod(0o644)
    cache.chmod(0o777)
    assert data_cache.load_toml(toml, "test file") == {"answer": "parsed"}  # directory too
    cache.chmod(0o755)
    if os.geteuid() == 0:
        entry.write_bytes(marshal.dumps({"key": digest, "value": {"answer": "planted"}}))
        entry.chmod(0o644)
        os.chown(entry, 65534, 65534)  # nobody's
        assert data_cache.load_toml(toml, "test file") == {"answer": "parsed"}


def test_bad_toml_is_one_line_naming_the_file_and_not_cached(cache: Path, tmp_path: Path):
    bad = tmp_path / "uv.lock"
    bad.write_text("[[package]\nname = 1\n")
    with pytest.raises(BadInput, match=f"^{bad}: invalid TOML"):
        uv_lock.read_lock(bad)
    assert not list(cache.parent.glob("*/*.marshal"))


def test_only_the_newest_entries_are_kept(cache: Path, tmp_path: Path) -> None:
    for n in range(5):
        f = tmp_path / f"{n}.toml"
        f.write_text(f"n = {n}\n")
        assert data_cache.load_toml(f, "test file", keep=3) == {"n": n}
        assert len(list(cache.glob("*.marshal"))) == min(n + 1, 3)
    last = data_cache.entry("toml", data_cache.key([("toml", f.read_bytes())]))
    assert last is not None and last.is_file()  # the entry just written is never pruned


def test_without_a_usable_cache_directory_the_file_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "xdg"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert uv_lock.read_lock(LOCK) == uv_lock.read_lock(LOCK, fsio.load_toml(LOCK, "uv.lock"))


def test_a_kind_directory_swapped_for_a_symlink_as_it_is_made_is_not_chmod_ed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A neighbour who can rename entries of the cache directory (group-writable, no
    sticky bit: a shared ``XDG_CACHE_HOME``, or one an older hpcenv made) swaps the new
    ``toml/`` for a link to a 0700 directory of yours right after ``mkdir``: before,
    ``os.chmod`` by name followed it and made it 0755, and the entry was written there."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = tmp_path / "xdg" / "hpcenv"
    victim = tmp_path / "ssh"
    victim.mkdir()
    victim.chmod(0o700)
    kind = cache / "toml"
    real_mkdir = os.mkdir

    def mkdir(path: str | os.PathLike[str], mode: int = 0o777, **kw: object) -> None:
        real_mkdir(path, mode, **kw)  # type: ignore[arg-type]
        if Path(path) == kind:
            kind.rename(cache / "toml-moved")
            kind.symlink_to(victim)
            if os.geteuid() == 0:
                os.lchown(kind, 12345, 12345)  # the neighbour's link

    toml = tmp_path / "a.toml"
    toml.write_text('answer = "parsed"\n')
    monkeypatch.setattr(os, "mkdir", mkdir)
    assert data_cache.load_toml(toml, "TOML file") == {"answer": "parsed"}
    monkeypatch.undo()
    assert victim.stat().st_mode & 0o777 == 0o700
    assert list(victim.iterdir()) == []


def test_an_entry_bigger_than_hpcenv_writes_is_a_miss(cache: Path, tmp_path: Path) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('answer = "parsed"\n')
    digest = data_cache.key([("toml", toml.read_bytes())])
    where = data_cache.entry("toml", digest)
    assert where is not None
    assert data_cache.write(where, digest, {"answer": "cached"}, keep=4)
    assert data_cache.read(where, digest) == {"answer": "cached"}
    with where.open("ab") as fh:
        fh.truncate(data_cache.MAX_BYTES + 1)
    assert data_cache.read(where, digest) is None


def test_a_lock_read_in_a_fresh_home_comes_from_the_per_user_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry depends on the lock's bytes alone: a new (or group-shared) HPCENV_HOME or
    HPCENV_CACHE finds it in this user's own cache, under ``$XDG_CACHE_HOME/hpcenv``."""
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "first-home"))
    first = uv_lock.read_lock(LOCK)
    assert len(list(cache.parent.glob("uv-lock/*.marshal"))) == 1
    assert not (tmp_path / "first-home").exists()  # nothing of it under the home
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "second-home"))
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "second-home" / "cache"))
    monkeypatch.setattr(fsio, "parse_toml", _no_parse)
    assert uv_lock.read_lock(LOCK) == first


def test_a_relative_xdg_cache_home_is_not_a_cache_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The XDG base directory spec: a relative XDG_CACHE_HOME is ignored (it would follow
    the working directory, like the home hpcenv keeps these entries out of)."""
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    where = data_cache.entry("toml", "0" * 64)
    assert where == tmp_path / "me" / ".cache" / "hpcenv" / "toml" / f"{'0' * 32}.marshal"


def test_an_entry_reached_through_another_users_symlink_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('answer = "parsed"\n')
    real = tmp_path / "theirs"
    monkeypatch.setenv("XDG_CACHE_HOME", str(real))
    data_cache.load_toml(toml, "test file")
    (entry,) = (real / "hpcenv" / "toml").glob("*.marshal")
    digest = data_cache.key([("toml", toml.read_bytes())])
    entry.write_bytes(marshal.dumps({"key": digest, "value": {"answer": "planted"}}))
    entry.chmod(0o644)
    assert data_cache.load_toml(toml, "test file") == {"answer": "planted"}  # the control
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("XDG_CACHE_HOME", str(link))
    assert data_cache.load_toml(toml, "test file") == {"answer": "planted"}  # your own link
    if os.geteuid() == 0:
        os.lchown(link, 65534, 65534)  # nobody's link
    else:  # stands in for another user's link, which a non-root test cannot make
        me = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: me + 1)
    assert data_cache.load_toml(toml, "test file") == {"answer": "parsed"}
    assert marshal.loads(entry.read_bytes())["value"] == {"answer": "planted"}  # not written
