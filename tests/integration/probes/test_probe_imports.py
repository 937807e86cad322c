"""The imports probe in a real venv: installed packages import with versions and their
compiled extensions load; a missing package fails naming it."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support.probe_env import load_probe

imports = load_probe("imports")


def run(python: Path, tmp_path: Path, install: list[str]) -> object:
    spec = runner.ProbeSpec(
        name="imports", python=python, config={"install": install}, timeout_s=180
    )
    return runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)


def test_profile_packages_import(probe_python: Path, tmp_path: Path) -> None:
    result = run(probe_python, tmp_path, ["numpy>=1.20"])
    assert result.status is Status.PASS, result.summary
    checks = {c["name"]: c for c in result.ranks[0].details["checks"]}
    assert set(checks) == {"torch", "numpy"}  # torch is always checked
    assert checks["numpy"]["details"]["extensions_checked"] > 0
    assert checks["torch"]["details"]["version"] == "2.13.0+cpu"


def test_missing_package_fails_naming_it(probe_python: Path, tmp_path: Path) -> None:
    result = run(probe_python, tmp_path, ["numpy", "no-such-package-hpcenv>=1"])
    assert result.status is Status.FAIL
    assert "no-such-package-hpcenv" in result.summary
    assert "no-such-package-hpcenv>=1" in result.remedy


def test_distribution_and_import_names() -> None:
    assert imports.dist_name("ray[default]>=2.49") == "ray"
    assert imports.dist_name("flash-attn==2.8.3; platform_machine=='x86_64'") == "flash-attn"
    assert imports.dist_name("https://example.org/x.whl") is None
    assert imports.import_names(md.distribution("rich")) == ["rich"]
    pytest_modules = imports.import_names(md.distribution("pytest"))
    assert "pytest" in pytest_modules and "_pytest" not in pytest_modules  # private: skipped


def test_remedy_for_linker_errors() -> None:
    assert "another torch" in imports.remedy_for("flash-attn", "undefined symbol: _ZN3c10")
    assert "glibc" in imports.remedy_for("x", "version `GLIBC_2.34' not found")
