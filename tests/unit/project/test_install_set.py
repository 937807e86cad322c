"""The set of a hand-written project holds torchvision/torchaudio to torch's release pair
and variant (``install_set.handwritten_set`` with ``torch_wish.pair_for``; the pairing read
from the companions' wheels, ``decide/companions``). Before, a ``torch>=2.4`` pyproject got
``torch==2.13.0+cpu`` beside whatever torchvision PyPI had newest (its CUDA 13 build), and
the build's import check then failed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.models.facts import Facts
from hpcenv.profile import schema as profile
from hpcenv.project import install_set, torch_wish
from hpcenv.project.request import ProjectRequest
from support import DATA, FACTS
from support.knowledge_snapshot import with_companions_of

V100 = collect.load(FACTS / "v100-supercloud.json")  # 575.57.08: cu128 for 2.9.1
CPU = Facts(arch="x86_64", python="3.11")
PROJECTS = DATA / "projects"


@pytest.fixture(autouse=True)
def _no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests reach no index: uv is offline with an empty cache, so a hand-written file
    is not resolved as written here (``install_set._as_written``: its GPU packages judged
    by name, said in the set's unknowns); tests/integration/projects resolve them."""
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))


def hand_set(directory: Path, facts: Facts, name: str = "local") -> install_set.ProjectSet:
    plan = make_plan(profile.load(name), facts, environ={})
    return install_set.project_set(ProjectRequest(directory=directory), plan, facts)


def test_a_ranged_torch_gets_its_pair_of_its_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_companions_of(monkeypatch)  # 2026-11-27: no torchaudio required torch 2.13.0
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


def test_a_locks_companions_become_the_pair_of_its_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock's torchvision swapped with torch (``_family_pin``): the pair of the locked
    torch release in the node's variant, whatever version the lock had (0.20.0 is torch
    2.5's); where none is published for that release, the lock's own version. Only the
    locked release (``base``) of the lock is read, so a stand-in carries it."""
    with_companions_of(monkeypatch)  # 2026-11-27: none paired with torch 2.11.0
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


def _wheelhouse_set(tmp_path: Path, *wheels: str) -> install_set.ProjectSet:
    """A ``torch>=2.4`` + torchvision project planned where torch comes from a wheelhouse
    (``local``'s CPU torch, as $PIP_FIND_LINKS names it on a site without the index)."""
    house = tmp_path / "wheels"
    house.mkdir()
    for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", *wheels):
        (house / name).write_bytes(b"")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\ndependencies = ["torch>=2.4", "torchvision"]\n'
    )
    facts = Facts(arch="x86_64", python="3.11", glibc="2.31")
    plan = make_plan(profile.load("local"), facts, environ={"PIP_FIND_LINKS": str(house)})
    assert plan.torch_wheel is not None
    return install_set.project_set(ProjectRequest(directory=project), plan, facts)


def test_a_wheelhouse_torch_finds_its_labelled_pair_on_the_torch_index(tmp_path: Path) -> None:
    """torchvision==0.28.0+cpu is published on the PyTorch index only: with torch from a
    wheelhouse that lacks it, the resolve and install ask the plan's torch index for it.
    Before, only the wheelhouse and PyPI were asked and ``plan local --project`` stopped with
    "no version of torchvision==0.28.0+cpu"."""
    ps = _wheelhouse_set(tmp_path)
    assert "torchvision==0.28.0+cpu" in ps.requirements
    assert ps.plan is not None
    args = install_set.extra_args(ps, ps.plan)
    assert args[args.index("--index") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--index-strategy" in args


def test_a_wheelhouse_holding_the_pair_is_enough(tmp_path: Path) -> None:
    """The index is not asked when the wheelhouse holds the pair (it may be unreachable)."""
    ps = _wheelhouse_set(tmp_path, "torchvision-0.28.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert ps.plan is not None
    assert "--index" not in install_set.extra_args(ps, ps.plan)


def test_a_paired_companion_is_a_change_not_a_warning(tmp_path: Path) -> None:
    """The pair that replaces a hand-written torchvision line is a change with its reason,
    as a lock's swapped companion is (``_family_pin``); before, it was only in the warnings,
    and ``plan --project`` listed torch alone under its changes."""
    (tmp_path / "requirements.txt").write_text("torch==2.9.1\ntorchvision>=0.20\n")
    ps = hand_set(tmp_path, V100, "supercloud")
    vision = [c for c in ps.changes if c.name == "torchvision"]
    want = [("torchvision>=0.20", "torchvision==0.24.1+cu128")]
    assert [(c.before, c.after) for c in vision] == want
    assert "torch 2.9.1+cu128's pair" in vision[0].why
    assert not [w for w in ps.warnings if w.startswith("torchvision>=0.20: torchvision==")]


def test_a_cuda_package_that_cannot_run_here_is_said(tmp_path: Path) -> None:
    """A project's flash-attn on the V100 (7.0): judged by name as ``audit`` judges it
    (``decide/cuda_packages``), pinned or not; before, ``plan --project`` planned it
    silently while ``audit`` of the same file said exit 3."""
    (tmp_path / "requirements.txt").write_text("torch==2.6.0\nflash-attn\nvllm==0.6.3\n")
    ps = hand_set(tmp_path, V100, "supercloud")
    said = [w for w in ps.warnings if "cannot run on this node" in w]
    assert any(w.startswith("flash-attn (unpinned): flash-attn 2 needs compute capability >= 8.0")
               for w in said), ps.warnings  # fmt: skip
    (tmp_path / "requirements.txt").write_text("torch==2.6.0\nflash-attn\n")
    a100 = collect.load(FACTS / "a100-standin.json")
    assert not [w for w in hand_set(tmp_path, a100, "supercloud").warnings if "cannot run" in w]


def test_the_projects_index_the_plan_uses_is_not_said_unused(tmp_path: Path) -> None:
    """``--index-url .../whl/cu124`` + ``torch==2.6.0``: the plan installs 2.6.0's cu124 build
    from that same index, so the report does not say the index is "not used" (it said so,
    beside "torch comes from https://download.pytorch.org/whl/cu124")."""
    (tmp_path / "requirements.txt").write_text(
        "--index-url https://download.pytorch.org/whl/cu124/\ntorch==2.6.0\n"
    )
    ps = hand_set(tmp_path, V100, "supercloud")
    assert ps.torch_after == "torch==2.6.0+cu124"
    assert not [w for w in ps.warnings if "not used" in w], ps.warnings
    (tmp_path / "requirements.txt").write_text(
        "--extra-index-url https://download.pytorch.org/whl\ntorch==2.9.1\n"
    )  # the index root: torch comes from the node's variant index, another one
    said = hand_set(tmp_path, V100, "supercloud").warnings
    assert any("index https://download.pytorch.org/whl not used" in w for w in said), said


def test_a_conda_file_naming_its_build_gets_one_torch_in_every_command() -> None:
    """Issue 40: ``python=3.8``, ``pytorch>=1.13``, ``pytorch-cuda=11.7`` on the V100 (575):
    ``plan --project`` said torch 2.0.1+cu117 on Python 3.8, while ``build --project``'s
    check before the venv (``install_set.project_torch``, gone) skipped the variant release
    and stopped on torch 2.11.0 ("no wheel for Python 3.8"). Both read ``model.on_node``."""
    from hpcenv.project import model

    plan = make_plan(profile.load("supercloud"), V100, environ={})
    request = ProjectRequest(directory=PROJECTS / "conda-py38")
    on_node = model.on_node(request, plan, V100)
    assert (on_node.torch.release, on_node.torch.variant, on_node.python.version) == (
        "2.0.1",
        "cu117",
        "3.8",
    )
    assert on_node.torch.requirement == "torch==2.0.1+cu117"
    assert "pytorch-cuda=11.7" in on_node.torch.why
    assert model.on_node(request, plan, V100) is on_node  # computed once


def test_a_compiled_files_gpu_packages_are_judged_through_its_via_lines() -> None:
    """torch 2.9.1 + ``jax[cuda13]`` compiled by uv (tests/data/projects/torch_jax, its
    ORIGIN) on the V100: its CUDA 13 runtime is jax-cuda13-plugin's (``# via``), which needs
    driver 580 and compute capability 7.5, as ``audit`` says; before, the model judged only
    the names it knew (flash-attn, vLLM), so ``plan``/``build --project`` said nothing."""
    ps = hand_set(PROJECTS / "torch_jax", V100, "supercloud")
    assert ps.torch_after == "torch==2.9.1+cu128"
    assert {v.name for v in ps.verdicts if not v.ok} == {"jax-cuda13-plugin", "jax-cuda13-pjrt"}
    said = [w for w in ps.warnings if w.endswith("cannot run on this node")]
    assert any(w.startswith("jax-cuda13-plugin 0.7.2: built for CUDA 13.5 (pulls "
                            "nvidia-cuda-runtime 13.5.37)") for w in said), said  # fmt: skip
    assert not any(v.name in ("torch", "nvidia-*") for v in ps.verdicts), ps.verdicts


def test_torchs_side_of_a_resolution_as_written_is_folded() -> None:
    """uv's resolution of ``torch==2.9.1`` + ``jax[cuda13]==0.7.2`` (tests/data/projects/
    torch_jax, real ``# via`` lines): what only torch pulls (its CUDA 12 wheels, triton) is
    left to the plan's torch and folded; JAX's CUDA 13 stack stays, edges and all. A
    package both pull stays, as the other's (here one hand-made edge stands for it:
    jax-cuda13-plugin pulling torch's nvidia-nccl-cu12 too)."""
    from hpcenv.project import audit

    pins = audit.read_requirements(PROJECTS / "torch_jax" / "requirements.txt")
    assert pins.edges is not None
    kept, edges = install_set.beside_torch(pins.versions, pins.edges)
    assert "torch" not in kept and "torch" not in edges
    assert not {"nvidia-cuda-runtime-cu12", "nvidia-nccl-cu12", "triton", "sympy"} & set(kept)
    assert kept["nvidia-cuda-runtime"] == ("13.5.37",) and "jax-cuda13-plugin" in kept
    assert "nvidia-cuda-runtime" in edges["jax-cuda13-plugin"]
    shared = {**pins.edges, "jax-cuda13-plugin": (*pins.edges["jax-cuda13-plugin"],
                                                   "nvidia-nccl-cu12")}  # fmt: skip
    kept, _ = install_set.beside_torch(pins.versions, shared)
    assert kept["nvidia-nccl-cu12"] == ("2.27.5",) and "nvidia-cuda-runtime-cu12" not in kept


def test_a_file_not_resolved_here_is_judged_by_name_and_said(tmp_path: Path) -> None:
    """No index here (``_no_index``): a hand-written torch + flash-attn file keeps the
    plan's torch, flash-attn judged by name, and one line in the set's unknowns says what
    could not be resolved."""
    (tmp_path / "requirements.txt").write_text("torch==2.9.1\nflash-attn\n")
    ps = hand_set(tmp_path, V100, "supercloud")
    assert ps.torch_after == "torch==2.9.1+cu128"
    assert [v.name for v in ps.verdicts if not v.ok] == ["flash-attn"], ps.verdicts
    (said,) = ps.unknowns
    assert said.startswith("requirements.txt not resolved as written for "), said
    assert said.endswith("its GPU packages were judged by name only (flash-attn, vLLM), not "
                         "those its lines pull"), said  # fmt: skip
