"""The set of a hand-written project holds torchvision/torchaudio to torch's release pair
and variant (``install_set.handwritten_set`` with ``torch_wish.pair_for``; the pairing read
from the companions' wheels, ``decide/companions``). Before, a ``torch>=2.4`` pyproject got
``torch==2.13.0+cpu`` beside whatever torchvision PyPI had newest (its CUDA 13 build), and
the build's import check then failed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.models.facts import Facts
from hpcenv.profile import schema as profile
from hpcenv.project import install_set, torch_wish
from hpcenv.project.request import ProjectRequest
from support import FACTS

V100 = collect.load(FACTS / "v100-supercloud.json")  # 575.57.08: cu128 for 2.9.1
CPU = Facts(arch="x86_64", python="3.11")


def hand_set(directory: Path, facts: Facts, name: str = "local") -> install_set.ProjectSet:
    plan = make_plan(profile.load(name), facts, environ={})
    return install_set.project_set(ProjectRequest(directory=directory), plan, facts)


def test_a_ranged_torch_gets_its_pair_of_its_variant(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
        'dependencies = ["torch>=2.4", "torchvision", "torchaudio"]\n'
    )
    ps = hand_set(tmp_path, CPU)
    assert ps.torch_after == "torch==2.13.0+cpu"
    assert "torchvision==0.28.0+cpu" in ps.requirements
    # no torchaudio release requires torch 2.13.0: kept as the project has it, said why
    assert "torchaudio" in ps.requirements
    assert any("torchaudio: kept" in w and "none published" in w for w in ps.warnings)


def test_a_pinned_torch_gets_its_pair_from_the_node_variant(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "torch==2.9.1\ntorchvision>=0.20\ntorchaudio ; sys_platform == 'linux'\n"
    )
    ps = hand_set(tmp_path, V100, "supercloud")
    assert ps.torch_after == "torch==2.9.1+cu128"
    assert "torchvision==0.24.1+cu128" in ps.requirements
    assert 'torchaudio==2.9.1+cu128 ; sys_platform == "linux"' in ps.requirements


def test_a_companion_pin_outside_the_pair_is_kept_and_said(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.9.1\ntorchvision==0.20.1+cu124\n")
    ps = hand_set(tmp_path, V100, "supercloud")
    assert "torchvision==0.20.1" in ps.requirements  # the label dropped, as before
    assert any("torch 2.9.1+cu128's pair is torchvision 0.24.1" in w for w in ps.warnings)


def test_a_locks_companions_become_the_pair_of_its_torch() -> None:
    """A lock's torchvision swapped with torch (``_family_pin``): the pair of the locked
    torch release in the node's variant, whatever version the lock had (0.20.0 is torch
    2.5's); where none is published for that release, the lock's own version. Only the
    locked release (``base``) of the lock is read, so a stand-in carries it."""
    plan = make_plan(profile.load("supercloud"), V100, environ={})
    plan = torch_wish.plan_for_version(plan, "2.9.1", V100)
    locked = SimpleNamespace(base="2.9.1")  # stands in for install_set._Locked
    vision = install_set._family_pin("torchvision", "0.20.0+cu130", locked, plan)
    assert vision[0] == "torchvision==0.24.1+cu128" and "torch 2.9.1's pair" in vision[1]
    torch = install_set._family_pin("torch", "2.9.1+cu130", locked, plan)
    assert torch[0] == "torch==2.9.1+cu128"
    newer = torch_wish.plan_for_version(plan, "2.11.0", V100)
    audio = install_set._family_pin(
        "torchaudio", "2.11.0+cu130", SimpleNamespace(base="2.11.0"), newer
    )
    assert audio[0] == f"torchaudio==2.11.0+{newer.torch.backend}"  # none paired: the lock's
