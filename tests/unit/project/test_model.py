"""The one model of a project on a node (``project/model.py``): a set that installs no torch
(a JAX project) says so in every view. Before, ``model.of_set`` fell back to the profile's
torch release (``2.11.0``) for such a set, so ``plan --project``'s JSON named a torch the
build never installs (found by tests/integration/projects/test_agreement.py, jax_gpu)."""

from __future__ import annotations

from pathlib import Path

from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.profile import schema as profile
from hpcenv.project import install_set, model, uv_lock
from hpcenv.project.request import ProjectRequest
from support import FACTS

V100 = collect.load(FACTS / "v100-supercloud.json")


def test_a_set_without_torch_names_no_torch(tmp_path: Path) -> None:
    plan = make_plan(profile.load("supercloud"), V100, environ={})
    assert plan.torch.version  # the profile's torch, which the project does not install
    wanted = install_set.ProjectSet(
        requirements=("jax==0.7.2", "jax-cuda12-plugin==0.7.2"),
        overrides=(),
        indexes=(),
        local=(),
        python=uv_lock.PythonChoice(version="3.11", why="the profile's"),
        selection="uv.lock",
        torch_before="none",
        torch_after="none",
        variant=None,
        plan=plan,
    )
    on_node = model.of_set(ProjectRequest(directory=tmp_path), wanted)
    assert (on_node.torch.release, on_node.torch.variant) == ("", None)
    assert on_node.torch.why == "the project installs no torch"
    torch = on_node.serialize()["torch"]
    assert isinstance(torch, dict) and torch["release"] is None and torch["variant"] is None
