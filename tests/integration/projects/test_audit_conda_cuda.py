"""Conda's own packages (issue 46 item 4): names without a PyPI twin (``rapids``, ``cudf``)
are never resolved on PyPI and are named as not judged; the CUDA release the file
constrains (``cuda-version``) is judged against the node, whatever else the file holds.

The file is RAPIDS' install selector line (docs.rapids.ai/install: ``rapids=25.10
python=3.12 'cuda-version>=13.0,<=13.1'`` from the rapidsai, conda-forge and nvidia
channels) as an environment.yml; the nodes are the recorded V100 (driver 575) and H100
stand-in (570) facts. Before: PyPI's ``rapids 0.0.1`` placeholder, "cannot be installed"
(exit 2), ``cuda-version`` dropped as "a toolkit piece" and never judged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.tools import uv
from support import FACTS, require

RAPIDS = """\
name: rapids-25.10
channels:
  - rapidsai
  - conda-forge
  - nvidia
dependencies:
  - rapids=25.10
  - cudf
  - python=3.12
  - cuda-version>=13.0,<=13.1
"""


@pytest.fixture
def rapids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require("uv", uv.available(), "uv not found")
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_OFFLINE", "1")  # nothing of it is looked up on PyPI
    env = tmp_path / "environment.yml"
    env.write_text(RAPIDS)
    return env


def _audit(env: Path, facts: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    rc = main(["audit", str(env), "--facts", str(FACTS / facts), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_cuda_version_13_is_judged_on_a_v100(
    rapids: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _audit(rapids, "v100-supercloud.json", capsys)
    assert rc == 3 and out["torch"] is None
    (line,) = out["packages"]
    assert line.startswith("cuda-version 13.0: built for CUDA 13.0, needs driver >= 580.65.06")
    assert "needs compute capability >= 7.5" in line and "the GPUs are 7.0" in line
    assert any(
        "not judged" in n and "conda's channels" in n and "rapids=25.10, cudf" in n
        for n in out["notes"]
    )
    assert "no torch, 0 packages" in out["resolved"]  # rapids and cudf never went to PyPI


def test_cuda_version_13_on_a_570_driver_names_580(
    rapids: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _audit(rapids, "h100-standin.json", capsys)
    assert rc == 3
    (line,) = out["packages"]
    assert "needs driver >= 580.65.06" in line and "compute capability" not in line
