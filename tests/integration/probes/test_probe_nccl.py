"""The nccl probe: a real 2-rank gloo allreduce in a real CPU-torch venv, its value check
catching one corrupted element, and the nccl-tests formulas and GH200 risk rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support.probe_env import load_probe

nccl = load_probe("nccl")


def run_nccl(python: Path, tmp_path: Path, env: dict[str, str], *args: str) -> object:
    spec = runner.ProbeSpec(name="nccl", python=python, ranks=2, timeout_s=180, args=args, env=env)
    return runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path / "r")


def test_gloo_allreduce_sweep_passes(probe_python: Path, tmp_path: Path) -> None:
    result = run_nccl(probe_python, tmp_path, {}, "--sizes", "1K:1M", "--iters", "2")
    assert result.status is Status.PASS, result.summary
    rows = result.ranks[0].details["sizes"]
    assert [r["bytes"] for r in rows] == [1024 << i for i in range(11)]
    assert all(r["wrong"] == 0 for r in rows)
    assert result.ranks[0].details["backend"] == "gloo"
    for r in rows:  # the nccl-tests formulas, as reported
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (2 - 1) / 2, rel=1e-3)
    assert result.metrics["world_size"] == 2
    assert result.ranks[0].facts["torch"] == result.ranks[1].facts["torch"]


def test_value_check_catches_one_corrupted_element(
    probe_python: Path,
    tmp_path: Path,
) -> None:
    result = run_nccl(probe_python, tmp_path, {"HPCENV_PROBE_CORRUPT": "1:77"}, "--sizes", "1K:4K")
    assert result.status is Status.FAIL
    assert "#wrong 1" in result.summary
    assert result.remedy
    rank1 = result.ranks[1].details["sizes"][0]
    assert rank1["wrong_this_rank"] == 1 and rank1["wrong"] == 1
    # the clean rank also knows the total: the wrong count is reduced over ranks
    assert result.ranks[0].details["sizes"][0]["wrong"] == 1
    assert result.ranks[0].details["sizes"][0]["wrong_this_rank"] == 0


def test_sizes_and_size_parsing() -> None:
    assert nccl.sizes(1024, 4096) == [1024, 2048, 4096]
    assert nccl.sizes(1000, 5000) == [1000, 2000, 4000, 5000]
    assert nccl.parse_size("64M") == 64 << 20
    assert nccl.parse_size("1G") == 1 << 30
    assert nccl.parse_size("4096") == 4096
    with pytest.raises(ValueError):
        nccl.sizes(0, 10)


def test_bandwidth_formulas() -> None:
    algbw, busbw = nccl.bandwidths(1_000_000_000, 0.5, 8)
    assert algbw == pytest.approx(2.0)
    assert busbw == pytest.approx(2.0 * 2 * 7 / 8)
    assert nccl.bandwidths(100, 0.0, 2) == (0.0, 0.0)


GH200 = {"arch": "aarch64", "capabilities": ["9.0"] * 4, "plugin": "/opt/ofi/libnccl-net.so"}


def test_gh200_ll128_risk_rule() -> None:
    assert nccl.gh200_risk(nccl_version="2.27.3", env={}, **GH200)
    assert nccl.gh200_risk(nccl_version="2.28.9", env={}, **GH200)
    assert nccl.gh200_risk(nccl_version="2.27.2", env={}, **GH200) is None
    assert nccl.gh200_risk(nccl_version="2.27.3", env={"NCCL_PROTO": "^LL128"}, **GH200) is None
    assert nccl.gh200_risk(nccl_version="2.27.3", env={"NCCL_LL128_C2C": "0"}, **GH200) is None
    assert nccl.gh200_risk(nccl_version="2.27.3", env={"NCCL_PROTO": "Simple,LL"}, **GH200) is None
    assert nccl.gh200_risk(nccl_version="2.27.3", env={"NCCL_PROTO": "LL128"}, **GH200)
    assert nccl.gh200_risk(**{**GH200, "plugin": None}, nccl_version="2.27.3", env={}) is None
    x86 = {**GH200, "arch": "x86_64"}
    assert nccl.gh200_risk(**x86, nccl_version="2.27.3", env={}) is None
    h100 = {**GH200, "capabilities": ["8.0"]}
    assert nccl.gh200_risk(**h100, nccl_version="2.27.3", env={}) is None


def test_corrupt_hook_targets_one_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCENV_PROBE_CORRUPT", "1:5")
    assert nccl.corrupt_target(1) == 5
    assert nccl.corrupt_target(0) is None
    monkeypatch.delenv("HPCENV_PROBE_CORRUPT")
    assert nccl.corrupt_target(1) is None
    assert os.environ.get("HPCENV_PROBE_CORRUPT") is None
