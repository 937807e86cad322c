"""Real projects (tests/data/projects, origin in each ORIGIN) through the swap's first half:
what ``hpcenv build PROFILE --project`` would install on the recorded GH200 and V100 nodes
(``install_set.project_set``: ``uv export`` of the real lock, then the rewrite), and the rules
around it: the project's Python, the environment's name. Installing them needs
download.pytorch.org, which this machine cannot reach; the install itself is tested with
stand-in wheels (test_swap_stack).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.models import facts as facts_model
from hpcenv.profile import schema as profile
from hpcenv.project import install_set
from hpcenv.project import uv_lock as uvlock
from hpcenv.project.request import ProjectRequest, environment_name, python_for
from hpcenv.utils.errors import BadInput
from support import DATA, FACTS
from support.buildkit import hpcenv, require_uv

PROJECTS = DATA / "projects"
GH200 = collect.load(FACTS / "gh200-isambard.json")
V100 = collect.load(FACTS / "v100-supercloud.json")


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest, ignore=shutil.ignore_patterns(".*cache"))
    return dest


def project_set(
    name: str,
    prof: str,
    facts: facts_model.Facts,
    tmp_path: Path,
    *,
    with_profile_packages: bool = True,
    file: str | None = None,
    **selection: object,
) -> install_set.ProjectSet:
    require_uv()
    plan = make_plan(profile.load(prof), facts, environ={})
    directory = copy(name, tmp_path)
    request = ProjectRequest(
        directory=directory,
        file=directory / file if file else None,
        selection=uvlock.Selection(**selection),  # type: ignore[arg-type]
        with_profile_packages=with_profile_packages,
    )
    return install_set.project_set(request, plan, facts)


def changes(ps: install_set.ProjectSet) -> dict[str, str | None]:
    return {c.name: c.after for c in ps.changes}


def test_open_instruct_on_the_gh200(tmp_path: Path) -> None:
    """The migration this exists for: the lock's aarch64 fork is torch 2.10.0+cu130; the
    565 driver needs cu126; every CUDA 13 wheel of torch's is left to the resolver."""
    ps = project_set("open-instruct", "isambard", GH200, tmp_path)
    assert (ps.torch_before, ps.torch_after, ps.variant) == (
        "2.10.0+cu130",
        "2.10.0+cu126",
        "cu126",
    )
    assert "groups dev, cuda12" in ps.selection and "aarch64" in ps.selection
    after = changes(ps)
    assert after["torchvision"] == "torchvision==0.25.0+cu126"
    assert after["torchaudio"] == "torchaudio==2.10.0+cu126"
    for dropped in (
        "nvidia-nccl-cu13",
        "nvidia-cudnn-cu13",
        "nvidia-nvshmem-cu13",
        "nvidia-cuda-runtime",
    ):
        assert after[dropped] is None, dropped
    assert not [r for r in ps.requirements if "cu13" in r]
    assert after["ray"] == "ray==2.53.0"  # the project pins ray: its pin wins over the profile's
    assert ps.python.version == "3.12" and "==3.12.*" in ps.python.why
    assert ps.local == (".",)  # the project itself, installed from a copy
    assert any("keeping 2.10.0" in w for w in ps.warnings)


def test_open_instruct_cuda13_group_on_the_v100(tmp_path: Path) -> None:
    """The cuda13 group: its flash-attn URL wheels are built for CUDA 13 and cannot be
    rebuilt for cu128: left out, with a warning; vLLM's +cu130 becomes its public build."""
    ps = project_set(
        "open-instruct", "supercloud", V100, tmp_path, no_default_groups=True, groups=("cuda13",)
    )
    assert (ps.torch_before, ps.torch_after) == ("2.10.0+cu130", "2.10.0+cu128")
    after = changes(ps)
    assert after["vllm"] == "vllm===0.19.1"
    assert after["flash-attn"] is None and after["flash-attn-3"] is None
    assert sum("URL wheel built for CUDA 13" in w for w in ps.warnings) == 2


def test_a_plain_vllm_built_for_cuda_12_is_left_out_of_a_cuda_13_swap(tmp_path: Path) -> None:
    """open-instruct's default fork on x86_64: torch 2.10.0+cu128 and PyPI's vllm 0.19.1
    (plain version, built against PyPI's torch 2.10.0, cu128). On an H100 with a 580 driver
    the plan picks a CUDA 13 build of 2.10.0: the CUDA 12 vLLM is left out, said."""
    from support.fakenodes import node

    h100 = node("x86_64", "580.95.05", ("9.0",))
    ps = project_set("open-instruct", "supercloud", h100, tmp_path)
    if not (ps.variant or "").startswith("cu13"):
        pytest.skip(f"the plan chose {ps.variant} for torch 2.10.0 on this node")
    after = changes(ps)
    assert after["vllm"] is None
    assert any(
        w.startswith("vllm 0.19.1 is built for CUDA 12 (PyPI's plain vLLM") for w in ps.warnings
    )
    assert not [r for r in ps.requirements if r.startswith("vllm")]


def test_a_locked_jax_stack_beside_torch_is_kept_and_judged(tmp_path: Path) -> None:
    """torch 2.9.1 + jax[cuda13] locked (torch_jax_lock) on the V100: torch is swapped for
    its cu128 build and its CUDA wheels re-resolved; JAX's CUDA 13 plugin, pjrt and the
    CUDA 13 wheels they pull are the project's own stack: kept as locked (before: renamed
    to their CUDA 12 twins and judged by nobody) and refused, with JAX's fix named."""
    ps = project_set("torch_jax_lock", "supercloud", V100, tmp_path, with_profile_packages=False)
    after = changes(ps)
    assert (ps.torch_after, after["torch"]) == ("2.9.1+cu128", "torch==2.9.1+cu128")
    assert after["nvidia-nccl-cu12"] is None  # torch's: re-resolved for cu128
    kept = {"jax-cuda13-plugin==0.7.2", "jax-cuda13-pjrt==0.7.2", "nvidia-nccl-cu13==2.32.3"}
    assert kept <= set(ps.requirements) and not kept & set(after)
    assert not [r for r in ps.requirements if r.startswith("jax-cuda12")]
    failing = {v.name: v.why for v in ps.verdicts if not v.ok}
    assert set(failing) == {"jax-cuda13-plugin", "jax-cuda13-pjrt"}
    assert all("fix: jax[cuda12]" in why for why in failing.values())
    assert any(w.startswith("jax-cuda13-plugin 0.7.2: built for CUDA 13.5") for w in ps.warnings)


def test_open_instruct_default_on_the_v100_needs_no_swap(tmp_path: Path) -> None:
    ps = project_set("open-instruct", "supercloud", V100, tmp_path)
    assert ps.torch_before == ps.torch_after == "2.10.0+cu128"
    assert not [c for c in ps.changes if c.after is None]


def test_nanochat_keeps_its_python_and_extras(tmp_path: Path) -> None:
    ps = project_set("nanochat", "isambard", GH200, tmp_path)
    assert (ps.torch_before, ps.torch_after) == ("2.9.1", "2.9.1+cu126")  # PyPI's: CPU on aarch64
    assert ps.python.version == "3.10"
    assert ps.python.why.startswith(
        "the project pins 3.10 in .python-version; profile isambard says 3.12"
    )
    gpu = project_set("nanochat", "isambard", GH200, tmp_path / "gpu", extras=("gpu",))
    assert gpu.torch_before == "2.9.1+cu128" and "extras gpu" in gpu.selection
    assert changes(gpu)["nvidia-nccl-cu12"] is None  # cu128's wheels: re-resolved for cu126
    assert changes(gpu)["ray"] == "ray[default]>=2.49"  # not in the project: the profile's
    # ... only when asked (--with-profile-packages): by default the project's set alone
    alone = project_set("nanochat", "isambard", GH200, tmp_path / "alone", extras=("gpu",),
                        with_profile_packages=False)  # fmt: skip
    assert "ray" not in changes(alone) and not [r for r in alone.requirements if "ray" in r]


def test_prime_rl_workspace_and_overrides(tmp_path: Path) -> None:
    ps = project_set("prime-rl", "isambard", GH200, tmp_path)
    assert ps.torch_after == "2.11.0+cu126"
    assert "./packages/prime-rl-configs" in ps.local and "." in ps.local
    # its override of torch's cuDNN still applies to the re-resolved CUDA wheels
    assert ps.overrides == ("nvidia-cudnn-cu12>=9.15",)
    vllm = changes(ps)["vllm"]
    assert vllm is not None and "vllm-0.26.0+cu129" in vllm  # a CUDA 12 URL wheel: kept


def test_lerobot_on_both(tmp_path: Path) -> None:
    for prof, facts in (("isambard", GH200), ("supercloud", V100)):
        ps = project_set("lerobot", prof, facts, tmp_path / prof)
        assert (ps.torch_before, ps.torch_after) == ("2.11.0+cu128", "2.11.0+cu126"), prof


# --- projects without a uv.lock (project_handwritten) -----------------------------------


def test_requirements_with_includes_and_a_pytorch_index(tmp_path: Path) -> None:
    """kohya_ss pins torch 2.7.0+cu128 from the PyTorch cu128 index: the node's build of
    2.7.0 instead, torchvision 0.22.0 (2.7.0's pair) of that build, the PyTorch index not
    used."""
    ps = project_set("kohya_ss", "supercloud", V100, tmp_path, file="requirements_linux.txt")
    assert ps.torch_before == "torch==2.7.0+cu128"
    assert ps.torch_after.startswith("torch==2.7.0+cu12") and ps.torch_after != "torch==2.7.0+cu128"
    variant = ps.torch_after.rsplit("+", 1)[1]
    assert f"torchvision==0.22.0+{variant}" in ps.requirements
    assert "transformers==4.54.1" in ps.requirements  # from -r requirements.txt
    assert ps.indexes == () and ps.local_deps
    assert any("PyTorch index https://download.pytorch.org/whl/cu128 not used" in w
               for w in ps.warnings)  # fmt: skip
    assert any("./sd-scripts is not here" in w for w in ps.warnings)


def test_bare_torch_setup_py_and_conda_get_the_plans_torch(tmp_path: Path) -> None:
    whisper = project_set("whisper", "supercloud", V100, tmp_path / "w")
    plan_version = whisper.torch_after.split("==")[1].split("+")[0]
    assert whisper.torch_before == "torch" and "(any)" in whisper.changes[0].why
    mingpt = project_set("mingpt", "isambard", GH200, tmp_path / "m")
    # minGPT's install_requires=['torch'] read from its setup.py as data (ast, not run)
    assert mingpt.local == (".",) and mingpt.torch_before == "torch"
    assert "asks for torch (any)" in mingpt.changes[0].why
    dit = project_set("dit", "supercloud", V100, tmp_path / "d")
    # DiT's pytorch-cuda=11.7: conda's newest torch>=1.13 built for CUDA 11.7, as audit says
    assert (dit.torch_before, dit.torch_after) == ("torch>=1.13", "torch==2.0.1+cu117")
    assert plan_version != "2.0.1"
    assert dit.python.version == "3.12" or "admits" in dit.python.why
    olmo = project_set("olmo", "isambard", GH200, tmp_path / "o", with_profile_packages=True)
    assert olmo.python.why.endswith("admits") and "ai2-olmo-core>=1.8.0" in olmo.requirements
    assert changes(olmo).get("rich") is None  # the project asks for it: not the profile's
    with pytest.raises(BadInput, match=r"select from a uv\.lock"):
        project_set("olmo", "isambard", GH200, tmp_path / "g", groups=("dev",))


# --- the rules around it ------------------------------------------------------------------


def project(tmp_path: Path, requires: str | None, pin: str | None) -> uvlock.Project:
    return uvlock.Project(directory=tmp_path, requires_python=requires, python_pin=pin)


def test_python_rule(tmp_path: Path) -> None:
    by = "profile isambard"
    pinned = python_for(project(tmp_path, ">=3.10", "3.11"), "3.12", by)
    assert pinned.version == "3.11"
    assert "pins 3.11 in .python-version; profile isambard says 3.12: using 3.11" in pinned.why
    same = python_for(project(tmp_path, ">=3.10", "3.12"), "3.12", by)
    assert same.version == "3.12" and "as profile isambard" in same.why
    admitted = python_for(project(tmp_path, ">=3.10", None), "3.12", by)
    assert admitted.version == "3.12" and "admits" in admitted.why
    outside = python_for(project(tmp_path, "==3.12.*", None), "3.11", by)
    assert outside.version == "3.12" and "outside the project's requires-python" in outside.why
    with pytest.raises(
        BadInput, match=r"pins Python 3\.10, which the project's requires-python >=3\.11"
    ):
        python_for(project(tmp_path, ">=3.11", "3.10"), "3.12", by)
    with pytest.raises(BadInput, match="names no Python version"):
        python_for(project(tmp_path, None, "pypy"), "3.12", by)


def test_environment_names(tmp_path: Path) -> None:
    proj = copy("nanochat", tmp_path)
    assert environment_name("isambard", ProjectRequest(directory=proj)) == (
        "isambard-nanochat"
    )
    named = ProjectRequest(directory=proj, name="chat")
    assert environment_name("isambard", named) == "chat"
    for bad in ("../x", "a/b", "-rf", "x.lock"):
        with pytest.raises(BadInput, match="--name"):
            environment_name("isambard", ProjectRequest(directory=proj, name=bad))


def test_build_cli_selection_needs_a_project(tmp_path: Path) -> None:
    done = hpcenv("build", "local", "--extra", "gpu", env={"HPCENV_HOME": str(tmp_path)})
    assert done.returncode == 2 and "go with --project PATH" in done.stderr
    done = hpcenv("build", "local", "--project", str(tmp_path), env={"HPCENV_HOME": str(tmp_path)})
    assert done.returncode == 2 and "no uv.lock, pyproject.toml, setup.py" in done.stderr


def test_a_lock_beside_other_dependency_files_names_them(tmp_path: Path) -> None:
    """lerobot's uv.lock beside a requirements.txt of another torch (this test's own): the
    lock is read, and audit and plan say which file was passed over. Before, the
    requirements file was passed over in silence (only a directory without a lock said)."""
    from hpcenv.project.audit import read

    directory = copy("lerobot", tmp_path)
    (directory / "requirements.txt").write_text("torch==2.1.2\n")
    plan = make_plan(profile.load("supercloud"), V100, environ={})
    ps = install_set.project_set(ProjectRequest(directory=directory), plan, V100)
    said = [w for w in ps.warnings if "passed over" in w]
    assert said and "read uv.lock; passed over requirements.txt" in said[0], ps.warnings
    assert "pyproject.toml" not in said[0].split("(the precedence")[0]  # the lock's own
    notes = read(directory).notes
    assert any("read uv.lock; passed over requirements.txt" in n for n in notes), notes
