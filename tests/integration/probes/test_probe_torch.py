"""The torch probe in a real CPU-torch venv (CUDA checks skip, CPU checks pass), and its
arch-list decisions for GPUs this machine does not have."""

from __future__ import annotations

from pathlib import Path

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support.probe_env import load_probe

torch_probe = load_probe("torch")


def run(python: Path, tmp_path: Path, config: dict) -> object:
    spec = runner.ProbeSpec(name="torch", python=python, config=config, timeout_s=180)
    return runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)


def test_cpu_torch_passes_with_cuda_parts_skipped(probe_python: Path, tmp_path: Path) -> None:
    result = run(probe_python, tmp_path, {"torch_backend": "auto"})
    assert result.status is Status.PASS, result.summary
    checks = {c["name"]: c for c in result.ranks[0].details["checks"]}
    assert checks["cpu-matmul"]["status"] == "pass"
    assert checks["build"]["status"] == "pass"
    for name in ("arch-list", "kernel", "gpu-matmul", "bf16"):
        assert checks[name]["status"] == "skip"
        assert "torch is a CPU build" in checks[name]["summary"]
    assert "CUDA checks skipped" in result.summary
    assert result.ranks[0].facts["torch"] == "2.13.0+cpu"


def test_pinned_backend_mismatch_fails(probe_python: Path, tmp_path: Path) -> None:
    result = run(probe_python, tmp_path, {"torch_backend": "cu126"})
    assert result.status is Status.FAIL
    assert "cpu build, the profile pins cu126" in result.summary


def test_arch_supported() -> None:
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    cu130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    aarch64 = ["sm_80", "sm_90", "sm_90a"]
    assert torch_probe.arch_supported("7.0", cu126)[0]
    assert not torch_probe.arch_supported("7.0", cu130)[0]  # V100 on a cu130 wheel
    assert torch_probe.arch_supported("8.9", cu126) == (True, "sm_86")  # same major, lower minor
    assert torch_probe.arch_supported("9.0", aarch64)[0]
    assert torch_probe.arch_supported("12.1", cu130)[1].startswith("sm_120")
    assert not torch_probe.arch_supported("9.0", ["sm_80", "sm_86"])[0]
    ok, how = torch_probe.arch_supported("10.3", ["sm_90", "compute_90"])
    assert ok and "PTX" in how


def test_variant_hint_names_the_right_build() -> None:
    assert "cu126" in torch_probe.variant_hint("7.0")
    assert "cu128" in torch_probe.variant_hint("10.0")
    assert "sm_90" in torch_probe.variant_hint("9.0")
    assert torch_probe.backend_of("12.6") == "cu126" and torch_probe.backend_of(None) == "cpu"
