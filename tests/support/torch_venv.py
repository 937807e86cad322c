"""The torch venv fixture for tests that run probes on SLURM: ``probe_env``'s venv.

One builder for the CPU torch + numpy + Ray venv (``probe_env.build_probe_venv``:
cached across sessions, locked, retried after a failed install), under the fixture
name these tests use: ask for ``torch_python`` (``tests/conftest.py`` registers it);
tests that need Ray also call ``require("ray", has_ray(torch_python), ...)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.probe_env import build_probe_venv


@pytest.fixture(scope="session", name="torch_python")
def torch_venv_fixture() -> Path:
    """The python of the venv holding CPU torch, numpy and (when PyPI answered) Ray."""
    return build_probe_venv()
