"""Where hpcenv keeps things. One place, so every module agrees.

``$HPCENV_HOME`` (default ``./.hpcenv`` in the working directory) holds:

- ``venvs/<profile>``: the built environment of a profile, a symlink switched
  atomically to the latest complete build ``venvs/<profile>-<stamp>``;
- ``cache/``: built wheels (flash-attn) keyed by their ABI;
- ``logs/``: build logs and JSON build reports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HPCENV_HOME") or Path.cwd() / ".hpcenv").absolute()


def venvs_dir() -> Path:
    return home() / "venvs"


def venv_dir(profile_name: str) -> Path:
    """The stable path of a profile's environment (a symlink to the current build)."""
    return venvs_dir() / profile_name


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HPCENV_CACHE") or home(env) / "cache").absolute()


def logs_dir() -> Path:
    return home() / "logs"


def repo_dir(name: str) -> Path:
    """A top-level directory shipped with hpcenv (``probes``, ``sitecustomize``, ``envs``):
    the source checkout's in development, the wheel's ``_<name>`` copy when installed."""
    here = Path(__file__).resolve().parent
    for candidate in (here / f"_{name}", here.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hpcenv installation is missing its {name}/ directory")
