"""The fixtures every test may use.

``tests/unit/<package>/`` holds fast tests of one module (no subprocess, no network, no
SLURM); ``tests/integration/<what it proves>/`` the builds, probes, SLURM clusters and
real wheels; ``tests/support/`` the helpers (``support``: REPO, DATA, FACTS, ``require``).
The helpers' fixtures are registered here, once (``pytest_plugins``), so a test asks for
``slurm``, ``cluster``, ``probe_python``, ``torch_python``, ``index`` ... by name and
never imports them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = [  # a helper before the helpers that import it (assertion rewriting)
    "support.probe_env",
    "support.launcher_env",
    "support.torch_venv",
    "support.buildkit",
    "support.standin_cuda",
    "support.slurm_cluster",
]


#: The session's SLURM clusters (tests/support/slurm_cluster.py): a test's group is the
#: first of these it asks for, so each cluster starts once, in one worker, while tests on
#: another cluster run beside them in another.
CLUSTERS = ("cluster4", "cluster", "gres_cluster", "slurm")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for ``pytest -n N --dist loadgroup`` (``nox -s tests``): the SLURM tests by
    the cluster they use, the other tests by file, so a file's module-scoped fixtures
    (stand-in indexes, built venvs) are made once."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        cluster = next((c for c in CLUSTERS if c in names), None)
        if cluster is None and item.get_closest_marker("slurm"):
            cluster = "slurm"
        item.add_marker(pytest.mark.xdist_group(f"slurm-{cluster}" if cluster else str(item.path)))


@pytest.fixture(autouse=True, scope="session")
def per_user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """hpcenv's per-user cache (``paths.per_user_cache_dir``: the parsed knowledge tables,
    uv.lock and pyproject.toml files) in a directory of this session's, not the machine's
    ``~/.cache/hpcenv``: no test finds it warm from another session or writes the user's.
    uv's and pip's caches stay where they were (they follow ``XDG_CACHE_HOME`` too, and
    a cold uv cache would unpack every wheel again)."""
    real = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    where = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", os.environ.get("UV_CACHE_DIR") or os.path.join(real, "uv"))
        mp.setenv("PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR") or os.path.join(real, "pip"))
        mp.setenv("XDG_CACHE_HOME", str(where))
        yield where


@pytest.fixture(autouse=True)
def pypi_as_of(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``pypi`` resolves against PyPI as it was at ``PYPI_AS_OF``
    (``UV_EXCLUDE_NEWER``), not as it is today."""
    if request.node.get_closest_marker("pypi"):
        from support import PYPI_AS_OF

        monkeypatch.setenv("UV_EXCLUDE_NEWER", PYPI_AS_OF)


@pytest.fixture
def hpcenv_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated HPCENV_HOME for one test."""
    home = tmp_path / "hpcenv-home"
    monkeypatch.setenv("HPCENV_HOME", str(home))
    return home


@pytest.fixture
def no_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A login node without SLURM or modules: PATH holds only this Python's directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}")
    monkeypatch.delenv("MODULEPATH", raising=False)
    monkeypatch.delenv("LMOD_CMD", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
