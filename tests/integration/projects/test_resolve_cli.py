"""The resolve, plan and audit commands as a user runs them: exit codes, one-line
errors without tracebacks, and the JSON contract (docs/design.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.ui import report
from support import FACTS
from support.fakenodes import node, write

GH200 = str(FACTS / "gh200-isambard.json")
V100 = str(FACTS / "v100-supercloud.json")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_resolve_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "resolve", "--facts", GH200, "--torch", "==2.9.1", "--json")
    assert code == 0
    data = json.loads(out)
    torch = data["torch"]
    assert set(torch) >= {"version", "backend", "index_url", "reasons", "warnings"}
    assert torch["version"] == "2.9.1"
    assert torch["backend"] == "cu126"
    assert torch["index_url"] == "https://download.pytorch.org/whl/cu126"
    assert any("565.57.01" in r for r in torch["reasons"])
    assert "error" not in torch
    fa = data["flash_attn"]
    assert fa["action"] == "build" and fa["cuda_archs"] == ["90"] and fa["reason"]


def test_resolve_names_the_torch_pair(capsys: pytest.CaptureFixture[str]) -> None:
    """The one decision's answer carries torch's release pair of its variant
    (``TorchAnswer.companions``); ``resolve`` printed torch alone, so a user pinning
    torchvision by hand beside ``torch==2.9.1+cu126`` had to guess."""
    code, out, _ = _run(capsys, "resolve", "--facts", GH200, "--torch", "==2.9.1", "--json")
    assert code == 0
    pair = json.loads(out)["companions"]
    assert (pair["torchvision"], pair["torchaudio"]) == ("0.24.1+cu126", "2.9.1+cu126")
    assert "torchvision-0.24.1" in pair["source"]
    code, out, _ = _run(capsys, "resolve", "--facts", V100, "--torch", "==2.13.0", "--json")
    pair = json.loads(out)["companions"]
    # torchaudio 2.11.1 admits torch>=2.11 (its METADATA); where none admits a torch, the
    # note says so (tests/unit/decide/test_torch_choice.py, on the data of 2026-11-27)
    assert pair["torchvision"] == "0.28.0+cu126" and pair["torchaudio"] == "2.11.1+cu126"
    assert pair["notes"] == [] and "torchaudio-2.11.1-" in pair["source"]
    code, out, _ = _run(capsys, "resolve", "--facts", GH200, "--torch", "==2.9.1")
    assert "torchvision" in out and "0.24.1+cu126" in out


def test_resolve_v100_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "resolve", "--facts", V100, "--torch", "==2.13.0", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["torch"]["backend"] == "cu126"
    assert data["flash_attn"]["action"] == "skip"


def test_resolve_index_url_option_and_env(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCENV_TORCH_INDEX_URL", "https://env.example/whl")
    _, out, _ = _run(capsys, "resolve", "--facts", GH200, "--torch", "2.9.1", "--json")
    assert json.loads(out)["torch"]["index_url"] == "https://env.example/whl/cu126"
    _, out, _ = _run(
        capsys, "resolve", "--facts", GH200, "--torch", "2.9.1", "--json",
        "--index-url", "https://cli.example/whl/",
    )  # fmt: skip
    assert json.loads(out)["torch"]["index_url"] == "https://cli.example/whl/cu126"


def test_resolve_nothing_runs_exit_3_one_line_and_null_backend(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    facts = write(node("x86_64", "450.51.06", ("7.0",)), tmp_path / "old.json")
    code, out, err = _run(capsys, "resolve", "--facts", str(facts), "--torch", "==2.13.0", "--json")
    assert code == 3
    data = json.loads(out)
    assert data["torch"]["backend"] is None
    assert data["torch"]["index_url"] is None
    assert "driver 450.51.06" in data["torch"]["error"]
    assert data["flash_attn"]["action"] == "skip"
    assert err.count("\n") == 1 and err.startswith("hpcenv: error: no torch 2.13.0 build")
    code, out, err = _run(capsys, "resolve", "--facts", str(facts), "--torch", "==2.13.0")
    assert code == 3 and err.count("\n") == 1


def test_resolve_pin_that_cannot_run_warns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "resolve", "--facts", GH200, "--torch", "==2.13.0", "--backend", "cu130", "--json"
    )
    assert code == 0
    torch = json.loads(out)["torch"]
    assert torch["backend"] == "cu130" and torch["warnings"]


def test_resolve_table_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "resolve", "--facts", GH200, "--torch", "==2.9.1")
    assert code == 0 and "cu126" in out and "because" in out


def test_resolve_a_release_the_data_lacks_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """Never a guess: offline, a release the data lacks is exit 3 with one line naming the
    fixes; a range still picks among the releases hpcenv knows."""
    code, out, err = _run(
        capsys, "resolve", "--facts", V100, "--torch", "==2.16.0", "--offline", "--json"
    )
    assert code == 3 and json.loads(out)["exit_code"] == 3  # --json: JSON on every outcome
    assert "torch 2.16.0 is not in hpcenv's data and nothing was consulted" in err
    assert "hpcenv knowledge update" in err and err.count("\n") == 1
    code, out, _ = _run(
        capsys, "resolve", "--facts", V100, "--torch", ">=2.9", "--offline", "--json"
    )
    assert code == 0 and json.loads(out)["torch"]["version"] == "2.14.1"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--torch", "=>2.9"], "is not a version specifier"),
        (["--torch", "==2.9.1", "--backend", "cuda12"], "--backend"),
    ],
)
def test_resolve_bad_input_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code, _, err = _run(capsys, "resolve", "--facts", GH200, *argv)
    assert code == 2
    assert err.count("\n") == 1 and needle in err


def test_facts_file_not_json_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text("nid001001 aarch64 565.57.01\n")
    code, _, err = _run(capsys, "resolve", "--facts", str(bad), "--torch", "==2.9.1")
    assert code == 2
    assert err.count("\n") == 1 and "not JSON" in err and str(bad) in err


def test_plan_isambard_shows_the_build(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "console", report.MaskingConsole(width=200))
    code, out, _ = _run(capsys, "plan", "isambard", "--facts", GH200)
    assert code == 0
    flat = " ".join(out.split())
    needles = (
        "cu126",
        "FLASH_ATTN_CUDA_ARCHS=90",
        "MAX_JOBS=",
        "sm90a",
        "TORCH_CUDA_ARCH_LIST=9.0",
        "FI_PROVIDER=cxi",
        "NCCL_NET=AWS Libfabric",
    )
    for needle in needles:
        assert needle in flat, needle


def test_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "plan", "isambard", "--facts", GH200, "--json")
    data = json.loads(out)
    assert code == 0
    assert data["torch"]["backend"] == "cu126"
    assert data["flash_attn"]["cuda_archs"] == ["90"]
    assert data["fix_settings"] == {"TORCH_CUDA_ARCH_LIST": "9.0"}
    assert data["env"]["FI_PROVIDER"] == "cxi"
    assert len(data["digest"]) == 16


def test_plan_isambard_with_x86_facts_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "plan", "isambard", "--facts", V100)
    assert code == 2
    assert err.count("\n") == 1 and "aarch64" in err and "x86_64" in err


def test_plan_declared(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "plan", "supercloud", "--declared", "--json")
    assert code == 0 and json.loads(out)["torch"]["backend"] == "cu126"


def test_plan_unknown_profile_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "plan", "nosuchcluster", "--facts", GH200)
    assert code == 2 and "unknown profile" in err


def test_audit_json_and_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.9.1+cu126\n")
    code, out, _ = _run(capsys, "audit", str(req), "--facts", GH200, "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    req.write_text("torch==2.13.0\nnvidia-cuda-runtime==13.0.96\n")
    code, out, err = _run(capsys, "audit", str(req), "--facts", GH200, "--json")
    assert code == 3
    assert json.loads(out)["ok"] is False
    assert err.count("\n") == 1 and "580.65.06" in err


def test_plan_where_nothing_runs_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    facts = write(node("x86_64", "450.51.06", ("7.5",)), tmp_path / "old-brtx.json")
    code, _, err = _run(capsys, "plan", "brtx", "--facts", str(facts))
    assert code == 3
    assert err.count("\n") == 1 and "driver 450.51.06" in err and "fixes:" in err
