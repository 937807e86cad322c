"""A ``uv.lock`` read again (``hpcenv.project.uv_lock.read_lock``): what was taken from it,
once its markers were checked, comes back from the cache as the same ``Lock`` without a
parse; a lock with a bad marker is refused every time; an entry of another shape is a
miss. The locks are real public projects' (tests/data/projects/*/ORIGIN)."""

from __future__ import annotations

import marshal
import shutil
from pathlib import Path

import pytest

from hpcenv.project import uv_lock
from hpcenv.utils import data_cache, fsio
from hpcenv.utils.errors import BadInput
from support import DATA

LOCKS = sorted((DATA / "projects").glob("*/uv.lock"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hpcenv" / "uv-lock"


def _no_parse(*_: object) -> object:
    raise AssertionError("parsed the lock again although the cache holds it")


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.parent.name)
def test_a_lock_read_again_is_the_same_lock_from_the_cache(
    lock: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = uv_lock.read_lock(lock, fsio.load_toml(lock, "uv.lock"))
    assert uv_lock.read_lock(lock) == parsed  # the first read: parsed, then kept
    assert len(list(cache.glob("*.marshal"))) == 1
    monkeypatch.setattr(fsio, "parse_toml", _no_parse)
    again = uv_lock.read_lock(lock)
    assert again == parsed
    assert again.packages and any(p.wheels for p in again.packages)


def test_a_lock_with_a_bad_marker_is_refused_each_time_and_not_kept(
    cache: Path, tmp_path: Path
) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text(
        'version = 1\n\n[[package]]\nname = "app"\nversion = "0.1"\nsource = { editable = "." }\n'
        'dependencies = [{ name = "torch", marker = "sys_platform ~~ \'linux\'" }]\n'
    )
    for _ in range(2):
        with pytest.raises(BadInput, match=r"(?s)dependency torch has an invalid marker .*uv lock"):
            uv_lock.read_lock(lock)
    assert not list(cache.glob("*.marshal"))


def test_an_entry_of_another_shape_is_a_miss(cache: Path, tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    shutil.copy(DATA / "projects" / "nanochat" / "uv.lock", lock)
    first = uv_lock.read_lock(lock)
    (entry,) = cache.glob("*.marshal")
    stored = marshal.loads(entry.read_bytes())
    entry.write_bytes(marshal.dumps({"key": stored["key"], "value": {"packages": 5}}))
    entry.chmod(0o644)
    assert data_cache.read(entry, stored["key"]) == {"packages": 5}  # believed, and yet
    assert uv_lock.read_lock(lock) == first


def _names(data: object) -> list[str]:
    """Every package, dependency, extra and group name a parsed lock holds."""
    out: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ("name", "extra", "package", "group") and isinstance(value, str):
                out.append(value)
            elif key in ("optional-dependencies", "dev-dependencies") and isinstance(value, dict):
                out += [str(k) for k in value]
            out += _names(value)
    elif isinstance(data, list):
        for item in data:
            out += [item] if isinstance(item, str) and item.isidentifier() else _names(item)
    return out


def test_names_are_normalised_as_packaging_normalises_them() -> None:
    """The lock reader's ``canonicalize_name`` (``utils/names``, which spares the audit
    ``packaging.utils`` and its import of ``packaging.tags``) is packaging's rule, on every
    name of the real locks."""
    from packaging.utils import canonicalize_name

    names = ["Django", "oslo.concurrency", "A__b--C..d", "-x-", "zope.interface", "PyYAML"]
    for lock in LOCKS:
        names += _names(fsio.load_toml(lock, "uv.lock"))
    assert len(names) > 1000
    assert [uv_lock.canonicalize_name(n) for n in names] == [canonicalize_name(n) for n in names]
