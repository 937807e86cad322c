"""``hpcenv probe`` end to end: real probes in a real venv, the JSON contract, JUnit,
exit codes (0 pass/skip, 5 a failure, 2 bad input)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support import REPO, require


def hpcenv(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HPCENV_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home), "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def profile(tmp_path: Path, install: list[str]) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(
        f'[profile]\nname = "t"\n[packages]\ninstall = {json.dumps(install)}\n'
        '[probes]\nrun = ["imports", "torch"]\ntimeout_s = 200\nnccl_max_bytes = 65536\n'
    )
    return p


@pytest.mark.slow
def test_json_and_junit_on_pass(probe_python: Path, tmp_path: Path) -> None:
    junit = tmp_path / "probes.xml"
    out = hpcenv(
        "probe",
        "--env",
        str(probe_python.parent.parent),
        "--profile",
        str(profile(tmp_path, ["numpy"])),
        "--json",
        "--junit",
        str(junit),
        "--results-dir",
        str(tmp_path / "r"),
        home=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "pass" and data["env"] == "t"
    assert [r["name"] for r in data["results"]] == ["imports", "torch"]
    assert all(r["ranks"][0]["facts"]["torch"] == "2.13.0+cpu" for r in data["results"])
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"
    assert (tmp_path / "r" / "torch.rank0.json").is_file()


def test_nccl_two_ranks_from_the_cli(probe_python: Path, tmp_path: Path) -> None:
    out = hpcenv(
        "probe",
        "nccl",
        "--env",
        str(probe_python),
        "--profile",
        str(profile(tmp_path, [])),
        "--ranks",
        "2",
        "--nccl-sizes",
        "1K:8K",
        "--json",
        home=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    [result] = json.loads(out.stdout)["results"]
    assert result["status"] == "pass"
    assert len(result["ranks"]) == 2 and result["metrics"]["world_size"] == 2


def test_failure_exits_5_with_table(probe_python: Path, tmp_path: Path) -> None:
    out = hpcenv(
        "probe",
        "imports",
        "--env",
        str(probe_python),
        "--profile",
        str(profile(tmp_path, ["no-such-package-hpcenv"])),
        home=tmp_path,
    )
    assert out.returncode == 5
    assert "no-such-package-hpcenv" in out.stdout  # the table
    assert "hpcenv: error: 1 of 1 probes failed: imports" in out.stderr


def test_bad_input_exits_2(tmp_path: Path) -> None:
    out = hpcenv("probe", "nosuch", "--env", sys.executable, home=tmp_path)
    assert out.returncode == 2 and "unknown probe(s) nosuch" in out.stderr
    out = hpcenv("probe", "--env", "local", home=tmp_path)
    assert out.returncode == 2
    assert "not built" in out.stderr and "hpcenv build local" in out.stderr
    assert "Traceback" not in out.stderr


def test_env_without_torch_fails_with_remedy(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    require("uv", uv is not None, "uv is not on PATH")
    assert uv is not None
    subprocess.run([uv, "venv", "-q", str(tmp_path / "bare"), "--python", "3.11"], check=True)
    out = hpcenv("probe", "torch", "--env", str(tmp_path / "bare"), "--json", home=tmp_path)
    assert out.returncode == 5
    [result] = json.loads(out.stdout)["results"]
    assert result["status"] == "fail"
    assert "torch does not import" in result["summary"]
    assert "hpcenv build" in result["remedy"]
