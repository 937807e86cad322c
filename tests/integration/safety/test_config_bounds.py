"""Bounded parsing of what users and sites hand hpcenv: a launcher's DeepSpeed JSON or
accelerate YAML, SLURM's partition listing, a config path that is a directory, a
requirements file with a 2 MB line. Each is one line naming the file and the fix, exit 2,
no traceback, in well under a second (before: RecursionError and ValueError tracebacks,
"error: Is a directory: 3" with exit 1, "effective batch ... = -8", minutes in shlex)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcenv.job import command, launch_config
from hpcenv.models.survey_model import Gres
from hpcenv.project import readers as project_files
from hpcenv.slurm import survey
from hpcenv.utils.errors import BadInput
from support import REPO


def _sbatch(cwd: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    """``hpcenv sbatch brtx -- CMD`` (rendering only: the configs are checked first)."""
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", "brtx", "--", *cmd],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip


def _one_line_exit_2(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[:2000]
    for word in words:
        assert word in done.stderr, done.stderr[:2000]


def _deepspeed(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "ds.json").write_text(text)
    return _sbatch(tmp_path, "deepspeed", "train.py", "--deepspeed", "ds.json")


def test_deepspeed_json_nested_10000_deep(tmp_path: Path) -> None:
    done = _deepspeed(tmp_path, '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}")
    _one_line_exit_2(done, "ds.json", "nested deeper than")


def test_deepspeed_json_with_two_4000_digit_integers(tmp_path: Path) -> None:
    big = "9" * 4000
    text = f'{{"train_micro_batch_size_per_gpu": {big}, "gradient_accumulation_steps": {big}}}'
    done = _deepspeed(tmp_path, text)
    _one_line_exit_2(done, "ds.json", "train_micro_batch_size_per_gpu", "positive whole number")


@pytest.mark.parametrize("value", ["-1", "NaN", "0", "2.5", '"lots"'])
def test_batch_sizes_must_be_positive_counts(tmp_path: Path, value: str) -> None:
    text = f'{{"train_micro_batch_size_per_gpu": {value}, "gradient_accumulation_steps": 8}}'
    done = _deepspeed(tmp_path, text)
    _one_line_exit_2(done, "train_micro_batch_size_per_gpu", "not a count")
    assert "effective batch" not in done.stderr + done.stdout


def test_a_valid_deepspeed_config_still_gives_its_effective_batch(tmp_path: Path) -> None:
    ds = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "2",
          "train_batch_size": "auto"}  # fmt: skip
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    cmd = command.read(["deepspeed", "t.py", "--deepspeed", "ds.json"])
    cfg = launch_config.read(cmd, tmp_path, {})
    found = launch_config.judge(cfg, launch_config.Job(nodes=1, per_node=8))
    assert found.errors == () and found.notes == (
        "effective batch: 4 x 2 x 8 GPUs = 64 (micro-batch x accumulation x world)",
    )


def test_accelerate_yaml_nested_10000_deep(tmp_path: Path) -> None:
    (tmp_path / "acc.yaml").write_text("a: " + "[" * 10_000 + "]" * 10_000 + "\n")
    done = _sbatch(tmp_path, "accelerate", "launch", "--config_file", "acc.yaml", "t.py")
    _one_line_exit_2(done, "acc.yaml", "nested deeper than")


def test_accelerate_yaml_with_a_number_for_the_deepspeed_file(tmp_path: Path) -> None:
    (tmp_path / "acc.yaml").write_text("deepspeed_config:\n  deepspeed_config_file: 5\n")
    done = _sbatch(tmp_path, "accelerate", "launch", "--config_file", "acc.yaml", "t.py")
    _one_line_exit_2(done, "acc.yaml", "deepspeed_config_file: '5' is not a file name")


def test_accelerate_yaml_with_huge_process_counts(tmp_path: Path) -> None:
    (tmp_path / "acc.yaml").write_text(f"num_processes: {'7' * 4000}\nnum_machines: -2\n")
    done = _sbatch(tmp_path, "accelerate", "launch", "--config_file", "acc.yaml", "t.py")
    _one_line_exit_2(done, "acc.yaml", "not a count")


def test_a_directory_given_as_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "3").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "facts", "--facts", "3"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    _one_line_exit_2(done, "3: facts file is a directory")
    (tmp_path / "ds.json").mkdir()
    done = _sbatch(tmp_path, "deepspeed", "train.py", "--deepspeed", "ds.json")
    _one_line_exit_2(done, "ds.json: DeepSpeed config is a directory")


def test_slurm_counts_that_are_not_numbers() -> None:
    scontrol = (
        "PartitionName=gpu Default=YES MaxTime=1-00:00:00 State=UP TotalNodes=²\n"
        f"PartitionName=big Default=NO MaxTime=1:00:00 State=UP TotalNodes={'9' * 5000}\n"
    )
    sinfo = f"n1|gpu*|gpu:h100:{'4' * 5000}\nn2|gpu*|gpu:h100:²\nn3|big|gpu:a100:4\n"
    gpu, big = survey.parse_partitions(scontrol, sinfo)
    assert gpu.nodes == 0 and big.nodes == 0  # unknown, as for any non-number
    assert gpu.gres == () and big.gres == (Gres(name="gpu", type="a100", count=4),)


def test_a_2mb_requirements_line_is_refused_at_once(tmp_path: Path) -> None:
    for line in ("numpy" + " " * 10 + "x" * 2_000_000, "--extra-index-url " + "a" * 2_000_000):
        (tmp_path / "requirements.txt").write_text(line + "\n")
        start = time.monotonic()
        with pytest.raises(BadInput, match=r"line 1\): 2,000,0\d\d characters long") as err:
            project_files.read(tmp_path / "requirements.txt")
        assert time.monotonic() - start < 2
        assert len(str(err.value)) < 300


def test_requirement_options_split_in_linear_time() -> None:
    line = "--extra-index-url " + "a" * 60_000  # under the line limit: split, not refused
    start = time.monotonic()
    for _ in range(10):
        words = project_files.split_words(line, "w")
    assert words == ["--extra-index-url", "a" * 60_000]
    assert time.monotonic() - start < 1  # shlex.split: about 10 s for these
    assert project_files.split_words("-f 'a b'\\ c \"d\\\"e\"", "w") == ["-f", "a b c", 'd"e']
    with pytest.raises(BadInput, match="no closing quotation"):
        project_files.split_words("-r 'x", "w")
