"""Shared by the probe tests: a real target environment and a way to load probe modules.

``probe_python`` is a real uv venv (Python 3.11) with the CPU torch 2.13.0 wheel from
the wheelhouse, numpy, and Ray and JAX (CPU) from PyPI: the probes run in it exactly as they run
in a built environment. It is the tests' one such venv (``torch_venv.py``'s fixture
is this one too). It is built once and kept in the temp directory (keyed by its
contents, guarded by a file lock), so repeated sessions reuse it; the uv cache makes
a rebuild fast. ``.complete`` is written only when every install (Ray included)
succeeded: after a failed one (PyPI unreachable) this session goes on with what was
installed and the next session installs again, in place (never removing a venv a
concurrent session may be using).

A test asks for ``probe_python`` by name (``tests/conftest.py`` registers it).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from hpcenv.kit import registry
from support import AS_OF, REPO, require

PROBES = REPO / "probes"
TORCH = "torch==2.13.0+cpu"
RAY = "ray>=2.49"
JAX = "jax==0.7.2"  # CPU: jax and jaxlib from PyPI (the jax probe's multi-process psum)
VENV = Path(tempfile.gettempdir()) / "hpcenv-test-probe-venv-py311-torch2.13.0-cpu"


def wheel_dirs() -> list[str]:
    dirs = [d for d in os.environ.get("PIP_FIND_LINKS", "").split() if d]
    return list(dict.fromkeys([*dirs, "/opt/wheels"]))


def torch_wheel_available() -> bool:
    return any(
        Path(d).is_dir() and any(Path(d).glob("torch-2.13.0*cp311*.whl")) for d in wheel_dirs()
    )


def _build(venv: Path) -> bool:
    """Create the venv if needed and install into it; True when every install succeeded.

    Installs are repeated in place (uv skips what is there); the venv is recreated
    only when it has no python at all.
    """
    uv = shutil.which("uv")
    assert uv is not None
    python = venv / "bin" / "python"
    if not python.exists():
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([uv, "venv", str(venv), "--python", "3.11", "-q"], check=True)
    links = [a for d in wheel_dirs() if Path(d).is_dir() for a in ("--find-links", d)]
    base = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *AS_OF, *links, TORCH, "numpy"],
        capture_output=True,
        text=True,
    )
    require("torch-wheel", base.returncode == 0, f"uv pip install failed: {base.stderr[-500:]}")
    # Ray from PyPI; a failure (offline) leaves a torch-only venv: the Ray tests skip
    ray = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *AS_OF, RAY],
        capture_output=True,
        text=True,
    )
    (venv / ".ray-install.log").write_text(ray.stdout + ray.stderr)
    jax = _install(python, JAX, "jax")
    if jax:
        (venv / ".jax-complete").write_text("ok\n")
    return ray.returncode == 0 and jax


#: This session's venv once built (several test modules import the fixture).
_READY: list[Path] = []


def build_probe_venv() -> Path:
    """The venv's python, building (or finishing) the venv unless a complete one exists."""
    if _READY:
        return _READY[0]
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    require("torch-wheel", torch_wheel_available(), "no torch 2.13.0 cp311 wheel in /opt/wheels")
    lock_path = VENV.with_suffix(".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (VENV / ".complete").exists() and _build(VENV):
            (VENV / ".complete").write_text("ok\n")
        older = (VENV / ".complete").exists() and not (VENV / ".jax-complete").exists()
        if older and _install(VENV / "bin" / "python", JAX, "jax"):  # made before the jax probe
            (VENV / ".jax-complete").write_text("ok\n")
    _READY.append(VENV / "bin" / "python")
    return _READY[0]


def _install(python: Path, requirement: str, what: str) -> bool:
    """``uv pip install`` from PyPI into the venv; its output kept as ``.<what>-install.log``."""
    uv = shutil.which("uv")
    assert uv is not None
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *AS_OF, requirement],
        capture_output=True,
        text=True,
    )
    (python.parent.parent / f".{what}-install.log").write_text(done.stdout + done.stderr)
    return done.returncode == 0


@pytest.fixture(scope="session")
def probe_python() -> Path:
    """Python of a real venv with CPU torch, numpy (and Ray when PyPI was reachable)."""
    return build_probe_venv()


def has_ray(python: Path) -> bool:
    return (
        subprocess.run(
            [str(python), "-c", "import ray"], capture_output=True, timeout=120
        ).returncode
        == 0
    )


def has_jax(python: Path) -> bool:
    return (
        subprocess.run(
            [str(python), "-c", "import jax"], capture_output=True, timeout=120
        ).returncode
        == 0
    )


def load_probe(name: str) -> ModuleType:
    """A probe script (``hpcenv.kit.registry`` name) as a module: its pure functions,
    without running its main."""
    path = PROBES / registry.script_name(name)
    spec = importlib.util.spec_from_file_location(f"hpcenv_probe_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
