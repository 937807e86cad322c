"""A project without torch (issue 41) is planned and built as it is: ``hpcenv build
--project`` of the JAX uv.lock in tests/data/projects/jax_gpu (ORIGIN there) installs its
locked set (jax, jaxlib, ml-dtypes, numpy, opt-einsum, scipy from PyPI or the uv cache), no
torch, and the import check imports its top packages, not torch; ``plan --project`` with
its ``cuda13`` extra names the JAX plugins that cannot run on a V100 (recorded facts).
Before: both refused "the project does not install torch ...; nothing to swap" (exit 2).

On a node where the profile's own torch cannot run (the recorded V100 with driver 470,
a stand-in for an older cluster: no build of supercloud's torch 2.11.0 runs there) a
project without torch is planned and built all the same; one with torch is refused as
before (exit 3). Before: every ``--project`` there was refused for the profile's torch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import DATA, FACTS
from support.buildkit import hpcenv, require_local_build, require_pypi, require_uv

pytestmark = pytest.mark.pypi  # PyPI as of support.PYPI_AS_OF

PROJECT = DATA / "projects" / "jax_gpu"


def driver_470(tmp_path: Path) -> str:
    """The recorded V100 node with driver 470.82.01 (CUDA 11.4), as on an older cluster:
    no build of profile supercloud's torch 2.11.0 runs there."""
    facts = json.loads((FACTS / "v100-supercloud.json").read_text())
    facts["nvidia"].update(driver_version="470.82.01", cuda_driver_version="11.4")
    path = tmp_path / "v100-470.json"
    path.write_text(json.dumps(facts))
    return str(path)


@pytest.mark.slow
def test_a_jax_lock_is_built_as_it_is(tmp_path: Path) -> None:
    """On the 470 node, where profile supercloud's torch cannot run: the CPU JAX set is
    built all the same (before: exit 3, "no torch 2.11.0 build for x86_64 runs")."""
    require_local_build()
    project = tmp_path / "jax_gpu"
    shutil.copytree(PROJECT, project)
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = hpcenv(
        "build", "supercloud", "--project", str(project), "--facts", driver_470(tmp_path),
        "--json", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    proj = report["project"]
    assert (proj["torch_before"], proj["torch_after"], proj["swapped"]) == ("none", None, False)
    assert "jax" in proj["checked"]
    assert report["imports"]["torch"] is None and report["imports"]["imports"]["jax"] == "jax"
    assert any("installs no torch" in w for w in proj["warnings"])
    venv = Path(report["venv"])
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import importlib.util as u, jax; print(jax.__version__, u.find_spec('torch'))"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.split() == ["0.7.2", "None"], out.stderr


def test_plan_names_the_jax_plugins_a_v100_cannot_run(tmp_path: Path) -> None:
    require_uv()
    project = tmp_path / "jax_gpu"
    shutil.copytree(PROJECT, project)
    done = hpcenv(
        "plan", "local", "--project", str(project), "--extra", "cuda13",
        "--facts", str(FACTS / "v100-supercloud.json"), "--json",
        env={"HPCENV_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    proj = json.loads(done.stdout)["project"]
    assert proj["torch_after"] == "none" and proj["variant"] is None
    assert "jax-cuda13-plugin==0.7.2" in proj["install"]
    assert not any(line.startswith("torch==") for line in proj["install"])
    (plugin,) = [w for w in proj["warnings"] if w.startswith("jax-cuda13-plugin")]
    assert "needs compute capability >= 7.5" in plugin and plugin.endswith(
        "cannot run on this node"
    )


@pytest.mark.slow
def test_a_requirements_file_that_pulls_no_torch_gets_none(tmp_path: Path) -> None:
    """``jax[cuda13]==0.7.2`` alone (the issue's hand-written case), resolved with real uv
    from PyPI: planned without torch (before: the profile's torch added), its CUDA 13
    plugin judged for the V100 (compute capability 7.0)."""
    require_uv()
    require_pypi()
    project = tmp_path / "jax_req"
    project.mkdir()
    (project / "requirements.txt").write_text("jax[cuda13]==0.7.2\n")
    done = hpcenv(
        "plan", "local", "--project", str(project), "--facts", str(FACTS / "v100-supercloud.json"),
        "--json", env={"HPCENV_HOME": str(tmp_path / "home"), "HPCENV_CACHE": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    proj = json.loads(done.stdout)["project"]
    assert proj["torch_after"] == "none" and proj["resolved"] is True
    assert not any(line.startswith("torch") for line in proj["install"])
    assert "jax-cuda13-plugin==0.7.2" in proj["install"]
    (plugin,) = [w for w in proj["warnings"] if w.startswith("jax-cuda13-plugin")]
    assert "needs compute capability >= 7.5" in plugin and "needs driver >= 580.65.06" in plugin


def test_the_profiles_torch_refuses_only_a_project_that_installs_torch(tmp_path: Path) -> None:
    """Driver 470: the CPU JAX set plans (rc 0, no torch), its ``gpu`` extra plans with
    jax-cuda12-plugin named as the V100 plugins are (driver >= 525.60.13), and a lock with
    torch is refused for the profile's torch, as the profile alone is (exit 3)."""
    require_uv()
    facts = driver_470(tmp_path)
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    jax = tmp_path / "jax_gpu"
    shutil.copytree(PROJECT, jax)
    for extra in ((), ("--extra", "gpu")):
        done = hpcenv(
            "plan", "supercloud", "--project", str(jax), *extra, "--facts", facts, "--json",
            env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        proj = plan["project"]
        assert plan["torch"]["backend"] is None and "no torch 2.11.0" in plan["torch"]["error"]
        assert proj["torch_after"] == "none" and proj["model"]["torch"]["release"] is None
        assert "jax==0.7.2" in proj["install"]
        assert not any(line.startswith("torch") for line in proj["install"])
    (plugin,) = [w for w in proj["warnings"] if w.startswith("jax-cuda12-plugin")]
    assert "needs driver >= 525.60.13" in plugin and "(470.82.01)" in plugin
    torch = tmp_path / "torch_jax_lock"
    shutil.copytree(DATA / "projects" / "torch_jax_lock", torch)
    refused = hpcenv("plan", "supercloud", "--project", str(torch), "--facts", facts, env=env)
    assert refused.returncode == 3, refused.stderr
    assert "no torch 2.11.0 build for x86_64 runs on this node" in refused.stderr
