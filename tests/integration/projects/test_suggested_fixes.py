"""Every fix hpcenv prints is checked first: a Python or a torch it proposes runs on the
node by hpcenv's own resolver (``torch_choice.runs_on``), or it is not proposed. The
case: ``torch==2.1.2`` audited on the recorded GH200 (Python 3.12): 2.1.2 has no cp312
aarch64 wheel, and its aarch64 builds are CPU-only, so "use Python 3.11" would install a
torch that cannot use the GPUs; PyPI's newest (2.15.0) is a CUDA 13 build the 565 driver
cannot run. The file is this test's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.decide import torch_fit
from hpcenv.decide.torch_choice import runs_on
from hpcenv.facts import collect
from support import FACTS, REPO

GH200 = collect.load(FACTS / "gh200-isambard.json")
V100 = collect.load(FACTS / "v100-supercloud.json")


def test_a_dead_end_fix_is_not_proposed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.1.2\n")
    rc = main(["audit", str(tmp_path / "requirements.txt"), "--facts",
               str(FACTS / "gh200-isambard.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 3
    assert "use Python 3.11" not in err
    proposed = re.search(r"torch (\d+\.\d+\.\d+), the newest release", err)
    assert proposed is not None, err
    assert runs_on(GH200)(proposed.group(1))  # the proposal is one the resolver accepts
    assert not runs_on(GH200)("2.1.2") and not runs_on(GH200)("2.15.0")


def test_without_a_node_the_python_fix_stays() -> None:
    with pytest.raises(Exception, match=r"use Python 3\.11"):
        torch_fit.check("2.1.2", "aarch64", "3.12", where="the node")


def _proposed(err: str) -> str:
    found = re.search(r"torch (\d+\.\d+\.\d+), the newest release", err)
    assert found is not None, err
    return found.group(1)


def test_resolve_checks_its_fix_too(capsys: pytest.CaptureFixture[str]) -> None:
    """``resolve --torch ==2.6.0 --python 3.14`` on the V100: 2.6.0 has no cp314 wheel, and
    the newest release with one (2.15.0) carries no sm_70 and needs a newer driver, which
    ``resolve --torch ==2.15.0`` itself refuses. Before, resolve proposed it all the same."""
    rc = main(["resolve", "--facts", str(FACTS / "v100-supercloud.json"), "--torch", "==2.6.0",
               "--python", "3.14", "--offline"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 3
    assert runs_on(V100)(_proposed(err)) and not runs_on(V100)("2.15.0")


def test_plan_checks_its_fix_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same profile (Python 3.14, torch ==2.6.0) planned for the V100 (exit 3)."""
    text = (REPO / "envs" / "supercloud.toml").read_text()
    text = re.sub(r'(?m)^python = ".*"$', 'python = "3.14"', text, count=1)
    prof = tmp_path / "py314.toml"
    prof.write_text(re.sub(r'(?m)^version = ".*"$', 'version = "==2.6.0"', text, count=1))
    rc = main(["plan", str(prof), "--facts", str(FACTS / "v100-supercloud.json")])
    err = capsys.readouterr().err
    assert rc == 3
    assert "use Python 3.13" in err  # 2.6.0's cu126 runs on the V100: a checked fix
    assert runs_on(V100)(_proposed(err))


def test_a_fix_names_the_command_that_does_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A requirements file's fix names what really installs it (``build --project FILE``
    installs the node's build of the release it pins), not ``plan PROFILE``, which plans
    the profile's own torch."""
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.9.1+cu130\n")
    rc = main(["audit", str(req), "--facts", str(FACTS / "v100-supercloud.json")])
    err = capsys.readouterr().err
    assert rc == 3
    assert f"'hpcenv build PROFILE --project {req}' installs the project with it" in err, err
    assert "plan PROFILE" not in err
