"""A no-op build checks the environment before saying "up to date", and rebuilds a
damaged one.

Before: a build whose stamp matched was "up to date" even with torch's files deleted
(the probe said "rebuild", the build said "up to date", only ``--force`` repaired it).
Now the no-op path compares the build's marker (every distribution it installed) with
the environment and every RECORD (``hpcenv.build.venv_check``). Real ``local`` builds (uv,
CPU torch from the wheelhouse) through the real CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from buildkit import hpcenv, require_local_build
from conftest import REPO
from hpcenv.utils import paths

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_local_build()
    root = tmp_path_factory.mktemp("noop")
    locks = root / "lockfiles"
    shutil.copytree(REPO / "lockfiles", locks)
    env = {"HPCENV_HOME": str(root / "home"), "HPCENV_LOCKFILES": str(locks)}
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
    assert any("torch" in d and "is missing" in d for d in report["damaged"])  # type: ignore[union-attr]
    assert _imports_torch(env)
    assert _build(env)["noop"] is True


def test_a_truncated_library_is_rebuilt(env: dict[str, str]) -> None:
    lib = max((_site(env) / "torch" / "lib").glob("*.so*"), key=lambda p: p.stat().st_size)
    with lib.open("rb") as fh:
        head = fh.read(4096)
    # a new file in its place, never a write into it: uv hardlinks venv files to its
    # cache, so writing into this inode would damage every venv linked to it
    lib.unlink()
    lib.write_bytes(head)
    report = _build(env)
    assert report["noop"] is False
    assert any(lib.name in d and "bytes" in d for d in report["damaged"])  # type: ignore[union-attr]


def test_a_removed_distribution_is_rebuilt(env: dict[str, str]) -> None:
    site = _site(env)
    for info in site.glob("numpy-*.dist-info"):
        shutil.rmtree(info)
    report = _build(env)
    assert report["noop"] is False
    assert any("numpy" in d and "no longer installed" in d for d in report["damaged"])  # type: ignore[union-attr]
