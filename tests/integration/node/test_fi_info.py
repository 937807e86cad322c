"""``fi_info -l`` for the facts, cached per (fi_info, libfabric, FI_* environment), with the
real fi_info (libfabric-bin): a counting wrapper in front of it shows when it really runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcenv.facts import fabric
from hpcenv.kit.libfabric import parse_fi_info_list
from support import require


@pytest.fixture
def real_fi_info() -> Path:
    found = shutil.which("fi_info")
    require("fi_info", found is not None, "install libfabric-bin")
    assert found is not None
    return Path(found)


def counting_env(tmp_path: Path, real: Path) -> tuple[dict[str, str], Path]:
    """PATH with an fi_info that logs each run, then runs the real one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "runs"
    wrapper = bin_dir / "fi_info"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{count}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HPCENV_CACHE": str(tmp_path / "cache"),
        "HOME": str(tmp_path),
    }
    return env, count


def runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_same_answer_as_fi_info_and_cached(tmp_path: Path, real_fi_info: Path) -> None:
    direct = subprocess.run([str(real_fi_info), "-l"], capture_output=True, text=True, check=True)
    env, count = counting_env(tmp_path, real_fi_info)
    first = fabric.providers(env)
    assert first == parse_fi_info_list(direct.stdout) and "tcp" in (first or ())
    assert runs(count) == 1
    assert fabric.providers(env) == first
    assert runs(count) == 1, "the second read ran fi_info again"
    (entry,) = (tmp_path / "cache" / "fi_info").glob("*.json")
    assert entry.is_file()


def test_key_changes_run_fi_info_again(tmp_path: Path, real_fi_info: Path) -> None:
    env, count = counting_env(tmp_path, real_fi_info)
    first = fabric.providers(env)
    # an FI_* variable is part of the key (fi_info -l itself lists every provider)
    assert fabric.providers({**env, "FI_PROVIDER": "tcp"}) == first
    assert runs(count) == 2
    fabric.providers({**env, "FI_PROVIDER": "tcp"})
    assert runs(count) == 2
    wrapper = tmp_path / "bin" / "fi_info"
    st = wrapper.stat()
    os.utime(wrapper, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # fi_info changed
    fabric.providers(env)
    assert runs(count) == 3


def test_the_key_names_the_libfabric_fi_info_loads(real_fi_info: Path) -> None:
    key = fabric.cache_key(real_fi_info, {"PATH": os.environ.get("PATH", "")})
    assert key["libfabric"] is not None, key
    lib = Path(key["libfabric"][0])
    assert lib.name.startswith("libfabric.so") and lib.is_file()
    ldd = shutil.which("ldd")
    if ldd is not None:  # the loader agrees on which library it is
        out = subprocess.run([ldd, str(real_fi_info)], capture_output=True, text=True).stdout
        line = next(x for x in out.splitlines() if "libfabric.so" in x)
        assert Path(line.split("=>")[1].split("(")[0].strip()).resolve() == lib


def test_bad_entries_and_linked_cache_dirs(tmp_path: Path, real_fi_info: Path) -> None:
    env, count = counting_env(tmp_path, real_fi_info)
    want = fabric.providers(env)
    (entry,) = (tmp_path / "cache" / "fi_info").glob("*.json")
    entry.write_text("{not json")
    assert fabric.providers(env) == want and runs(count) == 2  # rewritten
    # a cache directory reached through another user's symlink is not written through
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(elsewhere)
    if os.geteuid() == 0:
        os.lchown(linked, 65534, 65534)  # nobody's link
        env2 = {**env, "HPCENV_CACHE": str(linked)}
        assert fabric.providers(env2) == want
        assert not any(elsewhere.rglob("*.json"))


def test_no_fi_info_is_none_and_failure_is_empty(tmp_path: Path) -> None:
    assert fabric.providers({"PATH": str(tmp_path), "HPCENV_CACHE": str(tmp_path)}) is None
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "fi_info").write_text("#!/bin/sh\nexit 1\n")
    (broken / "fi_info").chmod(0o755)
    env = {"PATH": str(broken), "HPCENV_CACHE": str(tmp_path / "c")}
    assert fabric.providers(env) == ()
    assert not (tmp_path / "c" / "fi_info").exists() or not any(
        (tmp_path / "c" / "fi_info").iterdir()
    )  # failures are not cached
