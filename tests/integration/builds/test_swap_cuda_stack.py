"""One CUDA stack after a swap (issue 12): the shared-path collision of the cu12 and cu13
wheels, reproduced with uv alone and with hpcenv's former swap, and gone with the
resolve-once swap. Real uv, real ELF libraries (gcc), stand-in wheels of both majors on
127.0.0.1 (``standin_cuda``); the import of the stand-in torch loads its
``libtorch_cuda.so`` through the loader, as on a node.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpcenv.binaries import cudalibs
from hpcenv.build import builder as build
from hpcenv.build import fixes
from hpcenv.models.facts import Facts
from hpcenv.project.request import ProjectRequest
from hpcenv.tools import uv
from hpcenv.utils.errors import BuildFailed
from support.buildkit import StandInIndex, stand_in_plan
from support.standin_cuda import build_index, make_project, snapshot

CU12_PIN = "nccl 22705 cudart 12060"


@pytest.fixture
def uv_env(
    cuda_index: StandInIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"{cuda_index.url}/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    return {**os.environ}


def uv_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*uv.uv_argv(), *args], env=env, capture_output=True, text=True, timeout=300, check=True
    )


def python_in(venv: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", code], capture_output=True, text=True, timeout=60
    )


def test_collision_with_uv_alone(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path
) -> None:
    """The cu12/cu13 shared-path collision with uv alone: install nccl-cu13, then nccl-cu12,
    uninstall the cu13 one (both wheels own the same nvidia/nccl files)."""
    venv = tmp_path / "venv"
    uv_run(uv_env, "venv", "-q", "-p", "3.11", str(venv))
    py = str(venv / "bin" / "python")
    uv_run(uv_env, "pip", "install", "--python", py, "nvidia-nccl-cu13")
    uv_run(uv_env, "pip", "install", "--python", py, "nvidia-nccl-cu12")
    site = fixes.site_packages(venv)
    claimed = cudalibs.owners(site)[0]["nvidia/nccl/lib/libnccl.so.2"]
    assert sorted(claimed) == ["nvidia-nccl-cu12", "nvidia-nccl-cu13"]  # one file, two owners
    uv_run(uv_env, "pip", "uninstall", "--python", py, "nvidia-nccl-cu13")
    assert not (site / "nvidia" / "nccl" / "lib" / "libnccl.so.2").exists()
    assert "nvidia-nccl-cu12" in uv_run(uv_env, "pip", "list", "--python", py).stdout


def test_former_swap_loses_libnccl(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path
) -> None:
    """hpcenv's former swap: sync the lock (the cu130 stack), install torch+cu126 over it,
    uninstall the CUDA 13 wheels nothing needs: libnccl.so.2 is gone, the import fails,
    and the check names the missing library."""
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    venv = tmp_path / "venv"
    uv_run(uv_env, "venv", "-q", "-p", "3.11", str(venv))
    uv_run(
        {**uv_env, "UV_PROJECT_ENVIRONMENT": str(venv)},
        "sync", "--frozen", "--project", str(project), "--no-install-project",
    )  # fmt: skip
    py = str(venv / "bin" / "python")
    assert python_in(venv, "import torch; print(torch.cuda_versions())").stdout.strip() == (
        "nccl 22707 cudart 13000"
    )
    uv_run(
        uv_env, "pip", "install", "--python", py, "--index", f"{cuda_index.url}/cu126",
        "torch==2.9.1+cu126", "--reinstall-package", "torch",
    )  # fmt: skip
    uv_run(uv_env, "pip", "uninstall", "--python", py, "nvidia-nccl-cu13", "nvidia-cuda-runtime")
    check = cudalibs.check(fixes.site_packages(venv), 12)
    assert not check.ok
    assert any("libnccl.so.2, which is missing" in p for p in check.problems)
    done = python_in(venv, "import torch")
    assert done.returncode != 0 and "libnccl.so.2" in done.stderr


def test_swap_resolves_once_into_one_stack(
    uv_env: dict[str, str],
    cuda_index: StandInIndex,
    tmp_path: Path,
    hpcenv_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hpcenv build --project: torch 2.9.1+cu130 and torchext 0.1.0+cu130 in the lock become
    2.9.1+cu126 and torchext's CUDA 12 build; libnccl.so.2 and libcudart.so.12 are there and
    belong to CUDA 12 wheels; no CUDA 13 file is downloaded; the project's tree (a
    setuptools project, built from a copy) is byte-identical, even with the build run from it."""
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    before = snapshot(project)
    cuda_index.requested.clear()
    monkeypatch.chdir(project)
    plan = stand_in_plan(cuda_index.url, profile="standin", packages=("standin-numpy",))
    request = ProjectRequest(directory=project, with_profile_packages=True)
    result = build.build(plan, Facts(arch="x86_64"), project=request)
    assert result.venv == hpcenv_home / "venvs" / "standin-trainer"
    report = result.report.serialize()["project"]
    assert (report["torch_before"], report["torch_after"]) == ("2.9.1+cu130", "2.9.1+cu126")
    changes = {c["name"]: c for c in report["changes"]}
    assert changes["torchext"]["after"] == "torchext===0.1.0"
    assert changes["nvidia-nccl-cu13"]["after"] is None
    assert changes["standin-numpy"]["after"] == "standin-numpy"  # the profile's, added
    assert report["libraries"]["ok"] is True
    libs = report["libraries"]["objects"]["torch/lib/libtorch_cuda.so"]
    assert libs["libnccl.so.2"] == "nvidia/nccl/lib/libnccl.so.2 (nvidia-nccl-cu12 2.27.5)"
    assert libs["libcudart.so.12"].startswith("nvidia/cuda_runtime/lib/libcudart.so.12")
    assert set(report["checked"]) == {"standin-numpy", "torchext", "trainer"}
    pins = uv.freeze(result.venv)
    assert pins["torch"] == "2.9.1+cu126" and pins["torchext"] == "0.1.0"
    assert not any(n in pins for n in ("nvidia-nccl-cu13", "nvidia-cuda-runtime"))
    done = python_in(result.venv, "import trainer, torch; print(torch.cuda_versions())")
    assert done.stdout.strip() == CU12_PIN, done.stderr
    files = [p for p in cuda_index.requested if p.startswith("/files/")]
    assert files and not [p for p in files if "cu13" in p or "13.0.96" in p], files
    assert snapshot(project) == before, "the project's files changed"
    assert report["installed_from_copy"] == ["."]


def test_check_names_two_owners_and_the_wrong_major(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    uv_run(uv_env, "venv", "-q", "-p", "3.11", str(venv))
    py = str(venv / "bin" / "python")
    uv_run(
        uv_env, "pip", "install", "--python", py, "--index", f"{cuda_index.url}/cu130",
        "torch==2.9.1+cu130",
    )  # fmt: skip
    site = fixes.site_packages(venv)
    assert cudalibs.check(site, 13).ok
    wrong = cudalibs.check(site, 12)
    assert any(
        "belongs to CUDA 13 (nvidia-nccl-cu13 2.27.7), not CUDA 12" in p for p in wrong.problems
    )
    uv_run(uv_env, "pip", "install", "--python", py, "nvidia-nccl-cu12")
    both = cudalibs.check(site, 13)
    assert any(
        "claimed by nvidia-nccl-cu12 2.27.5 and nvidia-nccl-cu13 2.27.7" in p for p in both.problems
    )


def test_torch_from_a_mirror_never_the_projects_index(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    """The lock names its PyTorch index (``cuda_index``/cu130); the profile's torch index is a
    mirror (a second server): torch, its CUDA wheels and torchext's CUDA 12 build come from
    the mirror and PyPI, and the project's index is never contacted."""
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    mirror = build_index(tmp_path / "mirror")
    try:
        cuda_index.requested.clear()
        plan = stand_in_plan(mirror.url)
        result = build.build(plan, Facts(arch="x86_64"), project=ProjectRequest(directory=project))
        assert result.report.serialize()["project"]["torch_after"] == "2.9.1+cu126"
        assert not [p for p in cuda_index.requested if p.startswith("/cu130")]
        assert any(p.startswith("/cu126/torch") for p in mirror.requested)
    finally:
        mirror.stop()


@pytest.mark.slow
@pytest.mark.slow
def test_unreachable_torch_index_names_the_setting(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    plan = stand_in_plan("http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(BuildFailed, match=r"HPCENV_TORCH_INDEX_URL for a mirror"):
        build.build(plan, Facts(arch="x86_64"), project=ProjectRequest(directory=project))
    assert not (hpcenv_home / "venvs" / "standin-trainer").exists()


def test_offline_from_a_wheelhouse(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    """[packages] offline + a wheelhouse holding torch's cu126 wheel (the plan's torch_wheel)
    and the rest: the build asks no index for anything."""
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    house = cuda_index.files
    plan = stand_in_plan(
        cuda_index.url,
        torch_wheel=str(next(house.glob("torch-2.9.1+cu126-*.whl"))),
        find_links=(str(house),),
        offline=True,
    )
    cuda_index.requested.clear()
    result = build.build(plan, Facts(arch="x86_64"), project=ProjectRequest(directory=project))
    assert result.report.serialize()["project"]["torch_after"] == "2.9.1+cu126"
    assert result.report.serialize()["project"]["libraries"]["ok"] is True
    assert cuda_index.requested == []


def test_nothing_to_swap_installs_the_lock_as_it_is(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    """A node that runs the lock's cu130 build (a 580 driver): the lock's own set, no
    resolve (no ``uv pip compile`` in the log), one CUDA 13 stack."""
    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    plan = stand_in_plan(cuda_index.url, backend="cu130")
    result = build.build(plan, Facts(arch="x86_64"), project=ProjectRequest(directory=project))
    report = result.report.serialize()["project"]
    assert report["torch_before"] == report["torch_after"] == "2.9.1+cu130"
    assert report["libraries"]["ok"] and report["libraries"]["cuda_major"] == 13
    assert uv.freeze(result.venv)["torchext"] == "0.1.0+cu130"
    assert "pip compile" not in Path(str(result.report.log)).read_text()
    done = python_in(result.venv, "import torch; print(torch.cuda_versions())")
    assert done.stdout.strip() == "nccl 22707 cudart 13000"


def test_plan_of_a_cuda_13_project_lists_no_cuda_13_package(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    """``plan PROFILE --project`` (install_set.project_plan) for the project whose lock sends torch
    to cu130: the install list is torch's cu126 build and CUDA 12 wheels, not one CUDA 13
    package, and nothing is installed or downloaded but metadata. (The stand-in index on
    127.0.0.1 stands in for PyPI and download.pytorch.org, which this machine cannot reach.)"""
    from hpcenv.decide import cuda_packages
    from hpcenv.project import install_set

    project = make_project(cuda_index, tmp_path / "trainer", uv_env)
    plan = stand_in_plan(cuda_index.url, profile="standin")
    request = ProjectRequest(directory=project)
    cuda_index.requested.clear()
    wanted, _, install = install_set.project_plan(request, plan, Facts(arch="x86_64"))
    assert wanted.torch_before == "2.9.1+cu130" and "torch==2.9.1+cu126" in install
    names = [line.split("==", 1)[0].split(" @ ", 1)[0] for line in install]
    versions = [line.split("==", 1)[1] if "==" in line else "" for line in install]
    majors = {n: cuda_packages.cuda_major(n, v) for n, v in zip(names, versions, strict=True)}
    assert 13 not in majors.values(), majors
    assert 12 in majors.values()  # the CUDA 12 wheels torch's cu126 build pulls
    files = [p for p in cuda_index.requested if p.startswith("/files/") and p.endswith(".whl")]
    assert not [p for p in files if "cu13" in p], files
    assert not (hpcenv_home / "venvs").exists()


def test_a_jax_cuda13_set_under_a_cuda_12_profile_is_proven_against_its_own_stack(
    uv_env: dict[str, str], cuda_index: StandInIndex, tmp_path: Path, hpcenv_home: Path
) -> None:
    """A project without torch whose lock installs JAX's CUDA 13 plugin, built with a cu126
    profile (issue 41): built as it is, its plugin's objects proven against CUDA 13, the
    stack they belong to, read from what is installed. Before: every object was checked
    against the profile's CUDA 12 and the build failed ("... belongs to CUDA 13 ..., not
    CUDA 12")."""
    project = tmp_path / "jaxonly"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "jaxonly"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        'dependencies = ["jax-cuda13-plugin==0.7.2"]\n\n[tool.uv]\npackage = false\n'
        "environments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n"
    )
    uv_run(uv_env, "lock", "--project", str(project), "--python", "3.11")
    result = build.build(
        stand_in_plan(cuda_index.url),
        Facts(arch="x86_64"),
        project=ProjectRequest(directory=project),
    )
    report = result.report.serialize()["project"]
    assert report["torch_after"] is None
    libs = report["libraries"]
    assert libs["ok"] is True and libs["cuda_major"] == 13, libs
    assert libs["stacks"] == {
        "jax-cuda13-plugin 0.7.2": "CUDA 13, jax-cuda13-plugin 0.7.2 (CUDA 13)"
    }
    assert libs["objects"]["jax_cuda13_plugin/_prng.so"]["libcudart.so.13"] == (
        "nvidia/cu13/lib/libcudart.so.13 (nvidia-cuda-runtime 13.0.96)"
    )
