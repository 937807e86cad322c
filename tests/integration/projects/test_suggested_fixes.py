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
from support import FACTS

GH200 = collect.load(FACTS / "gh200-isambard.json")


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
