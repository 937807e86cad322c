"""``hpcenv sbatch`` options that become paths or #SBATCH lines: ``--job-name`` is one
file name without SLURM's ``%`` patterns (``../../victim`` wrote the script and logs
outside the log directory; ``run%u`` made SLURM write another log than the hang watchdog
watched), and ``--sbatch-arg`` abbreviations of an option hpcenv writes are that option
(sbatch takes unique prefixes: ``--ntasks-per-nod=2`` overrode hpcenv's own line)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO


def _sbatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "name",
    ["../../victim", "a/b", "..", ".", "run%u", "x%j", "a\\b", "tab\there", "nl\nx", " lead",
     "x" * 201, ""],
)  # fmt: skip
def test_a_job_name_that_is_not_one_plain_file_name_is_refused(name: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    done = _sbatch("local", "--job-name", name, "--submit", "--", "python", "t.py", cwd=cwd)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"hpcenv: error: --job-name {name!r}: give one file name")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert victim.read_text() == "mine\n"
    assert not list(tmp_path.glob("victim*.sbatch")) and not list(cwd.rglob("*.sbatch"))


def test_a_plain_job_name_is_used_as_given(tmp_path: Path) -> None:
    done = _sbatch("local", "--job-name", "train-7b.v2", "--", "python", "t.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --job-name=train-7b.v2" in done.stdout
    assert re.search(r"#SBATCH --output=\S*/train-7b\.v2-%j\.out", done.stdout), done.stdout


@pytest.mark.parametrize(
    ("arg", "owned"),
    [("--ntasks-per-nod=2", "--ntasks-per-node"), ("--job-nam=x", "--job-name"),
     ("--outp=/tmp/x", "--output"), ("--partit=gpu", "--partition"), ("--tim=1", "--time"),
     ("--cpus-per-t=4", "--cpus-per-task")],
)  # fmt: skip
def test_an_abbreviation_of_an_option_hpcenv_writes_is_refused_naming_it(
    arg: str, owned: str
) -> None:
    done = _sbatch("brtx", f"--sbatch-arg={arg}", "--", "true", cwd=REPO)
    assert done.returncode == 2, done.stdout
    option = arg.split("=", maxsplit=1)[0]
    assert f"{option} abbreviates {owned}, which hpcenv writes itself" in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("arg", ["--mem-per-cpu=4G", "--gres=nvme:1", "--exclusive", "--ntasks=8"])
def test_options_of_their_own_that_start_like_hpcenvs_still_pass(arg: str) -> None:
    done = _sbatch("brtx", f"--sbatch-arg={arg}", "--", "true", cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert f"#SBATCH {arg}" in done.stdout
