"""The knowledge tables' cache (``knowledge/tables.py``): parsed once per change of the TOML
files, the same data as parsing them, and never trusted when someone else could have
written it."""

from __future__ import annotations

import marshal
import os
import shutil
import stat
from pathlib import Path

import pytest

from hpcenv.knowledge import tables
from hpcenv.utils import data_cache

HERE = Path(tables.__file__).parent


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A copy of the knowledge TOML files, to change."""
    where = tmp_path / "knowledge"
    where.mkdir()
    for p in HERE.glob("*.toml"):
        shutil.copy(p, where / p.name)
    return where


def _cached(base: Path) -> list[Path]:
    return sorted((base / "knowledge").glob("*.marshal"))


def _no_parse(*_: object) -> object:
    raise AssertionError("parsed the TOML files although the cache holds them")


def test_cached_tables_are_the_parsed_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    base = tmp_path / "cache"
    parsed = tables.parse(tables.sources(HERE))
    assert tables.load(HERE, base) == parsed  # cold: parsed and written
    (written,) = _cached(base)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    monkeypatch.setattr(tables, "parse", _no_parse)
    assert tables.load(HERE, base) == parsed  # warm: read back, not parsed


def test_the_process_tables_hold_every_knowledge_file() -> None:
    assert set(tables.tables()) == {p.name for p in HERE.glob("*.toml")}
    assert tables.read("cuda.toml")["toolkit"]
    assert tables.read_optional("no-such.toml") is None


def test_a_changed_data_file_is_parsed_again(data: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    before = tables.load(data, base)
    (old,) = _cached(base)
    cuda = data / "cuda.toml"
    cuda.write_text(cuda.read_text() + '\n[[toolkit]]\nversion = "99.9"\nsource = "test"\n')
    after = tables.load(data, base)
    assert after["cuda.toml"]["toolkit"][-1]["version"] == "99.9"
    assert after != before
    assert len(_cached(base)) == 2 and old in _cached(base)  # a new entry beside the old


def _plant(base: Path, directory: Path, fake: dict[str, object]) -> Path:
    """Overwrite the (warm) cache with other data under the right key: the file an attacker
    who could write there would leave."""
    tables.load(directory, base)
    (path,) = _cached(base)
    digest = tables.key(tables.sources(directory))
    path.write_bytes(marshal.dumps({"key": digest, "value": fake}))
    path.chmod(0o644)
    return path


FAKE: dict[str, object] = {"cuda.toml": {"toolkit": [{"version": "0.0", "source": "planted"}]}}


def test_a_trusted_cache_is_believed(data: Path, tmp_path: Path) -> None:
    """The other cases' control: the same planted file, owned by you and 0644, is read."""
    base = tmp_path / "cache"
    _plant(base, data, FAKE)
    assert tables.load(data, base) == FAKE


def test_a_group_writable_cache_file_is_ignored(data: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    _plant(base, data, FAKE).chmod(0o664)
    assert tables.load(data, base) == tables.parse(tables.sources(data))


def test_a_cache_in_a_group_writable_directory_is_ignored(data: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    path = _plant(base, data, FAKE)
    path.parent.chmod(0o775)
    assert tables.load(data, base) == tables.parse(tables.sources(data))
    assert data_cache.read(path, tables.key(tables.sources(data))) is None


def test_a_cache_owned_by_someone_else_is_ignored(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "cache"
    path = _plant(base, data, FAKE)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)  # nobody
    else:  # stands in for a file of another user, which a non-root test cannot make
        me = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    assert tables.load(data, base) == tables.parse(tables.sources(data))


def test_a_symlinked_or_corrupt_cache_is_ignored(data: Path, tmp_path: Path) -> None:
    base = tmp_path / "cache"
    path = _plant(base, data, FAKE)
    target = tmp_path / "elsewhere.marshal"
    path.rename(target)
    path.symlink_to(target)
    right = tables.parse(tables.sources(data))
    assert tables.load(data, base) == right
    assert not path.is_symlink()  # replaced by a file of its own, not written through
    assert marshal.loads(target.read_bytes())["value"] == FAKE
    path.write_bytes(b"\x00not marshal")
    assert tables.load(data, base) == right


def test_a_umask_that_lets_the_group_write_still_writes_a_trusted_cache(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "cache"
    old = os.umask(0o002)
    try:
        tables.load(data, base)
    finally:
        os.umask(old)
    (path,) = _cached(base)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    monkeypatch.setattr(tables, "parse", _no_parse)
    tables.load(data, base)


def test_an_unwritable_cache_directory_still_gives_the_tables(data: Path, tmp_path: Path):
    base = tmp_path / "cache"
    base.mkdir()
    (base / "knowledge").write_text("a file where the directory would go")
    assert tables.load(data, base) == tables.parse(tables.sources(data))


def test_a_fresh_home_with_a_warm_per_user_cache_parses_no_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables depend on the data files alone: kept in this user's own cache
    (``$XDG_CACHE_HOME/hpcenv``), not under ``$HPCENV_HOME``, a first command in a new home
    (a first build) reads them back instead of parsing ~215 KB of TOML."""
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "first-home"))
    parsed: list[int] = []
    real_parse = tables.parse
    monkeypatch.setattr(tables, "parse", lambda files: parsed.append(1) or real_parse(files))
    first = tables.load()
    assert parsed == [1]
    assert len(_cached(xdg / "hpcenv")) == 1
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "second-home"))
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "second-home" / "cache"))
    assert tables.load() == first
    assert parsed == [1]  # read back, not parsed


def test_a_per_user_cache_another_user_could_write_is_not_believed(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "home"))
    path = _plant(xdg / "hpcenv", data, FAKE)
    assert tables.load(data) == FAKE  # the control: yours alone, believed
    path.parent.chmod(0o777)
    assert tables.load(data) == tables.parse(tables.sources(data))


def test_an_unusable_per_user_cache_still_gives_the_tables(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "xdg"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert tables.load(data) == tables.parse(tables.sources(data))
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", _no_home)
    assert tables.load(data) == tables.parse(tables.sources(data))


def _no_home() -> Path:
    raise RuntimeError("Could not determine home directory.")  # as Path.home() without one
