"""The deepspeed probe in real environments: the launcher venv (CPU torch 2.13.0,
DeepSpeed 0.19.8 from PyPI, ``launcher_env``), where it builds DeepSpeed's CPUAdam op
with g++ for real (into a fresh TORCH_EXTENSIONS_DIR), and the probe venv without
DeepSpeed, where it skips saying how to add it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _probe(venv: Path, tmp_path: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "probe", "deepspeed", "--env", str(venv), "--json",
         "--timeout", "500"],
        env={**os.environ, "HPCENV_HOME": str(tmp_path / "home"),
             "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 5), done.stderr
    result: dict[str, object] = json.loads(done.stdout)["results"][0]
    return result


def test_the_probe_builds_a_real_deepspeed_op(launcher_venv: Path, tmp_path: Path) -> None:
    r = _probe(launcher_venv, tmp_path)
    assert r["status"] == "pass", r
    assert "deepspeed 0.19.8, accelerator cpu" in str(r["summary"])
    assert "CPUAdamBuilder built and loaded" in str(r["summary"])
    assert list((tmp_path / "ext").rglob("cpu_adam*.so")), "no op was built"


def test_without_deepspeed_the_probe_skips_with_the_fix(probe_python: Path, tmp_path: Path) -> None:
    r = _probe(probe_python.parent.parent, tmp_path)
    assert r["status"] == "skip" and "deepspeed is not installed" in str(r["summary"])
    assert "add deepspeed to your project" in str(r["remedy"])
