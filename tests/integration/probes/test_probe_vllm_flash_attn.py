"""vllm and flash-attn probes: skip with the reason where they are not installed (as
here), and their version decisions from the data tables."""

from __future__ import annotations

from pathlib import Path

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support.probe_env import load_probe

vllm = load_probe("vllm")


def test_both_skip_when_not_installed(probe_python: Path, tmp_path: Path) -> None:
    for name in ("vllm", "flash-attn"):
        spec = runner.ProbeSpec(name=name, python=probe_python, timeout_s=120)
        result = runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)
        assert result.status is Status.SKIP, result.summary
        assert "not installed" in result.summary
        assert result.remedy


def test_vllm_minimum_capability_from_the_probe_config() -> None:
    """The probe reads hpcenv's table from its config (one owner: hpcenv.knowledge)."""
    table = runner.config_for(None)["vllm_min_compute_capability"]
    assert vllm.min_capability("0.10.1", table)["min"] == "7.0"
    assert vllm.min_capability("0.21.0", table)["min"] == "7.5"
    assert vllm.min_capability("0.18.0+cu126", table)["min"] == "7.0"
    assert vllm.min_capability("0.10.1", []) is None  # run by hand: no table


def test_vllm_torch_pin() -> None:
    reqs = ["numpy", "torch==2.9.0; platform_system == 'Linux'", "ray[cgraph]>=2.48"]
    assert vllm.torch_pin(reqs) == "2.9.0"
    assert vllm.torch_pin(["torch>=2.4"]) is None
