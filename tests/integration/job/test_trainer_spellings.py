"""Every spelling a trainer accepts for bf16, tf32 and FlashAttention-2 is refused on a
compute capability 7.5 GPU (brtx's Quadro RTX 6000), read with the trainer's own rule
(issue 44):

- the command line: HF's ``HfArgumentParser`` itself (transformers 5.24.0's
  ``hf_argparser.py``, from the wheel on PyPI, checked against PyPI's sha256; the module
  imports only the standard library and PyYAML, so the real parser runs here): its
  ``string_to_bool`` (``t``, ``T``, ``1``, ``yes``, ``y``) and the dash alias of every
  underscore field (``--attn-implementation``);
- YAML/JSON files: YAML 1.1 booleans (PyYAML: ``yes``, ``on``), integers (HF's
  ``parse_dict`` passes the value to the dataclass as is; pydantic's lax bool, axolotl's and
  DeepSpeed's configs, takes 1 and ``"t"``/``"true"``), read by the same real parser's
  ``parse_yaml_file``/``parse_json_file``;
- DeepSpeed: the ``bf16`` section, else ``bfloat16`` (``get_bfloat16_config`` in
  deepspeed/runtime/precision_config.py, 0.19.8), ``enabled`` a pydantic bool (``1``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hpcenv.job import command, launch_config
from hpcenv.job import render as job_render
from hpcenv.profile import schema
from hpcenv.utils.errors import BadInput
from support import cuda_artifacts, require

RTX6000 = launch_config.Job(nodes=1, per_node=2, compute_capability="7.5", gpu="RTX 6000")
H100 = launch_config.Job(nodes=1, per_node=2, compute_capability="9.0", gpu="H100")
TRANSFORMERS = "5.24.0"


@dataclasses.dataclass
class TrainerArgs:
    """The fields of TrainingArguments (and TRL's ModelConfig) the check reads."""

    bf16: bool = False
    tf32: bool | None = None
    attn_implementation: str | None = None


def _hf_argparser() -> ModuleType:
    """transformers' own hf_argparser.py, as released."""
    try:
        wheel = cuda_artifacts.wheel("transformers", TRANSFORMERS, "py3-none-any")
    except (cuda_artifacts.Unavailable, OSError) as exc:
        require("pypi", False, f"transformers {TRANSFORMERS}'s wheel on PyPI: {exc}")
        raise
    dest = wheel.with_suffix(".hf_argparser.py")
    if not dest.exists():
        with zipfile.ZipFile(wheel) as zf:
            dest.write_bytes(zf.read("transformers/hf_argparser.py"))
    spec = importlib.util.spec_from_file_location("real_hf_argparser", dest)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", name="hf")
def hf_fixture() -> ModuleType:
    return _hf_argparser()


def _hf_parses(hf: ModuleType, words: list[str]) -> TrainerArgs | None:
    """What HF's parser makes of ``words``; None when it refuses them."""
    try:
        (args,) = hf.HfArgumentParser(TrainerArgs).parse_args_into_dataclasses(words)
    except SystemExit:
        return None
    assert isinstance(args, TrainerArgs)
    return args


def _asks(*words: str, job: launch_config.Job = RTX6000, cwd: Path = Path(".")) -> list[str]:
    argv = ("python", "train.py", *words)
    return list(launch_config.judge(launch_config.read(command.read(argv), cwd, {}), job).errors)


@pytest.mark.parametrize(
    "words",
    [
        ["--bf16", "t"], ["--bf16", "T"], ["--bf16", "1"], ["--bf16", "yes"], ["--bf16", "Y"],
        ["--bf16=True"], ["--tf32", "T"], ["--tf32=t"],
        ["--attn-implementation", "flash_attention_2"],
        ["--attn-implementation=flash_attention_2"],
    ],
)  # fmt: skip
def test_command_line_spellings_hf_takes_are_refused(hf: ModuleType, words: list[str]) -> None:
    parsed = _hf_parses(hf, words)
    assert parsed is not None and (
        parsed.bf16 or parsed.tf32 or parsed.attn_implementation == "flash_attention_2"
    )
    (error,) = _asks(*words)
    assert "compute capability 7.5" in error and " ".join(words) in error
    assert _asks(*words, job=H100) == []


@pytest.mark.parametrize(
    "words", [["--bf16", "f"], ["--bf16", "0"], ["--tf32", "No"], ["--bf16", "on"]]
)
def test_what_hf_reads_as_false_or_refuses_is_no_ask(hf: ModuleType, words: list[str]) -> None:
    parsed = _hf_parses(hf, words)
    assert parsed is None or not (parsed.bf16 or parsed.tf32)  # "on": HF's argparse error
    assert _asks(*words) == []


@pytest.mark.parametrize(
    ("text", "suffix"),
    [
        ("bf16: yes\n", ".yaml"), ("bf16: on\n", ".yaml"), ("bf16: True\n", ".yaml"),
        ("bf16: 1\n", ".yaml"), ("tf32: t\n", ".yaml"), ('{"bf16": 1}', ".json"),
        ('{"bf16": "true"}', ".json"), ("bf16: 1.0\n", ".yaml"), ('{"tf32": 1.0}', ".json"),
    ],
)  # fmt: skip
def test_file_spellings_hf_reads_as_true_are_refused(
    hf: ModuleType, tmp_path: Path, text: str, suffix: str
) -> None:
    path = tmp_path / f"recipe{suffix}"
    path.write_text(text)
    parser = hf.HfArgumentParser(TrainerArgs)
    load = parser.parse_yaml_file if suffix == ".yaml" else parser.parse_json_file
    (args,) = load(path)
    assert args.bf16 or args.tf32  # the trainer would ask for it
    (error,) = _asks("--config", path.name, cwd=tmp_path)
    assert f"{path}: " in error and "compute capability 7.5" in error


@pytest.mark.parametrize(
    ("config", "place"),
    [
        ({"bfloat16": {"enabled": True}}, "bfloat16.enabled: true"),
        ({"bf16": {"enabled": 1}}, "bf16.enabled: 1"),
        ({"bf16": {"enabled": "true"}}, "bf16.enabled: true"),
    ],
)
def test_deepspeed_s_sections_and_enabled_spellings(
    tmp_path: Path, config: dict[str, Any], place: str
) -> None:
    (tmp_path / "ds.json").write_text(json.dumps(config))
    (error,) = _asks("--deepspeed", "ds.json", cwd=tmp_path)
    assert f"ds.json: {place} (use fp16)" in error


@pytest.mark.parametrize(
    "config",
    [
        {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}},  # HF's args decide
        {"bfloat16": {"enabled": "auto"}},
        {"fp16": {"enabled": True}, "bf16": {"enabled": False}},
        {"fp16": {"enabled": True}},
    ],
)
def test_deepspeed_s_auto_and_fp16_only_ask_no_bf16(
    tmp_path: Path, config: dict[str, Any]
) -> None:
    """"auto" is filled from the trainer's own args by DeepSpeed's HF integration
    (transformers/integrations/deepspeed.py ``trainer_config_process``: bf16.enabled from
    ``args.bf16``), so only the trainer's --bf16 asks; an fp16 config runs on 7.5."""
    (tmp_path / "ds.json").write_text(json.dumps(config))
    assert _asks("--deepspeed", "ds.json", cwd=tmp_path) == []
    assert _asks("--deepspeed", "ds.json", "--fp16", cwd=tmp_path) == []
    (error,) = _asks("--deepspeed", "ds.json", "--bf16", cwd=tmp_path)
    assert "--bf16 (use fp16)" in error


def test_deepspeed_reads_bf16_before_bfloat16(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text(
        json.dumps({"bf16": {"enabled": False}, "bfloat16": {"enabled": True}})
    )
    assert _asks("--deepspeed", "ds.json", cwd=tmp_path) == []


def test_the_job_on_brtx_is_refused_before_the_queue() -> None:
    spec = job_render.CommandJob(argv=("python", "train.py", "--bf16", "T"))
    with pytest.raises(BadInput, match=r"bf16 on Quadro RTX 6000 GPUs \(compute capability 7.5"):
        job_render.render(schema.load("brtx"), spec, workdir=Path(sys.prefix))


def _wrapped_asks(cwd: Path, *words: str) -> list[str]:
    cfg = launch_config.read(command.read(words), cwd, {})
    return list(launch_config.judge(cfg, RTX6000).errors)


def test_a_key_value_override_after_the_config_is_read_too(tmp_path: Path) -> None:
    """``llamafactory-cli train CFG.yaml bf16=true``: LLaMA-Factory merges ``key=value``
    words over its YAML (llamafactory 0.9.5, llamafactory/hparams/parser.py ``read_args``:
    ``OmegaConf.merge(yaml, OmegaConf.from_cli(argv[2:]))``), the override winning."""
    (tmp_path / "fp16.yaml").write_text("fp16: true\n")
    (tmp_path / "bf16.yaml").write_text("bf16: true\n")
    lmf = ("llamafactory-cli", "train")
    (error,) = _wrapped_asks(tmp_path, *lmf, "fp16.yaml", "bf16=true")
    assert "bf16=true (use fp16)" in error
    assert _wrapped_asks(tmp_path, *lmf, "bf16.yaml", "bf16=false", "fp16=true") == []
    (error,) = _wrapped_asks(tmp_path, *lmf, "fp16.yaml", "attn_implementation=fa2")
    assert "attn_implementation=fa2 (use sdpa)" in error
    assert _wrapped_asks(tmp_path, *lmf, "fp16.yaml", "--run_name", "bf16=x") == []
