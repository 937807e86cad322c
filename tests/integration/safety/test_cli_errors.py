"""Errors the CLI meets outside its own checks still end in one line, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.cli import main


def test_unwritable_home_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hpcenv", "build", "local"],
        env={**os.environ, "HPCENV_HOME": "/proc/hpcenv-cannot-be-here"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("hpcenv: error: ") and out.stderr.count("\n") == 1


def test_non_ascii_digits_in_compute_capability_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = tmp_path / "f.json"
    facts.write_text(
        json.dumps(
            {
                "arch": "x86_64",
                "nvidia": {
                    "driver_version": "575.57.08",
                    "gpus": [{"compute_capability": "\u00b2.0"}],
                },
            }
        )
    )
    assert main(["resolve", "--facts", str(facts), "--torch", "==2.9.1"]) == 2
    err = capsys.readouterr().err
    assert "compute_capability" in err and "Traceback" not in err


def test_one_command_parser_imports_only_that_command() -> None:
    code = (
        "import sys; from hpcenv.cli import build_parser; build_parser('facts'); "
        "print(sorted(m for m in sys.modules if m.startswith('hpcenv.commands.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['hpcenv.commands.facts']"
