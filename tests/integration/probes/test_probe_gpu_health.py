"""gpu-health: skips with the reason on this GPU-less machine; its decisions are tested
on nvidia-smi CSV rows that stand in for GPUs this machine does not have."""

from __future__ import annotations

import sys
from pathlib import Path

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support.probe_env import load_probe

gh = load_probe("gpu-health")

# nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits, as a GH200 node prints it
HEALTHY = "0, NVIDIA GH200 120GB, 0, No, No, No, 97000, 97871, Enabled, 0x0000000000000001, 34"
BROKEN = "1, NVIDIA GH200 120GB, 2, No, Yes, No, 20000, 97871, Disabled, 0x0000000000000040, 88"


def test_no_gpu_skips_with_reason(tmp_path: Path) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        return  # a GPU node: the skip does not apply
    spec = runner.ProbeSpec(name="gpu-health", python=Path(sys.executable), timeout_s=60)
    result = runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)
    assert result.status is Status.SKIP
    assert "no NVIDIA GPU" in result.summary and result.remedy


def test_parse_smi_rows() -> None:
    gpus = gh.parse_smi(HEALTHY + "\n" + BROKEN + "\n")
    assert gpus[0]["ecc_uncorrected"] == 0 and gpus[0]["persistence"] is True
    assert gpus[0]["throttle"] == ["gpu_idle"]
    assert gpus[1]["ecc_uncorrected"] == 2 and gpus[1]["remap_pending"] is True
    assert gpus[1]["throttle"] == ["hw_thermal_slowdown"]
    assert gpus[1]["temperature_c"] == 88


def test_judge_healthy_and_broken() -> None:
    healthy, broken = gh.parse_smi(HEALTHY + "\n" + BROKEN)
    [(name, status, summary, _)] = gh.judge(healthy, need_mib=80 * 1024)
    assert (name, status) == ("health", "pass") and "97000 MiB free" in summary
    found = {n: (s, r) for n, s, _, r in gh.judge(broken, need_mib=80 * 1024)}
    assert found["ecc"][0] == "fail" and "drain" in found["ecc"][1]
    assert found["row-remap"][0] == "fail"
    assert found["memory"][0] == "fail"
    assert found["throttle"][0] == "fail"


def test_not_supported_fields_are_unknown() -> None:
    row = "0, Tesla V100, [N/A], [N/A], [N/A], [N/A], 32000, 32510, Enabled, 0x0, 40"
    [g] = gh.parse_smi(row)
    assert g["ecc_uncorrected"] is None and g["remap_pending"] is False
    assert gh.judge(g)[0][1] == "pass"
