"""Precision and attention checked wherever the job asks for them, before the queue: HF
Trainer's flags on the command line (``--bf16``, ``--bf16 True``, ``--tf32 True``), the
YAML/JSON a trainer CLI reads (a positional file, ``--config F``) and the launcher's
configs, on GPUs below compute capability 8.0 (supercloud's V100s, brtx's RTX 6000s);
one error listing every place and what to use there. Trainer files are public repos' own
(tests/data/launch_configs/trainers/ORIGIN).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.job import command, launch_config
from hpcenv.job import render as slurm_job
from hpcenv.profile import schema
from hpcenv.utils.errors import BadInput
from support import REPO

TRAINERS = REPO / "tests" / "data" / "launch_configs" / "trainers"
ZERO3 = REPO / "tests" / "data" / "launch_configs" / "open-instruct" / "deepspeed_zero3.yaml"
V100 = launch_config.Job(nodes=1, per_node=2, compute_capability="7.0", gpu="V100")
H100 = launch_config.Job(nodes=1, per_node=2, compute_capability="9.0", gpu="H100")


def _error(*argv: str, cwd: Path = TRAINERS, profile: str = "supercloud") -> str:
    spec = slurm_job.CommandJob(argv=argv)
    with pytest.raises(BadInput) as info:
        slurm_job.render(schema.load(profile), spec, workdir=cwd)
    return str(info.value)


def _found(*argv: str, job: launch_config.Job = V100, cwd: Path = TRAINERS) -> list[str]:
    return list(launch_config.judge(launch_config.read(command.read(argv), cwd, {}), job).errors)


@pytest.mark.parametrize(
    ("argv", "place"),
    [
        (["python", "train.py", "--bf16"], "--bf16 (use fp16)"),
        (["python", "train.py", "--bf16", "True", "--lr", "1"], "--bf16 True (use fp16)"),
        (["python", "train.py", "--tf32=true"], "--tf32=true (set it false)"),
        (["torchrun", "train.py", "--bf16", "--fp16"], "--bf16 (use fp16)"),
        (["python", "train.py", "--attn_implementation", "flash_attention_2"],
         "--attn_implementation flash_attention_2 (use sdpa)"),
    ],
)  # fmt: skip
def test_trainer_flags_on_the_command_line(argv: list[str], place: str) -> None:
    (error,) = _found(*argv)
    assert place in error and "compute capability 7.0" in error
    assert _found(*argv, job=H100) == []
    assert place in _error("A=1", *argv)  # prefixed: the same check


def test_false_flags_and_data_files_are_not_asks(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text(json.dumps([{"bf16": True}]))
    assert _found("python", "t.py", "--bf16", "False", "--tf32=0", cwd=tmp_path) == []
    assert _found("python", "t.py", "--train_file", "data.json", cwd=tmp_path) == []


def test_a_trainer_cli_s_yaml_is_read() -> None:
    """LLaMA-Factory's README: ``llamafactory-cli train examples/.../llama3_full_sft.yaml``
    (and ``FORCE_TORCHRUN=1`` before it)."""
    error = _error("FORCE_TORCHRUN=1", "llamafactory-cli", "train", "llama3_full_sft.yaml")
    assert f"{TRAINERS / 'llama3_full_sft.yaml'}: bf16: true (use fp16)" in error


def test_every_place_is_listed_with_its_fix() -> None:
    """alignment-handbook's recipe (bf16, tf32, use_flash_attention_2) through
    ``--config``, with open-instruct's accelerate config (mixed_precision: bf16): one error
    naming each file and key."""
    error = _error("accelerate", "launch", "--config_file", str(ZERO3), "run_sft.py",
                   "--config", "zephyr_sft_config_full.yaml")  # fmt: skip
    recipe = TRAINERS / "zephyr_sft_config_full.yaml"
    for place in (f"{ZERO3} mixed_precision: bf16 (use fp16)",
                  f"{recipe}: bf16: true (use fp16)",
                  f"{recipe}: tf32: true (set it false)",
                  f"{recipe}: use_flash_attention_2: true (use sdpa)"):  # fmt: skip
        assert place in error, place
    assert (
        error.startswith("bf16/flash_attention_2/tf32 on ") and "(compute capability 7.0)" in error
    )
    positional = _error("accelerate", "launch", "run_sft.py", "zephyr_sft_config_full.yaml")
    assert f"{recipe}: tf32: true" in positional


def test_attention_in_a_nested_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(
        "model:\n  init:\n    attn_implementation: flash_attention_2\n"
    )
    (tmp_path / "r.json").write_text(json.dumps({"trainer": {"bf16": "true"}}))
    (error,) = _found("python", "t.py", "r.yaml", "--config=r.json", cwd=tmp_path)
    assert "r.yaml: attn_implementation: flash_attention_2 (use sdpa)" in error
    assert "r.json: bf16: true (use fp16)" in error


def test_oversized_or_deep_trainer_files_are_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 40 + "]" * 40)
    (tmp_path / "big.yaml").write_bytes(b"a: 1\n" + b"#" * (launch_config.MAX_CONFIG_BYTES + 1))
    most = f"hpcenv reads at most {launch_config.MAX_CONFIG_BYTES}"
    for name, says in (("deep.json", "nested deeper than 32 levels"), ("big.yaml", most)):
        done = subprocess.run(
            [sys.executable, "-m", "hpcenv", "sbatch", str(REPO / "envs" / "brtx.toml"), "--",
             "python", "t.py", "--config", name],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2 and says in done.stderr and name in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_script_importing_flash_attn_is_a_warning_below_8(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\n\nfrom flash_attn import flash_attn_func\n")
    cmd = command.read(["A=1", "accelerate", "launch", "--num_processes", "2", "train.py"])
    cfg = launch_config.read(cmd, tmp_path, {})
    (warning,) = launch_config.judge(cfg, V100).warnings
    assert f"{tmp_path / 'train.py'}:3 imports flash_attn" in warning and "use sdpa" in warning
    assert launch_config.judge(cfg, H100).warnings == ()
    plain = launch_config.read(command.read(["python", "train.py"]), tmp_path, {})
    assert plain.flash_imports == (f"{tmp_path / 'train.py'}:3",)


def test_a_trainer_file_hpcenv_cannot_parse_is_the_trainer_s(tmp_path: Path) -> None:
    """A positional YAML with a custom tag (Hydra/OmegaConf, a template) ran before hpcenv
    read trainer files; it still renders (only size and depth bounds refuse)."""
    (tmp_path / "cfg.yaml").write_text("model: !include base.yaml\nbf16: {{ precision }}\n")
    assert _found("python", "t.py", "cfg.yaml", cwd=tmp_path) == []
