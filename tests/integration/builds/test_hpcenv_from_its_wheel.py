"""hpcenv installed from its own wheel runs probes: the probe scripts ship inside the
wheel (``hpcenv/_probes``) and the target environment imports the probe kit, and
nothing else of hpcenv nor its dependencies, from ``paths.kit_path``.

Real parts: ``uv build`` of this checkout, ``uv pip install`` of the wheel (and its
dependencies from PyPI or the uv cache) into a fresh venv, a second bare venv as the
target, and the installed ``hpcenv probe`` command run outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO, require

pytestmark = pytest.mark.slow


def _uv(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    uv = shutil.which("uv")
    assert uv is not None
    return subprocess.run([uv, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_probes_run_from_the_installed_wheel(tmp_path: Path) -> None:
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    built = _uv("build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(REPO))
    require("pypi", built.returncode == 0, f"uv build failed: {built.stderr[-500:]}")
    (wheel,) = (tmp_path / "dist").glob("hpcenv-*.whl")
    for venv in ("installed", "target"):
        done = _uv("venv", "-q", "--python", "3.11", str(tmp_path / venv))
        assert done.returncode == 0, done.stderr
    inst = tmp_path / "installed" / "bin"
    done = _uv("pip", "install", "-q", "--python", str(inst / "python"), str(wheel))
    require("pypi", done.returncode == 0, f"installing the wheel failed: {done.stderr[-500:]}")

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HPCENV_HOME"] = str(home)
    target = tmp_path / "target"
    run = subprocess.run(
        [str(inst / "hpcenv"), "probe", "gpu-health", "ofi", "--json", "--env", str(target)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: nothing may come from src/ or probes/ here
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    by_name = {r["name"]: r for r in report["results"]}
    assert set(by_name) == {"gpu-health", "ofi"}
    for r in by_name.values():  # ran to the end in the target (a kit import error crashes)
        assert r["status"] in ("pass", "skip"), r
        assert r["ranks"][0]["details"]["checks"], r
    assert "no NVIDIA GPU" in by_name["gpu-health"]["summary"]

    # what the target's python saw: the kit, and neither the rest of hpcenv nor rich
    (kit_root,) = (home / "kit").iterdir()
    files = sorted(str(p.relative_to(kit_root)) for p in kit_root.rglob("*.py"))
    assert "hpcenv/__init__.py" in files and "hpcenv/kit/probe.py" in files
    assert all(f == "hpcenv/__init__.py" or f.startswith("hpcenv/kit/") for f in files)
    check = (
        "import importlib.util as u, hpcenv.kit.probe as p; "
        "print(p.__file__, u.find_spec('hpcenv.runner'), u.find_spec('rich'))"
    )
    seen = subprocess.run(
        [str(target / "bin" / "python"), "-c", check],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(kit_root)},
        timeout=60,
    )
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == [str(kit_root / "hpcenv" / "kit" / "probe.py"), "None", "None"]
