"""``hpcenv build --project``: an existing project's lock sends torch to cu130 (as
open-instruct's does on aarch64); the build installs the project's set with torch
swapped for the planned cu126 variant of the same version (the CUDA 13 runtime never
installed), into ``venvs/<profile>-<project>``, and never writes a project file. Real uv
against the stand-in PEP 503 index on 127.0.0.1 (see ``buildkit``: its wheels stand in
for download.pytorch.org's and PyPI's). The CUDA libraries themselves: test_swap_stack.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from hpcenv.build import builder as build
from hpcenv.build import swap
from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.job import targets
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.profile import schema as profile
from hpcenv.project import torch_wish
from hpcenv.project.request import ProjectRequest
from hpcenv.runner import probes as runner
from hpcenv.tools import uv
from hpcenv.utils.errors import NoCompatibleBuild
from support import FACTS
from support.buildkit import CU12_RUNTIME, CU13_RUNTIME, StandInIndex, stand_in_plan
from support.fakenodes import node

PYPROJECT = """\
[project]
name = "trainer"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["torch==2.9.1", "torchext"]

[tool.uv]
environments = ["sys_platform == 'linux'"]

[tool.uv.sources]
torch = {{ index = "pytorch-cu130" }}

[[tool.uv.index]]
name = "pytorch-cu130"
url = "{url}/cu130"
explicit = true
"""


@pytest.fixture
def project(
    index: StandInIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hpcenv_home: Path
) -> Path:
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"{index.url}/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    proj = tmp_path / "trainer"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(PYPROJECT.format(url=index.url))
    (proj / "train.py").write_text("import torchext\n")
    subprocess.run(
        [*uv.uv_argv(), "lock", "--project", str(proj)],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_PYTHON": "3.11"},
        timeout=300,
    )
    assert "2.9.1+cu130" in (proj / "uv.lock").read_text()
    return proj


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    } | {str(p.relative_to(root)) + "/": "dir" for p in root.rglob("*") if p.is_dir()}


def run_in(venv: Path, code: str) -> str:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_swap_cu130_to_cu126_in_a_project(index: StandInIndex, project: Path) -> None:
    before = snapshot(project)
    plan = stand_in_plan(index.url, profile="isambard", fixes=("sm90a",))
    request = ProjectRequest(directory=project)
    result = build.build(plan, Facts(arch="x86_64"), project=request)
    assert result.venv.name == "isambard-trainer"  # beside the profile's own environment
    assert result.report.serialize()["profile"] == "isambard"
    assert result.report.serialize()["environment"] == "isambard-trainer"
    assert result.report.serialize()["fixes"] == [
        "hpcenv_fix_sm90a"
    ]  # the plan lists it: installed
    assert list(result.venv.glob("lib/python3*/site-packages/hpcenv_fix_sm90a.pth"))
    swap = result.report.serialize()["project"]
    assert swap["torch_before"] == "2.9.1+cu130"
    assert swap["torch_after"] == "2.9.1+cu126"
    dropped = [c["name"] for c in swap["changes"] if c["after"] is None]
    assert dropped == [CU13_RUNTIME[0]]  # torch's CUDA 13 wheel: left to the resolver
    assert swap["checked"] == ["torchext"]  # built against torch: imported after the swap
    pins = uv.freeze(result.venv)
    assert pins["torch"] == "2.9.1+cu126"
    assert pins[CU12_RUNTIME[0]] == CU12_RUNTIME[1]
    assert CU13_RUNTIME[0] not in pins
    assert run_in(result.venv, "import torchext; print(torchext.TORCH)") == "2.9.1+cu126"
    assert snapshot(project) == before, "the project's files changed"
    assert not (project / ".venv").exists()

    # probe --env and sbatch take the environment by its name, with its profile's settings
    target = runner.resolve_target("isambard-trainer")
    assert target.name == "isambard-trainer" and target.profile is not None
    assert target.profile.name == "isambard" and target.python.exists()
    job = targets.render(profile.load("isambard"), "probe", venv="isambard-trainer")
    assert "--env isambard-trainer" in job.script

    again = build.build(plan, Facts(arch="x86_64"), project=request)
    assert again.noop and again.target == result.target

    # the project's lock changes -> the stamp changes -> a real rebuild, still swapped
    lock = project / "uv.lock"
    lock.write_text(lock.read_text() + "\n")
    third = build.build(plan, Facts(arch="x86_64"), project=request)
    assert not third.noop
    assert (
        json.loads(json.dumps(third.report.serialize()["project"]))["torch_after"] == "2.9.1+cu126"
    )


def test_project_without_lock_is_built_from_its_pyproject(
    index: StandInIndex, tmp_path: Path, hpcenv_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No uv.lock: the pyproject's dependencies with the node's torch (its [tool.uv.sources]
    index for torch is not used: torch comes from the plan), the project from a copy."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"{index.url}/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    proj = tmp_path / "nolock"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(PYPROJECT.format(url=index.url))
    result = build.build(
        stand_in_plan(index.url), Facts(arch="x86_64"), project=ProjectRequest(directory=proj)
    )
    done = result.report.serialize()["project"]
    assert done["torch_after"] == "2.9.1+cu126"
    pins = uv.freeze(result.venv)
    assert pins["torch"] == "2.9.1+cu126" and "torchext" in pins
    # no [build-system]: its dependencies, not the project itself (as uv sync treats it)
    assert "trainer" not in pins and any("no [build-system]" in w for w in done["warnings"])
    assert sorted(p.name for p in proj.iterdir()) == ["pyproject.toml"]


V100 = collect.load(FACTS / "v100-supercloud.json")


def supercloud_plan(version: str, backend: str = "auto") -> Plan:
    """The real supercloud profile's plan for the recorded V100 node, torch ``version``."""
    p = profile.load("supercloud")
    p = replace(p, torch=replace(p.torch, version=f"=={version}", backend=backend))
    return make_plan(p, V100, environ={})


def test_swap_resolves_the_variant_for_the_projects_torch_version() -> None:
    """The plan picks cu128 for torch 2.9.1 on a V100 (it still carries sm_70 there); a
    project locking 2.11 must not get 2.11+cu128, which has no sm_70, but 2.11+cu126."""
    plan = supercloud_plan("2.9.1")
    assert (plan.torch.version, plan.torch.backend) == ("2.9.1", "cu128")
    same = torch_wish.plan_for_version(plan, "2.9.1", V100)
    assert torch_wish.target_requirement(same, "2.9.1") == "torch==2.9.1+cu128"
    for_project = torch_wish.plan_for_version(plan, "2.11.0", V100)
    assert (for_project.torch.version, for_project.torch.backend) == ("2.11.0", "cu126")
    assert for_project.torch.index_url == "https://download.pytorch.org/whl/cu126"
    assert torch_wish.target_requirement(for_project, "2.11.0") == "torch==2.11.0+cu126"


def test_swap_keeps_the_profiles_pin_for_the_projects_version() -> None:
    pinned = torch_wish.plan_for_version(supercloud_plan("2.9.1", "cpu"), "2.11.0", V100)
    assert torch_wish.target_requirement(pinned, "2.11.0") == "torch==2.11.0+cpu"
    # torch 2.13 publishes no cu128: nothing runs here (exit 3), not a guessed requirement
    with pytest.raises(NoCompatibleBuild, match=r"locks torch 2\.13\.0.*publishes no cu128"):
        torch_wish.plan_for_version(supercloud_plan("2.9.1", "cu128"), "2.13.0", V100)


def test_swap_with_another_plan_version_uses_the_variant_for_the_project(
    index: StandInIndex, project: Path, tmp_path: Path
) -> None:
    """Real uv: the project locks 2.9.1+cu130; the plan was made for torch 2.11.0 (cu130
    there); on a 565-driver node 2.9.1 needs cu126, so the swap installs 2.9.1+cu126 from
    the stand-in ``/cu126`` index (keeping cu130 would not run on that driver)."""
    plan = stand_in_plan(
        index.url,
        torch=TorchChoice(
            version="2.11.0",
            backend="cu130",
            index_url=f"{index.url}/cu130",
            index_base=index.url,
        ),
    )
    h100_565 = node("x86_64", "565.57.01", ("9.0",))
    venv = tmp_path / "venv"
    uv.venv(venv, "3.11")
    request = ProjectRequest(directory=project)
    result = swap.sync_and_swap(request, venv, plan, log=None, facts=h100_565)
    assert result.torch_before == "2.9.1+cu130"
    assert (result.variant, result.torch_after) == ("cu126", "2.9.1+cu126")
    changes = {c.name: c.after for c in result.changes}
    assert changes["torch"] == "torch==2.9.1+cu126"
    assert changes[CU13_RUNTIME[0]] is None
    assert "resolved for 2.9.1" in result.warnings[0]
    assert run_in(venv, "import torchext; print(torchext.TORCH)") == "2.9.1+cu126"
