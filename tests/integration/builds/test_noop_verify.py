"""A no-op build checks the environment before saying "up to date", and rebuilds a
damaged one.

Before: a build whose stamp matched was "up to date" even with torch's files deleted
(the probe said "rebuild", the build said "up to date", only ``--force`` repaired it).
Now the no-op path compares the build's marker (every distribution it installed) with
the environment and every RECORD (``hpcenv.build.venv_check``). Real ``local`` builds (uv,
CPU torch from the wheelhouse) through the real CLI.

Issue 24, case 1: uv hard-linked venv files to its cache, so an edit in place changed the
build, the kept previous build and the cache at once, and the no-op still said "up to
date". Now builds copy (or clone) from the cache, a no-op compares the file list the build
recorded (an edit in place, a zeroed library of the same size, an added ``.pth``, a removed
``pyvenv.cfg``, a replaced ``bin/python``), and a new build proves every file against its
RECORD hash, cleaning and reinstalling a damaged cache entry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.build import venv_check
from hpcenv.tools import uv
from hpcenv.utils import paths
from support import REPO
from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_local_build()
    root = tmp_path_factory.mktemp("noop")
    locks = root / "lockfiles"
    shutil.copytree(REPO / "lockfiles", locks)
    # a uv cache of this module's own: the tests below damage cache entries on purpose
    # (the libraries a build shares with it), which must not reach any other build
    env = {
        "HPCENV_HOME": str(root / "home"),
        "HPCENV_LOCKFILES": str(locks),
        "UV_CACHE_DIR": str(root / "uv-cache"),
    }
    first = hpcenv("build", "local", "--json", env=env)
    assert first.returncode == 0, first.stderr
    return env


def _build(env: dict[str, str]) -> dict[str, object]:
    done = hpcenv("build", "local", "--json", env=env)
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


def _site(env: dict[str, str]) -> Path:
    return paths.site_packages(Path(env["HPCENV_HOME"]) / "venvs" / "local")[0]


def _imports_torch(env: dict[str, str]) -> bool:
    python = Path(env["HPCENV_HOME"]) / "venvs" / "local" / "bin" / "python"
    done = subprocess.run([str(python), "-c", "import torch.nn"], capture_output=True, timeout=300)
    return done.returncode == 0


def test_a_whole_environment_stays_a_noop(env: dict[str, str]) -> None:
    assert _build(env)["noop"] is True


def test_a_half_deleted_environment_is_rebuilt(env: dict[str, str]) -> None:
    shutil.rmtree(_site(env) / "torch" / "nn")
    assert not _imports_torch(env)
    report = _build(env)
    assert report["noop"] is False
    assert any("site-packages/torch/nn was removed" in d for d in report["damaged"])  # type: ignore[union-attr]
    assert _imports_torch(env)
    assert _build(env)["noop"] is True


def test_a_truncated_library_is_rebuilt(env: dict[str, str]) -> None:
    lib = max((_site(env) / "torch" / "lib").glob("*.so*"), key=lambda p: p.stat().st_size)
    with lib.open("rb") as fh:
        head = fh.read(4096)
    # a new file in its place (the in-place writes are the test below)
    lib.unlink()
    lib.write_bytes(head)
    report = _build(env)
    assert report["noop"] is False
    assert any(f"{lib.name} was changed" in d for d in report["damaged"])  # type: ignore[union-attr]


def test_a_removed_distribution_is_rebuilt(env: dict[str, str]) -> None:
    site = _site(env)
    for info in site.glob("numpy-*.dist-info"):
        shutil.rmtree(info)
    report = _build(env)
    assert report["noop"] is False
    assert any("numpy-" in d and ".dist-info was removed" in d for d in report["damaged"])  # type: ignore[union-attr]


def _venv(env: dict[str, str]) -> Path:
    return (Path(env["HPCENV_HOME"]) / "venvs" / "local").resolve()


def test_what_a_build_shares_with_uvs_cache_is_read_only(env: dict[str, str]) -> None:
    """Every file still linked into uv's cache (where the filesystem has no reflinks) has
    no write bit, so an in-place write by its owner fails instead of damaging the cache."""
    venv = _venv(env)
    shared = [
        p for p in venv.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_nlink > 1
    ]  # fmt: skip
    assert all(p.stat().st_mode & 0o222 == 0 for p in shared), [
        p for p in shared if p.stat().st_mode & 0o222
    ][:3]
    if shared:  # hard links: torch's sources are shared too, and read-only
        assert (_site(env) / "torch" / "__init__.py").stat().st_mode & 0o222 == 0


def _append(path: Path, text: bytes) -> None:
    with path.open("ab") as fh:  # in place: the same inode, as an editor or `>>` writes
        fh.write(text)


def _zero_in_place(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.write(bytes(4096))


def test_each_change_in_place_is_named_and_one_build_repairs_them(env: dict[str, str]) -> None:
    venv, site = _venv(env), _site(env)
    edited = site / "torch" / "version.py"
    lib = max((site / "torch" / "lib").glob("*.so*"), key=lambda p: p.stat().st_size)
    size, shared = lib.stat().st_size, lib.stat().st_nlink > 1
    cases = [
        (lambda: _append(edited, b"raise SystemExit('edited in place')\n"),
         "torch/version.py was changed"),
        (lambda: _zero_in_place(lib), f"torch/lib/{lib.name} was changed"),
        (lambda: (site / "zz-exit.pth").write_text("import sys; sys.exit(3)\n"),
         "zz-exit.pth was added"),
        ((venv / "pyvenv.cfg").unlink, "pyvenv.cfg was removed"),
    ]  # fmt: skip
    for damage, said in cases:
        damage()
        changes = venv_check.tree_changes(venv, limit=100)
        assert changes is not None and any(said in c for c in changes), (said, changes)
    assert lib.stat().st_size == size  # the RECORD size check alone would not see it
    python = venv / "bin" / "python"
    python.unlink()
    python.write_text("#!/bin/sh\nexit 0\n")
    assert any("bin/python was replaced" in c for c in venv_check.tree_changes(venv) or [])

    report = _build(env)
    assert report["noop"] is False
    damaged = " ".join(report["damaged"])  # type: ignore[arg-type]
    assert "changed since its build" in damaged and "and 2 more" in damaged, damaged
    if shared:  # root wrote through the read-only link: the cache entry was repaired
        assert any("damaged torch" in r for r in report["repaired"]), report  # type: ignore[union-attr]
    new_site = _site(env)
    assert b"edited in place" not in (new_site / "torch" / "version.py").read_bytes()
    assert not (new_site / "zz-exit.pth").exists()
    assert _imports_torch(env)
    assert _build(env)["noop"] is True


def _cache_entry(env: dict[str, str], dist: str, version: str) -> Path:
    """The unpacked wheel of ``dist`` in uv's cache (``archive-v0/<id>/``) that uv installs:
    the one its ``wheels-v*/pypi/<dist>/<version>-*`` link names (an older entry a ``uv cache
    clean`` left unlinked is not the one a build uses)."""
    done = subprocess.run(
        [*uv.uv_argv(), "cache", "dir"],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_CACHE_DIR": env["UV_CACHE_DIR"]},
    )
    cache = Path(done.stdout.strip())
    root = cache / "archive-v0"
    for link in sorted(cache.glob(f"wheels-v*/pypi/{dist}/{version}-*")):
        if link.is_symlink() and (link.resolve() / f"{dist}-{version}.dist-info").is_dir():
            return link.resolve()
    found = sorted(root.glob(f"*/{dist}-{version}.dist-info"))
    assert found, f"no {dist} {version} in {root}: uv's cache layout changed?"
    return found[0].parent


def _forced(env: dict[str, str]) -> tuple[int, int]:
    """``build local --force``: how many files its RECORD proof read, and how many an
    earlier proof had read (from the build report's verify step)."""
    done = hpcenv("build", "local", "--force", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (what,) = [s["what"] for s in report["steps"] if s["step"] == "verify"]
    found = re.search(r"\((\d+) read, (\d+) unchanged since an earlier check\)", what)
    assert found, what
    return int(found[1]), int(found[2])


def _recorded(env: dict[str, str], path: Path) -> bool:
    st = path.stat()
    record = Path(env["UV_CACHE_DIR"]) / f"hpcenv-proofs-{os.getuid()}" / "record.txt"
    key = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} "
    return any(line.startswith(key) for line in record.read_text().splitlines())


def test_a_rebuild_reads_only_the_files_no_earlier_proof_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    """uv links the same cache entries into each build: the second of two forced builds
    reads only the files uv wrote anew (scripts, INSTALLER, ...), not torch's gigabyte.
    (Files written less than a second before a proof are read again by the next one: the
    previous test's repair unpacked torch anew, so the first two builds may read some.)

    The record of proofs is kept per user and uv cache, not per $HPCENV_HOME: a first
    build in a new home links the cache entries that builds in another home proved, and
    does not hash torch's gigabyte again (before: all 19,287 files read, 0 known)."""
    _forced(env)
    _forced(env)
    read, known = _forced(env)
    assert known > 10_000 and read < known / 20, (read, known)
    # the bytecode of torch's unchanged files was taken over from the build it replaced
    init = _site(env) / "torch" / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    assert init.stat().st_nlink >= 2, "torch's bytecode was compiled again"
    assert _imports_torch(env)
    # a first build in a new home (the builds above proved the cache entries it links)
    read, known = _forced({**env, "HPCENV_HOME": str(tmp_path / "new-home")})
    assert known > 10_000 and read < known / 20, (read, known)


def test_a_damaged_cache_entry_is_cleaned_and_reinstalled(env: dict[str, str]) -> None:
    # What an edit through a hard link of an older hpcenv's build left behind: uv's
    # unpacked idna differs from its RECORD. An earlier proof read it whole: its record
    # must not hide the edit.
    entry = _cache_entry(env, "idna", "3.20")
    _forced(env)
    assert _recorded(env, entry / "idna" / "core.py")
    _append(entry / "idna" / "core.py", b"# damaged by an edit through a hard link\n")
    done = hpcenv("build", "local", "--force", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert any("idna" in r and "uv cache clean idna" in r for r in report["repaired"]), report
    assert venv_check.prove(_venv(env)).bad == {}
    assert b"damaged" not in (_site(env) / "idna" / "core.py").read_bytes()


def test_a_record_of_proofs_that_is_a_symlink_or_not_mine_is_not_read(tmp_path: Path) -> None:
    """The record only saves reads: one planted as a link (or left by another user in a
    shared $HPCENV_HOME) is ignored and every file is read."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("1 2 3 4 " + "A" * 43 + "\n")
    assert venv_check._load_proofs(target) == {"1 2 3 4": "A" * 43}
    link = tmp_path / "record.txt"
    link.symlink_to(target)
    assert venv_check._load_proofs(link) == {}
    if os.getuid() == 0:  # root can hand the file to another user
        os.chown(target, 12345, 12345)
        assert venv_check._load_proofs(target) == {}
