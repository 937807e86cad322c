"""A real target venv with the launchers researchers use: CPU torch 2.13.0 (the
wheelhouse), accelerate and DeepSpeed from PyPI (pinned).

Built once and kept in the temp directory (keyed by its contents, guarded by a file
lock; ``.complete`` written only when every install succeeded), like ``probe_env``'s
venv, so CI pays PyPI and the install once per machine; uv's cache makes a rebuild
fast. DeepSpeed's setup imports torch: it is installed without build isolation
(``--no-build-isolation-package deepspeed``) and without building its ops
(``DS_BUILD_OPS=0``: they are JIT-built when first used).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from support import AS_OF, require
from support.probe_env import TORCH, torch_wheel_available, wheel_dirs

ACCELERATE = "accelerate==1.15.0"
DEEPSPEED = "deepspeed==0.19.8"
VENV = (
    Path(tempfile.gettempdir()) / "hpcenv-test-launchers-py311-torch2.13.0-cpu-acc1.15.0-ds0.19.8"
)


def _build(venv: Path, *steps: list[str]) -> None:
    """``venv`` (Python 3.11) with each step's ``uv pip install`` in turn, from the
    wheelhouse and PyPI; ``.complete`` only when every step installed."""
    uv = shutil.which("uv")
    assert uv is not None
    python = venv / "bin" / "python"
    if not python.exists():
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([uv, "venv", str(venv), "--python", "3.11", "-q"], check=True)
    links = [a for d in wheel_dirs() if Path(d).is_dir() for a in ("--find-links", d)]
    for words in steps:
        done = subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(python), *AS_OF, *links, *words],
            capture_output=True, text=True, env={**os.environ, "DS_BUILD_OPS": "0"},
        )  # fmt: skip
        require("launchers", done.returncode == 0, f"uv pip install failed: {done.stderr[-800:]}")
    (venv / ".complete").write_text("ok\n")


def _built_once(venv: Path, *steps: list[str]) -> Path:
    """``venv`` built by the first session that asks (a file lock), then reused."""
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    require("torch-wheel", torch_wheel_available(), "no torch 2.13.0 cp311 wheel in /opt/wheels")
    with open(venv.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            _build(venv, *steps)
    return venv


#: DeepSpeed's CPU accelerator JIT-builds its shm comm op at ``init_distributed``.
SHM_OP = (
    "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder as B; "
    "print(B().load(verbose=False))"
)


def extensions_dir(venv: Path) -> Path:
    """Where the JIT-built ops of ``venv``'s DeepSpeed are kept (TORCH_EXTENSIONS_DIR),
    beside the venv: its shm comm op, built once per machine like the venv (the
    ``launcher_ops`` fixture). In the session's own ``XDG_CACHE_HOME`` (``per_user_cache``)
    every session built it again, inside a launcher test whose point is the launch. The
    deepspeed probe's test, whose point is the build, builds into a fresh directory."""
    return venv.with_name(f"{venv.name}-torch-extensions")


def _ops_built_once(venv: Path) -> Path:
    """``extensions_dir(venv)`` with the shm comm op, built by the first session that asks
    (a file lock; ``.complete`` only after the build: a build cut short, whose lock file
    torch would wait on forever, is removed and made again)."""
    ext = extensions_dir(venv)
    with open(ext.with_name(f"{ext.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (ext / ".complete").exists():
            shutil.rmtree(ext, ignore_errors=True)
            ext.mkdir()
            done = subprocess.run(
                [str(venv / "bin" / "python"), "-c", SHM_OP],
                env={**os.environ, "TORCH_EXTENSIONS_DIR": str(ext), "DS_ACCELERATOR": "cpu"},
                capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            require("launchers", done.returncode == 0, f"shm op: {done.stderr[-800:]}")
            (ext / ".complete").write_text("ok\n")
    return ext


@pytest.fixture(scope="session", name="launcher_venv")
def launcher_venv_fixture() -> Path:
    """The venv (its directory) with CPU torch, accelerate and DeepSpeed."""
    return _built_once(
        VENV,
        [TORCH, "numpy", "setuptools", "wheel", ACCELERATE, DEEPSPEED,
         "--no-build-isolation-package", "deepspeed"],
    )  # fmt: skip


#: An old DeepSpeed (no --no_ssh/--node_rank: hpcenv starts its per-node launch module).
OLD_DEEPSPEED = "deepspeed==0.14.4"
OLD_VENV = Path(tempfile.gettempdir()) / "hpcenv-test-launchers-py311-torch2.13.0-cpu-ds0.14.4"


@pytest.fixture(scope="session", name="old_deepspeed_venv")
def old_deepspeed_venv_fixture() -> Path:
    """A venv with CPU torch and DeepSpeed 0.14.4 (built once, like ``launcher_venv``)."""
    return _built_once(
        OLD_VENV,
        [TORCH, "numpy", "setuptools", "wheel"],  # deepspeed's setup imports them
        [TORCH, OLD_DEEPSPEED, "--no-build-isolation-package", "deepspeed"],
    )


@pytest.fixture(scope="session", name="launcher_ops")
def launcher_ops_fixture(launcher_venv: Path) -> Path:
    """TORCH_EXTENSIONS_DIR for ``launcher_venv``, its DeepSpeed's shm comm op built."""
    return _ops_built_once(launcher_venv)
