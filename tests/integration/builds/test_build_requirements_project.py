"""``hpcenv build local --project`` of real projects without a ``uv.lock``, with real uv:
the CPU torch 2.13.0 from the wheelhouse (/opt/wheels), the rest from PyPI or the uv
cache, then the build's import check. minGPT (a ``setup.py`` project whose metadata only
setuptools knows), whisper (a hand-written requirements file with a bare ``torch`` line
and a marker), BoTorch and DiT (conda ``environment.yml`` files); origins in each ORIGIN
file."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import DATA
from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow
PROJECTS = DATA / "projects"


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def build(name: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    require_local_build()
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = hpcenv("build", "local", "--project", str(project), "--json", *extra, env=env)
    return done, project


def test_setup_py_project(tmp_path: Path) -> None:
    before = snapshot(PROJECTS / "mingpt")
    done, project = build("mingpt", tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    proj = report["project"]
    assert proj["torch_after"] == "2.13.0+cpu"
    assert proj["installed_from_copy"] == ["."]
    assert proj["checked"] == ["mingpt"]  # built against torch: imported by the check
    (torch,) = [c for c in proj["changes"] if c["name"] == "torch"]
    # minGPT's install_requires (a literal ['torch']) read as data: any torch
    assert "profile local's" in torch["why"] and "asks for torch (any)" in torch["why"]
    venv = Path(report["venv"])
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import mingpt, torch; print(torch.__version__)"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "2.13.0+cpu", out.stderr
    assert snapshot(project) == before  # no minGPT.egg-info, nothing written there
    # the profile's [packages] install (numpy, ray) joined nothing: not asked for
    assert not (venv / "lib" / "python3.11" / "site-packages" / "ray").exists()


def test_requirements_project(tmp_path: Path) -> None:
    done, _ = build("whisper", tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    proj = report["project"]
    assert proj["torch_before"] == "torch" and proj["torch_after"] == "2.13.0+cpu"
    venv = Path(report["venv"])
    code = "import numba, tiktoken, tqdm, more_itertools, torch; print(torch.__version__)"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "2.13.0+cpu", out.stderr


def test_conda_project(tmp_path: Path) -> None:
    """BoTorch's environment.yml (issue 21): ``pytorch>=2.0.1`` -> torch (the wheelhouse's
    CPU 2.13.0), gpytorch/linear_operator pinned and pyro-ppl from PyPI, conda's channels
    noted as ignored; the build's import check passes and the packages import with it."""
    done, project = build("botorch", tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    proj = report["project"]
    assert proj["selection"].startswith("environment.yml")
    assert proj["torch_before"] == "torch>=2.0.1" and proj["torch_after"] == "2.13.0+cpu"
    assert any("channels pytorch, gpytorch, conda-forge ignored" in w for w in proj["warnings"])
    assert "pyro-ppl" in proj["checked"]  # requires torch: imported by the check
    code = (
        "import gpytorch, linear_operator, pyro, multipledispatch, scipy, torch; "
        "print(torch.__version__, gpytorch.__version__, linear_operator.__version__)"
    )
    venv = Path(report["venv"])
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2.13.0+cpu", "1.13", "0.5.3"]
    assert sorted(p.name for p in project.iterdir()) == ["ORIGIN", "environment.yml"]


def test_conda_project_gets_the_build_its_file_names(tmp_path: Path) -> None:
    """DiT's environment.yml: ``pytorch>=1.13`` beside ``pytorch-cuda=11.7`` is what conda
    installs, torch 2.0.1+cu117 (the newest release built for CUDA 11.7; a node without
    GPUs runs it on the CPU), from download.pytorch.org/whl/cu117: unreachable from this
    machine, so the build fails (exit 4) naming where torch comes from, leaving no
    environment behind."""
    done, _ = build("dit", tmp_path)
    if done.returncode == 0:  # a machine that reaches the PyTorch index
        report = json.loads(done.stdout)
        assert report["project"]["torch_after"] == "2.0.1+cu117"
        return
    assert done.returncode == 4, done.stderr
    assert "(torch torch>=1.13 -> cu117) failed" in done.stderr
    assert "download.pytorch.org/whl/cu117" in done.stderr
    assert not (tmp_path / "home" / "venvs" / "local-dit").exists()


# --- plan PROFILE --project: what a build would install, before it is installed ----------


def plan_json(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = hpcenv("plan", "local", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert isinstance(data, dict)
    return data


def test_plan_lists_the_install_set_and_the_changes(tmp_path: Path) -> None:
    require_local_build()
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    project = plan_json("--project", str(PROJECTS / "mingpt"), env=env)["project"]
    assert isinstance(project, dict)
    assert "torch==2.13.0+cpu" in project["install"] and "." in project["install"]
    assert [c["name"] for c in project["changes"]] == ["torch"]
    whisper = plan_json("--project", str(PROJECTS / "whisper" / "requirements.txt"), env=env)
    install = whisper["project"]["install"]  # type: ignore[index]
    assert "torch==2.13.0+cpu" in install and any(p.startswith("tiktoken==") for p in install)
    assert not any(p.startswith("ray==") for p in install)  # the profile's: not asked for
    with_profile = plan_json("--project", str(PROJECTS / "whisper"), "--with-profile-packages",
                             env=env)  # fmt: skip
    assert any(p.startswith("ray==") for p in with_profile["project"]["install"])  # type: ignore[index]
    assert not (tmp_path / "home" / "venvs").exists()  # nothing was built


def test_plan_project_options_need_a_project(tmp_path: Path) -> None:
    done = hpcenv("plan", "local", "--extra", "x", env={"HPCENV_HOME": str(tmp_path)})
    assert done.returncode == 2 and "go with --project PATH" in done.stderr
    done = hpcenv("plan", "local", "--project", str(tmp_path), env={"HPCENV_HOME": str(tmp_path)})
    assert done.returncode == 2 and "no uv.lock, pyproject.toml, setup.py" in done.stderr


def test_lock_project_is_a_hashed_lock_uv_pip_sync_accepts(tmp_path: Path) -> None:
    from hpcenv.tools import uv

    require_local_build()
    out = tmp_path / "mingpt-local.txt"
    env = {"HPCENV_HOME": str(tmp_path / "home"), "HPCENV_LOCKFILES": str(tmp_path / "locks")}
    done = hpcenv("lock", "local", "--project", str(PROJECTS / "mingpt"), "--output", str(out),
                  env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("# hpcenv lock local --project ")
    assert "\n--find-links " in text  # the wheelhouse torch comes from, named in the file
    assert "filelock==" in text and "--hash=sha256:" in text
    assert not (tmp_path / "locks").exists()  # never into hpcenv's own lockfiles/
    venv = tmp_path / "v"
    subprocess.run([*uv.uv_argv(), "venv", "-q", "--python", "3.11", str(venv)], check=True)
    # uv builds the project's metadata where the lock's `.` is (setuptools writes its
    # egg-info there): from a copy, never into the test data
    copy = tmp_path / "mingpt"
    shutil.copytree(PROJECTS / "mingpt", copy)
    sync = subprocess.run(
        [*uv.uv_argv(), "pip", "sync", str(out), "--python", str(venv / "bin" / "python"),
         "--dry-run"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert sync.returncode == 0, sync.stderr
    assert "torch==2.13.0+cpu" in sync.stderr and "mingpt" in sync.stderr.lower()
