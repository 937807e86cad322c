"""Plans from the shipped profiles and recorded (stand-in) facts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.commands._inputs import plan_for
from hpcenv.decide.plan import find_links, find_torch_wheel, make_plan, vllm_warning
from hpcenv.facts import collect
from hpcenv.models import facts as facts_model
from hpcenv.profile import schema as profile
from hpcenv.utils.errors import BadInput
from support import FACTS, REPO, require
from support.fakenodes import node

GH200_FILE = FACTS / "gh200-isambard.json"
V100_FILE = FACTS / "v100-supercloud.json"
OPT_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def test_isambard_plan_on_recorded_gh200_facts() -> None:
    plan = plan_for("isambard", str(GH200_FILE), environ={})[0]
    assert plan.arch == "aarch64"
    assert plan.torch.version == "2.9.1"
    assert plan.torch.backend == "cu126"
    assert plan.torch.index_url == "https://download.pytorch.org/whl/cu126"
    fa = plan.flash_attn
    assert fa.action == "build" and fa.cuda_archs == ("90",)
    assert fa.max_jobs is not None and fa.nvcc_threads is not None
    assert fa.max_jobs * 9 <= 854 * 0.75  # flash-attn setup.py: 9 GB per 4-thread job
    assert plan.fixes == ("sm90a",)
    assert plan.fix_settings == {"TORCH_CUDA_ARCH_LIST": "9.0"}
    assert plan.env["FI_PROVIDER"] == "cxi"
    assert plan.env["NCCL_SOCKET_IFNAME"] == "hsn"
    assert "NCCL_NET" not in plan.env
    # NCCL_PROTO=^LL128: the GH200 + Slingshot + OFI corruption workaround (KNOWLEDGE 4)
    assert plan.multi_node_env == {"NCCL_NET": "AWS Libfabric", "NCCL_PROTO": "^LL128"}
    assert plan.modules == ("PrgEnv-cray", "cuda/12.6", "brics/aws-ofi-nccl/1.8.1")
    kinds = [s.kind for s in plan.steps]
    for kind in ("python", "torch", "packages", "flash-attn", "fix", "module", "env"):
        assert kind in kinds
    assert all(s.why for s in plan.steps)
    # the one warning: the aarch64 cu126 GPU code comes from a build script, not a wheel
    assert len(plan.warnings) == 1 and "unconfirmed" in plan.warnings[0]


def test_isambard_with_x86_facts_is_refused() -> None:
    with pytest.raises(BadInput, match="is for aarch64 nodes") as info:
        plan_for("isambard", str(V100_FILE), environ={})[0]
    assert "v100-supercloud.json" in str(info.value)
    assert "describe an arch" not in str(info.value)  # was: "this host describe an arch"
    assert "not for x86_64 nodes" in str(info.value)


def test_declared_plan_for_a_cluster_from_anywhere() -> None:
    plan = plan_for("supercloud", None, declared=True, environ={})[0]
    assert plan.arch == "x86_64"
    assert plan.torch.backend == "cu126"
    assert plan.flash_attn.action == "skip"
    isambard = plan_for("isambard", None, declared=True, environ={})[0]
    assert isambard.torch.backend == "cu126"
    assert isambard.fix_settings == {"TORCH_CUDA_ARCH_LIST": "9.0"}


def test_declared_and_facts_together_is_bad_input() -> None:
    with pytest.raises(BadInput):
        plan_for("isambard", str(GH200_FILE), declared=True)[0]


def test_index_url_from_the_environment_wins() -> None:
    env = {"HPCENV_TORCH_INDEX_URL": "https://mirror.example/pytorch/"}
    plan = plan_for("isambard", str(GH200_FILE), environ=env)[0]
    assert plan.torch.index_url == "https://mirror.example/pytorch/cu126"


def test_gpu_model_mismatch_is_a_warning() -> None:
    p = profile.load("brtx")
    plan = make_plan(p, collect.load(V100_FILE), environ={})
    assert any("expects Quadro RTX 6000" in w for w in plan.warnings)
    assert plan.torch.backend == "cu128"  # torch 2.9's cu128 still carries sm_70


def test_gpu_profile_on_a_cpu_node_plans_cpu_with_a_warning() -> None:
    plan = make_plan(profile.load("brtx"), node("x86_64", None), environ={})
    assert plan.torch.backend == "cpu"
    assert any("show none" in w for w in plan.warnings)


def test_sm90a_only_for_hopper_on_aarch64_or_when_asked() -> None:
    local = profile.load("local")
    h100_x86 = make_plan(local, node("x86_64", "580.95.05", ("9.0",)), environ={})
    assert h100_x86.fixes == () and h100_x86.fix_settings == {}
    gh200 = make_plan(local, node("aarch64", "580.95.05", ("9.0",)), environ={})
    assert gh200.fixes == ("sm90a",)
    assert gh200.fix_settings == {"TORCH_CUDA_ARCH_LIST": "9.0"}
    a100_arm = make_plan(local, node("aarch64", "580.95.05", ("8.0",)), environ={})
    assert a100_arm.fixes == ()


def test_find_links_merge_profile_and_environment(tmp_path: Path) -> None:
    p = profile.load("local")
    env = {"PIP_FIND_LINKS": f"{tmp_path} /srv/wheels", "HPCENV_FIND_LINKS": "/srv/wheels /x"}
    assert find_links(p, env) == (str(tmp_path), "/srv/wheels", "/x")


def _touch(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_bytes(b"")  # only the name is read: version, label and tags
    return path


def test_torch_wheel_must_match_version_label_platform_and_python(tmp_path: Path) -> None:
    for name in (
        "torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_aarch64.whl",
        "torch-2.9.1+cu126-cp311-cp311-manylinux_2_28_aarch64.whl",
        "torch-2.9.1+cu126-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.9.0+cu126-cp312-cp312-manylinux_2_28_aarch64.whl",
    ):
        _touch(tmp_path, name)
    env = {"HPCENV_FIND_LINKS": str(tmp_path)}
    assert plan_for("isambard", str(GH200_FILE), environ=env)[0].torch_wheel is None
    good = _touch(tmp_path, "torch-2.9.1+cu126-cp312-cp312-manylinux_2_28_aarch64.whl")
    plan = plan_for("isambard", str(GH200_FILE), environ=env)[0]
    assert plan.torch_wheel == str(good.resolve())
    assert any(s.what == f"install torch from {good.resolve()}" for s in plan.steps)


def test_unlabelled_wheel_counts_only_for_the_pypi_variant(tmp_path: Path) -> None:
    _touch(tmp_path, "torch-2.9.1-cp312-cp312-manylinux_2_28_aarch64.whl")  # PyPI: CPU
    gh200 = plan_for("isambard", str(GH200_FILE), environ={"HPCENV_FIND_LINKS": str(tmp_path)})[0]
    assert gh200.torch_wheel is None  # the plan wants cu126, not PyPI's CPU build
    p = profile.load("local")
    choice = make_plan(p, node("aarch64", None), environ={}).torch
    assert choice.backend == "cpu"
    wheel = find_torch_wheel(
        (str(tmp_path),),
        type(choice)(version="2.9.1", backend="cpu", index_url=None),
        arch="aarch64",
        python="3.12",
    )
    assert wheel is not None


def test_local_profile_uses_the_site_wheel_on_a_cpu_node() -> None:
    """The real wheelhouse of this machine (/opt/wheels, via PIP_FIND_LINKS)."""
    require("torch-wheel", OPT_WHEEL.is_file(), f"{OPT_WHEEL} missing")
    plan = make_plan(
        profile.load("local"), node("x86_64", None), environ={"PIP_FIND_LINKS": "/opt/wheels"}
    )
    assert plan.torch.backend == "cpu"
    assert plan.torch_wheel == str(OPT_WHEEL.resolve())
    assert plan.flash_attn.action == "skip"
    assert plan.fixes == ()


def test_digest_changes_with_what_gets_built_not_with_prose() -> None:
    a = plan_for("isambard", str(GH200_FILE), environ={})[0]
    b = plan_for("isambard", str(GH200_FILE), environ={})[0]
    assert a.digest() == b.digest()
    c = plan_for("isambard", str(GH200_FILE), environ={"HPCENV_TORCH_INDEX_URL": "https://m/w"})[0]
    assert c.digest() != a.digest()


def test_unknown_arch_with_an_any_profile_is_bad_input() -> None:
    facts = facts_model.Facts(source="empty facts")
    with pytest.raises(BadInput, match="arch is unknown"):
        make_plan(profile.load("local"), facts, environ={})


def test_vllm_on_volta_is_warned() -> None:
    v100 = collect.load(V100_FILE)
    assert vllm_warning(("numpy", "vllm"), v100) is not None
    assert "7.5" in (vllm_warning(("vllm>=0.9",), v100) or "")
    assert vllm_warning(("vllm==0.10.1",), v100) is None  # docs up to 0.14: >= 7.0
    assert vllm_warning(("vllm",), collect.load(GH200_FILE)) is None
    assert vllm_warning(("vllm",), node("x86_64", None)) is None


TOKEN = "hf_planSECRETvalue123"
INDEX_PASSWORD = "idxTOKENpassword99"


def _secret_profile(tmp_path: Path) -> Path:
    text = (REPO / "envs" / "supercloud.toml").read_text() + (
        f'\n[env.always]\nHF_TOKEN = "{TOKEN}"\nNCCL_DEBUG = "WARN"\n'
        f'[env.multi_node]\nWANDB_API_KEY = "{TOKEN}"\n'
    )
    path = tmp_path / "secret.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("as_json", [True, False])
def test_plan_output_masks_secret_env_values_and_index_credentials(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    as_json: bool,
) -> None:
    """Neither the table nor --json (steps[].what included) shows a secret-named
    variable's value or the password of an index URL."""
    url = f"https://alice:{INDEX_PASSWORD}@mirror.example/pytorch/"
    monkeypatch.setenv("HPCENV_TORCH_INDEX_URL", url)
    path = _secret_profile(tmp_path)
    argv = ["plan", str(path), "--declared", *(["--json"] if as_json else [])]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and INDEX_PASSWORD not in out and "alice" not in out
    assert "HF_TOKEN=REDACTED" in out.replace("\n", "") or '"HF_TOKEN": "REDACTED"' in out
    if as_json:
        data = json.loads(out)
        env_steps = [s["what"] for s in data["steps"] if s["kind"] == "env"]
        assert env_steps == ["HF_TOKEN=REDACTED NCCL_DEBUG=WARN", "WANDB_API_KEY=REDACTED"]
        assert data["torch"]["index_url"] == "https://REDACTED@mirror.example/pytorch/cu126"
    # The plan itself keeps the real values: the build needs them.
    plan = plan_for(str(path), None, declared=True)[0]
    assert plan.env["HF_TOKEN"] == TOKEN and INDEX_PASSWORD in plan.torch.index_url


def test_plan_refuses_a_python_the_torch_release_has_no_wheel_for(tmp_path: Path) -> None:
    """torch 2.1.0 was published for CPython 3.8-3.11 (PyPI's tags, in torch_pypi.toml): a
    profile asking for Python 3.12 is refused before anything is built, naming the fix."""
    from hpcenv.decide.torch_fit import check
    from hpcenv.utils.errors import NoCompatibleBuild

    with pytest.raises(NoCompatibleBuild) as err:
        check("2.1.0", "x86_64", "3.12", where="profile p", python_where="[profile] python")
    msg = str(err.value)
    assert "torch 2.1.0 has no wheel for Python 3.12 on x86_64" in msg
    assert "CPython 3.8, 3.9, 3.10, 3.11" in msg and "use Python 3.11" in msg
    assert "the newest release with a CPython 3.12 wheel" in msg
    check("2.1.0", "x86_64", "3.11", where="profile p")  # has one: passes
    prof = tmp_path / "py312.toml"
    text = (REPO / "envs" / "supercloud.toml").read_text()
    text = re.sub(r'(?m)^python = ".*"$', 'python = "3.12"', text, count=1)
    prof.write_text(re.sub(r'(?m)^version = ".*"$', 'version = "==2.1.0"', text, count=1))
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "plan", str(prof), "--declared"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3 and "no wheel for Python 3.12" in done.stderr, done.stderr


# --- plan/build --project: the project's torch against its Python and the node's glibc ----


def test_project_torch_without_a_wheel_for_its_python_is_refused_before_uv(
    tmp_path: Path,
) -> None:
    """A project pinning torch 2.1.0 (CPython 3.8-3.11 on PyPI) with the profile's Python
    3.12: `plan --project` and `build --project` refuse it (exit 3) naming the CPython tags
    and the fix, before uv is called (no resolver error, no venv, no build log). Without the
    check, uv is left to fail (exit 1 here, on the unreachable PyTorch index)."""
    from support.buildkit import hpcenv

    project = tmp_path / "paper"
    project.mkdir()
    (project / "requirements.txt").write_text("torch==2.1.0\nnumpy\n")
    prof = tmp_path / "py312.toml"
    text = (REPO / "envs" / "local.toml").read_text()
    prof.write_text(re.sub(r'(?m)^python = ".*"$', 'python = "3.12"', text, count=1))
    home = tmp_path / "home"
    for verb in ("plan", "build"):
        done = hpcenv(verb, str(prof), "--project", str(project), env={"HPCENV_HOME": str(home)})
        assert done.returncode == 3, (verb, done.stderr)
        msg = done.stderr
        assert "torch 2.1.0 has no wheel for Python 3.12" in msg, msg
        assert "CPython 3.8, 3.9, 3.10, 3.11" in msg and "use Python 3.11" in msg, msg
        assert "the project's Python: profile py312 says 3.12" in msg, msg
        assert "the newest release with a CPython 3.12 wheel" in msg, msg
        assert "uv" not in msg.split("error:", 1)[1], msg  # not uv's failure
    assert not (home / "logs").exists()  # nothing was built, not even a log
    assert [p.name for p in (home / "venvs").iterdir()] == ["py312-paper.lock"]


def test_locked_project_torch_the_node_glibc_cannot_install_is_refused(tmp_path: Path) -> None:
    """nanochat's uv.lock pins torch 2.9.1 (manylinux_2_28 wheels) while the profile's torch
    2.6.0 fits a glibc 2.17 node: `plan --project` for that node is exit 3 naming the glibc
    the project's torch needs and the newest release with a wheel for it."""
    facts = json.loads(V100_FILE.read_text())
    facts["glibc"] = "2.17"
    facts_file = tmp_path / "old-glibc.json"
    facts_file.write_text(json.dumps(facts))
    prof = tmp_path / "sc26.toml"
    text = (REPO / "envs" / "supercloud.toml").read_text()
    prof.write_text(re.sub(r'(?m)^version = ".*"$', 'version = "==2.6.0"', text, count=1))
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "plan", str(prof), "--facts", str(facts_file)],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # the profile's own torch fits the node
    project = REPO / "tests" / "data" / "projects" / "nanochat"
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "plan", str(prof), "--facts", str(facts_file),
         "--project", str(project)],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    msg = done.stderr
    assert "torch 2.9.1's x86_64 wheels need glibc >= 2.28" in msg, msg
    assert "has glibc 2.17" in msg and "use torch 2.6.0" in msg, msg
