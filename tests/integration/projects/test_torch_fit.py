"""A torch release must have a wheel for the env's Python and the node's glibc, checked
before anything is built: the one wheel-fits-node rule (``models.wheel_fit``, on
packaging.tags) and its uses in plan, resolve, the wheelhouse lookup and the project
reader. The facts are PyPI's CPython and manylinux tags in torch_pypi.toml."""

from __future__ import annotations

import json
import re
import shutil
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from hpcenv import knowledge
from hpcenv.cli import main
from hpcenv.decide import torch_fit
from hpcenv.decide.plan import find_torch_wheel
from hpcenv.facts import collect
from hpcenv.models import wheel_fit
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.project import uv_lock
from hpcenv.tools import uv
from hpcenv.utils.errors import NoCompatibleBuild
from support import FACTS, REPO, require
from support.buildkit import require_uv
from support.fakenodes import node, write

V100_FILE = FACTS / "v100-supercloud.json"
GH200_FILE = FACTS / "gh200-isambard.json"


# --- the rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "python", "arch", "glibc", "fits"),
    [
        ("torch-2.1.0-cp310-cp310-manylinux1_x86_64.whl", "3.10", "x86_64", "2.17", True),
        ("torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "x86_64", "2.17", False),
        ("torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "x86_64", "2.28", True),
        ("torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "x86_64", None, True),
        ("x-1.0-cp310-cp310-musllinux_1_2_x86_64.whl", "3.10", "x86_64", "2.35", False),
        ("torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl", "3.10", "x86_64", "2.35", False),
        ("torch-2.1.0-cp310-cp310-manylinux2014_aarch64.whl", "3.10", "x86_64", "2.35", False),
        ("torch-2.1.0-cp310-cp310-manylinux2014_aarch64.whl", "3.10", "aarch64", "2.17", True),
        ("torch-2.1.0-cp310-cp310-manylinux2014_aarch64.whl", "3.10", "aarch64", "2.12", False),
        ("x-1.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "3.12", "x86_64",
         "2.17", True),
        ("x-1.0-py3-none-any.whl", "3.12", "aarch64", "2.17", True),
        ("torch-2.9.0-cp313-cp313t-manylinux_2_28_x86_64.whl", "3.13t", "x86_64", "2.28", True),
        ("torch-2.9.0-cp313-cp313t-manylinux_2_28_x86_64.whl", "3.13", "x86_64", "2.28", False),
        ("torch-1.12.1+cu113-cp310-cp310-linux_x86_64.whl", "3.10.4", "x86_64", "2.17", True),
    ],
)  # fmt: skip
def test_wheel_fits_node(
    filename: str, python: str, arch: str, glibc: str | None, fits: bool
) -> None:
    assert wheel_fit.wheel_fits(filename, python=python, arch=arch, glibc=glibc) is fits


def test_the_project_reader_uses_the_same_rule() -> None:
    """uv_lock.wheel_fits used to accept musllinux wheels and ignore glibc."""
    musl = "x-1.0-cp311-cp311-musllinux_1_2_x86_64.whl"
    assert not uv_lock.wheel_fits(musl, "x86_64", "3.11")
    new = "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert uv_lock.wheel_fits(new, "x86_64", "3.11")  # glibc unknown: admitted
    assert not uv_lock.wheel_fits(new, "x86_64", "3.11", "2.17")
    assert uv_lock.wheel_fits(new, "x86_64", "3.11", "2.28")


def test_the_wheelhouse_lookup_uses_the_same_rule(tmp_path: Path) -> None:
    choice = TorchChoice(version="2.9.1", backend="cpu", index_url=None)
    for name in (
        "torch-2.9.1+cpu-cp311-cp311-musllinux_1_2_x86_64.whl",
        "torch-2.9.1+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    links = (str(tmp_path),)
    assert find_torch_wheel(links, choice, arch="x86_64", python="3.11", glibc="2.17") is None
    got = find_torch_wheel(links, choice, arch="x86_64", python="3.11", glibc="2.28")
    assert got is not None and got.endswith("manylinux_2_28_x86_64.whl")


def test_min_glibc_reads_legacy_and_pep600_tags() -> None:
    assert wheel_fit.min_glibc(["cp310-cp310-manylinux1_x86_64"]) == (2, 5)
    assert wheel_fit.min_glibc(["cp310-cp310-manylinux2014_aarch64"]) == (2, 17)
    assert wheel_fit.min_glibc(["cp310-cp310-manylinux_2_28_x86_64"]) == (2, 28)
    assert wheel_fit.min_glibc(["py3-none-any"]) is None


# --- the data it judges ---------------------------------------------------------------------


def test_every_pypi_row_has_its_wheels_tags() -> None:
    """Every release and arch PyPI carries has its tags recorded, and they agree with its
    CPython list: the checks below judge real tags, not a guess."""
    for release in knowledge.load().releases:
        for arch, plat in release.platforms.items():
            if plat.pypi is None:
                continue
            assert plat.tags, (release.version, arch)
            interpreters = {t.split("-")[0] for t in plat.tags}
            pythons = {f"{i[2]}.{i[3:]}" for i in interpreters}
            assert pythons == set(plat.pythons), (release.version, arch)
            assert all(t.endswith(f"_{arch}") for t in plat.tags)


# --- the checks -----------------------------------------------------------------------------


def test_python_3_11_with_torch_1_12_1_is_refused_naming_the_fix() -> None:
    with pytest.raises(NoCompatibleBuild) as info:
        torch_fit.check("1.12.1", "x86_64", "3.11", where="the node")
    msg = str(info.value)
    assert "torch 1.12.1 has no wheel for Python 3.11 on x86_64" in msg
    assert "CPython 3.7, 3.8, 3.9, 3.10" in msg and "use Python 3.10" in msg
    assert "the newest release with a CPython 3.11 wheel" in msg
    torch_fit.check("1.12.1", "x86_64", "3.10.12", where="the node")  # has one: passes
    torch_fit.check("2.7.0", "x86_64", "3.13t", where="the node")  # a cp313t wheel
    with pytest.raises(NoCompatibleBuild, match=r"no wheel for Python 3\.13t"):
        torch_fit.check("2.5.1", "x86_64", "3.13t", where="the node")


def test_glibc_2_17_with_a_manylinux_2_28_only_torch_is_refused() -> None:
    with pytest.raises(NoCompatibleBuild) as info:
        torch_fit.check("2.7.0", "x86_64", "3.11", "2.17", where="node n1")
    msg = str(info.value)
    assert "torch 2.7.0's x86_64 wheels need glibc >= 2.28 (manylinux_2_28_x86_64)" in msg
    assert "node n1 has glibc 2.17" in msg
    assert "use torch 2.6.0, the newest release with a wheel for it" in msg
    with pytest.raises(NoCompatibleBuild, match=r"use torch 2\.5\.1"):  # aarch64: 2.6 is 2_28
        torch_fit.check("2.9.1", "aarch64", "3.11", "2.17", where="node n1")
    torch_fit.check("2.7.0", "x86_64", "3.11", "2.28", where="node n1")
    torch_fit.check("2.6.0", "x86_64", "3.11", "2.17", where="node n1")  # manylinux1
    torch_fit.check("2.7.0", "x86_64", "3.11", None, where="node n1")  # glibc unknown


# --- plan, resolve --------------------------------------------------------------------------


def _profile(tmp_path: Path, python: str, torch: str) -> Path:
    text = (REPO / "envs" / "supercloud.toml").read_text()
    text = re.sub(r'(?m)^python = ".*"$', f'python = "{python}"', text, count=1)
    path = tmp_path / f"py{python}-torch{torch}.toml"
    path.write_text(re.sub(r'(?m)^version = ".*"$', f'version = "=={torch}"', text, count=1))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_refuses_python_3_11_with_torch_1_12_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = _profile(tmp_path, "3.11", "1.12.1")
    code, _, err = _run(capsys, "plan", str(prof), "--facts", str(V100_FILE))
    assert code == 3, err
    assert "torch 1.12.1 has no wheel for Python 3.11 on x86_64" in err
    assert f"use Python 3.10 ([profile] python in profile {prof.stem})" in err
    code, out, err = _run(capsys, "plan", str(_profile(tmp_path, "3.10", "1.12.1")),
                          "--facts", str(V100_FILE), "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["torch"]["version"] == "1.12.1"


def test_a_project_without_torch_is_not_refused_for_the_profiles_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Profile torch 1.12.1 with Python 3.11 has no wheel: the profile alone is refused, a
    JAX lock (tests/data/projects/jax_gpu) that installs no torch plans (before: exit 3)."""
    require_uv()
    prof = str(_profile(tmp_path, "3.11", "1.12.1"))
    project = tmp_path / "jax_gpu"
    shutil.copytree(FACTS.parent / "projects" / "jax_gpu", project)
    code, out, err = _run(capsys, "plan", prof, "--project", str(project),
                          "--facts", str(V100_FILE), "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["project"]["torch_after"] == "none"


def test_plan_refuses_a_glibc_2_17_node_with_a_manylinux_2_28_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = replace(collect.load(V100_FILE), glibc="2.17")
    facts = write(old, tmp_path / "v100-glibc217.json")
    prof = _profile(tmp_path, "3.11", "2.7.0")
    code, _, err = _run(capsys, "plan", str(prof), "--facts", str(facts))
    assert code == 3, err
    assert "torch 2.7.0's x86_64 wheels need glibc >= 2.28" in err
    assert "v100-glibc217.json) has glibc 2.17" in err and "use torch 2.6.0" in err
    code, _, err = _run(capsys, "plan", str(_profile(tmp_path, "3.11", "2.6.0")),
                        "--facts", str(facts))  # fmt: skip
    assert code == 0, err


def test_resolve_judges_the_facts_python_unless_told(capsys: pytest.CaptureFixture[str]) -> None:
    """The V100 facts record Python 3.11.9: torch 1.12.1 has no cp311 wheel."""
    code, out, err = _run(capsys, "resolve", "--facts", str(V100_FILE), "--torch", "==1.12.1",
                          "--json")  # fmt: skip
    assert code == 3
    torch = json.loads(out)["torch"]
    assert torch["backend"] is None and "no wheel for Python 3.11" in torch["error"]
    assert "no wheel for Python 3.11" in err
    code, out, _ = _run(capsys, "resolve", "--facts", str(V100_FILE), "--torch", "==1.12.1",
                        "--python", "3.10", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["torch"]["backend"] == "cu116"


def test_a_node_python_unknown_is_not_guessed() -> None:
    facts = replace(node("x86_64", "575.57.08", ("7.0",)), python=None)
    torch_fit.check("1.12.1", "x86_64", facts.python, where="the node")


def test_audit_refuses_a_lock_whose_torch_needs_a_newer_glibc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lerobot's uv.lock (a real project's) installs torch 2.11.0+cu128, whose wheels are
    manylinux_2_28: a node on glibc 2.17 cannot install them."""
    lock = REPO / "tests" / "data" / "projects" / "lerobot" / "uv.lock"
    old = write(replace(collect.load(V100_FILE), glibc="2.17"), tmp_path / "old.json")
    code = main(["audit", str(lock), "--facts", str(old), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 3
    assert "torch 2.11.0+cu128" in data["error"] and "no wheel for glibc 2.17" in data["error"]
    assert "manylinux_2_28_x86_64" in data["error"]
    new = write(replace(collect.load(V100_FILE), glibc="2.28"), tmp_path / "new.json")
    code = main(["audit", str(lock), "--facts", str(new), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert "no wheel for glibc" not in json.dumps(data)


def test_resolve_the_issues_v100_example_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """'hpcenv resolve --facts <V100, driver 575> --torch ==2.0.1' picked cu121, which 2.0.1
    never published; now cu118, offline, from 2.0.1's own row."""
    code, out, err = _run(capsys, "resolve", "--facts", str(V100_FILE), "--torch", "==2.0.1",
                          "--offline", "--json")  # fmt: skip
    assert code == 0, err
    torch = json.loads(out)["torch"]
    assert torch["backend"] == "cu118" and torch["index_url"].endswith("/cu118")
    assert not any("inferred from torch" in w for w in torch["warnings"])


def test_resolve_refuses_a_glibc_the_wheels_need_more_than(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(replace(collect.load(GH200_FILE), glibc="2.17"), tmp_path / "gh200-old.json")
    code, out, err = _run(capsys, "resolve", "--facts", str(old), "--torch", "==2.9.1", "--json")
    assert code == 3 and err.count("\n") == 1
    torch = json.loads(out)["torch"]
    assert torch["backend"] is None
    assert "torch 2.9.1's aarch64 wheels need glibc >= 2.28" in torch["error"]
    assert "has glibc 2.17" in torch["error"] and "glibc >= 2.28" in torch["error"]
    # 2.5.1 has manylinux2014 aarch64 wheels, but no build of it runs on the GH200's GPUs
    # (resolve --torch ==2.5.1 refuses it): a dead-end fix, not proposed (torch_choice.runs_on)
    assert "use torch 2.5.1" not in torch["error"]


def test_audit_of_a_hand_written_old_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A paper's requirements.txt pinning torch==1.12.1: on the V100 node's Python 3.11 it is
    refused before uv runs, naming the fix; with Python 3.10 it is resolved with real uv
    against PyPI and judged as the cu102 build PyPI carries (CUDA inside the wheel, no
    nvidia-* wheels to tell it by), which runs on the V100."""
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    req = tmp_path / "requirements.txt"
    req.write_text("torch==1.12.1\nnumpy<2\n")
    code = main(["audit", str(req), "--facts", str(V100_FILE), "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 3
    assert "torch 1.12.1 has no wheel for Python 3.11 on x86_64" in error
    assert "use Python 3.10 (--python X.Y, or the node's Python)" in error
    require("uv", uv.available(), "uv not found")
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            pass
    except OSError:
        require("pypi", False, "pypi.org:443 unreachable")
    code = main(["audit", str(req), "--facts", str(V100_FILE), "--python", "3.10", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert data["build"] == "cu102" and "CUDA runtime inside the wheel" in data["evidence"]
