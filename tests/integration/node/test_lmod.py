"""Real Lmod (Debian's ``lmod``) read by ``hpcenv.facts.lmod``, and ``hpcenv profile check``
naming a module the site's tree no longer lists. The rest of ``profile init``/``check`` on
recorded facts is in ``tests/unit/decide/test_profile_init.py``; on a real SLURM in
``tests/integration/slurm/test_profile_init_cluster.py``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.facts import lmod
from support import FACTS, require
from support.fakenodes import modulefile_tree

GH200 = FACTS / "gh200-isambard.json"


def test_real_lmod_lists_a_modulefile_tree(tmp_path: Path) -> None:
    require("lmod", lmod.lmod_command(os.environ) is not None, "apt-get install lmod")
    tree = modulefile_tree(tmp_path / "mf", ["cuda/12.4", "cuda/12.6", "nccl/2.21.5",
                                              "brics/aws-ofi-nccl/1.8.1"])  # fmt: skip
    problems: list[str] = []
    found = lmod.available({**os.environ, "MODULEPATH": str(tree)}, problems)
    assert problems == []
    assert found is not None
    assert set(found) == {"cuda/12.4", "cuda/12.6", "nccl/2.21.5", "brics/aws-ofi-nccl/1.8.1"}
    assert lmod.available({**os.environ, "MODULEPATH": ""}, problems) is None
    assert problems == ["MODULEPATH is empty: Lmod has no module tree to list"]


def test_check_command_exits_2_naming_each_drift(
    no_slurm: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    require("lmod", lmod.lmod_command(os.environ) is not None, "apt-get install lmod")
    tree = modulefile_tree(tmp_path / "mf", ["PrgEnv-cray", "cuda/12.8",
                                              "brics/aws-ofi-nccl/1.8.1"])  # fmt: skip
    monkeypatch.setenv("MODULEPATH", str(tree))
    node = json.loads(GH200.read_text())
    node["nvidia"]["driver_version"] = "570.86.10"
    (tmp_path / "node.json").write_text(json.dumps(node))
    code = main(["profile", "check", "isambard", "--facts", str(tmp_path / "node.json")])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "[platform] driver: = '565.57.01' but the node runs 570.86.10" in out
    assert "[modules] load: names 'cuda/12.6', which 'module -t avail' no longer lists" in out
    assert "not checked: partition and GRES: SLURM could not be read here" in out
    monkeypatch.setenv("MODULEPATH", str(modulefile_tree(tmp_path / "mf", ["cuda/12.6"])))
    code = main(["profile", "check", "isambard", "--facts", str(GH200)])
    assert code == 0, capsys.readouterr().out
    assert shutil.which("scontrol") is None


def test_profile_init_and_check_answer_in_json_on_a_bare_login_node(
    no_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` on ``profile init``/``check`` (no SLURM, no Lmod here: what could not be
    read is data too); a drift is an object with its line, and still exit 2."""
    code = main(["profile", "init", "newcl", "--facts", str(GH200), "--json"])
    said = json.loads(capsys.readouterr().out)
    assert code == 0 and said["path"] == "envs/newcl.toml" and said["recipe"] == "cxi"
    assert (said["profile"], said["partition"], said["backend"]) == ("newcl", None, "cu126")
    assert any("scontrol" in p for p in said["could_not_read"])
    assert any(u.startswith("[modules] load:") for u in said["not_determined"])
    node = json.loads(GH200.read_text())
    node["nvidia"]["driver_version"] = "570.86.10"
    (no_slurm / "node.json").write_text(json.dumps(node))
    code = main(["profile", "check", "envs/newcl.toml", "--facts", "node.json", "--json"])
    said = json.loads(capsys.readouterr().out)
    assert code == 2 and said["drift"] is True and said["profile"] == "newcl"
    (drift,) = said["drifts"]
    assert (drift["section"], drift["key"]) == ("platform", "driver")
    assert isinstance(drift["line"], int) and "570.86.10" in drift["message"]
    assert drift["text"].startswith(f"envs/newcl.toml:{drift['line']}: [platform] driver:")
    assert "partition and GRES: SLURM could not be read here" in said["not_checked"]
