"""A project without torch (issue 41) is planned and built as it is: ``hpcenv build local
--project`` of the JAX uv.lock in tests/data/projects/jax_gpu (ORIGIN there) installs its
locked set (jax, jaxlib, ml-dtypes, numpy, opt-einsum, scipy from PyPI or the uv cache), no
torch, and the import check imports its top packages, not torch; ``plan --project`` with
its ``cuda13`` extra names the JAX plugins that cannot run on a V100 (recorded facts).
Before: both refused "the project does not install torch ...; nothing to swap" (exit 2).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import DATA, FACTS
from support.buildkit import hpcenv, require_local_build, require_pypi, require_uv

PROJECT = DATA / "projects" / "jax_gpu"


@pytest.mark.slow
def test_a_jax_lock_is_built_as_it_is(tmp_path: Path) -> None:
    require_local_build()
    project = tmp_path / "jax_gpu"
    shutil.copytree(PROJECT, project)
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = hpcenv("build", "local", "--project", str(project), "--json", env=env)
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
