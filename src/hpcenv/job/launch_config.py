"""The launcher's configuration checked before the queue: what would fail an hour in, or
after hours waiting, said while the job can still be fixed.

Read: the accelerate config the command names (``--config_file``, else accelerate's
default, ``$HF_HOME/accelerate/default_config.yaml``) and the DeepSpeed JSON it names
(``--deepspeed``/``--deepspeed_config`` anywhere in the command, or the accelerate
config's ``deepspeed_config.deepspeed_config_file``). ``"auto"`` values are the trainer's
to fill in and are not judged.

Also what the trainer asks (``trainer_asks``): HF Trainer's ``--bf16``/``--tf32``/
``--attn_implementation`` and the keys of the YAML/JSON files the script is given
(positional, ``--config F``), read within bounds (size, depth, entries).

Judged against the job (nodes, processes per node, the GPUs' compute capability, the
node's memory): bf16, tf32 and FlashAttention-2 below compute capability 8.0, every place
in one error (``_judge_precision``); accelerate's ``num_processes`` and ``num_machines``
(a config written for one machine gets the allocation's instead, ``single_machine``);
torchrun's and DeepSpeed's own process and node counts; DeepSpeed's ``train_batch_size`` against
micro-batch x gradient accumulation x world size (DeepSpeed asserts it at start), ZeRO
offload to CPU memory. ``check`` reads; ``judge`` is pure; each finding is one line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcenv.job import command
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput


@dataclass(frozen=True, kw_only=True)
class Job:
    """What the checks judge a configuration against."""

    nodes: int
    per_node: int  # processes per node (GPUs, or tasks on CPU nodes)
    compute_capability: str = ""  # of the GPUs; "" unknown or none
    gpu: str = ""  # their model, for the words
    memory_gib: float = 0.0  # of a node; 0 unknown


@dataclass(frozen=True, kw_only=True)
class Configs:
    """The configuration files a command names, read."""

    accelerate: tuple[Path, Mapping[str, Any]] | None = None
    deepspeed: tuple[Path, Mapping[str, Any]] | None = None
    cli: Mapping[str, str | None] = field(default_factory=dict)  # accelerate's options
    kind: str = ""  # the launcher (command.KINDS), "" for none
    #: What the trainer asks that needs compute capability 8.0: (where, what), what one of
    #: bf16, tf32, flash_attention_2 (HF Trainer flags, the YAML/JSON files it is given).
    trainer: tuple[tuple[str, str], ...] = ()
    flash_imports: tuple[str, ...] = ()  # "script.py:LINE" importing flash_attn
    imports: frozenset[str] = frozenset()  # the top-level packages the script imports
    options: Mapping[str, str | None] = field(default_factory=dict)  # the launcher's own


@dataclass(frozen=True, kw_only=True)
class Findings:
    errors: tuple[str, ...] = ()  # the job cannot work: exit 2 before the queue
    warnings: tuple[str, ...] = ()  # suspect
    notes: tuple[str, ...] = ()  # the effective batch, ...


#: Bounds on a configuration file hpcenv reads (a config is a few KiB).
MAX_CONFIG_BYTES = 4 << 20
MAX_DEPTH = 32
MAX_ENTRIES = 100_000
#: Trainer options naming a YAML/JSON configuration (HF Trainer's --deepspeed is read as
#: DeepSpeed's; a positional .yaml/.yml/.json is read too).
TRAINER_CONFIG_OPTIONS = ("--config", "--config_file", "--config-file", "--config_path", "--cfg")
#: HF's command-line booleans, case-insensitive: ``string_to_bool`` in
#: transformers/hf_argparser.py (5.24.0; the same set since 4.x), the ``type`` of every bool
#: field of ``HfArgumentParser`` (TrainingArguments, TRL's and LLaMA-Factory's arguments).
#: Anything else ("on") is argparse's error, not a request.
HF_TRUE = ("yes", "true", "t", "y", "1")
HF_FALSE = ("no", "false", "f", "n", "0")
#: A boolean in a YAML/JSON file a trainer loads: pydantic's lax bool (axolotl's config,
#: DeepSpeed's ``DeepSpeedBF16Config.enabled: bool``, deepspeed/runtime/precision_config.py
#: 0.19.8) takes these strings, case-insensitive, and 1; HF's ``parse_dict`` passes the
#: value to the dataclass as is (any non-empty string, any non-zero number is true where
#: it is tested). YAML 1.1's yes/on are booleans already (PyYAML's safe_load).
FILE_TRUE = ("1", "on", "t", "true", "y", "yes")
_FLASH = ("flash_attention_2", "flash_attention_3", "fa2", "fa3")


def _flag(words: Sequence[str], i: int) -> bool | None:
    """An HF Trainer boolean option at ``words[i]``: ``--x`` (``const=True``), ``--x T``,
    ``--x=false``, read with HF's ``string_to_bool`` (``HF_TRUE``/``HF_FALSE``); None for a
    value HF refuses."""
    _, eq, value = words[i].partition("=")
    if not eq:
        nxt = words[i + 1] if i + 1 < len(words) else ""
        value = nxt if nxt and not nxt.startswith("-") else "true"
    low = value.strip().lower()
    return True if low in HF_TRUE else False if low in HF_FALSE else None


def is_true(value: Any) -> bool:
    """A config file's value that a trainer reads as true (``FILE_TRUE``): True, a non-zero
    number (``1``, ``1.0``: HF's ``parse_dict`` keeps it, and it is truthy; pydantic's lax
    bool takes 1.0), or one of the strings."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return isinstance(value, str) and value.strip().lower() in FILE_TRUE


def _option_name(word: str) -> str:
    """``--attn-implementation=x`` as ``--attn_implementation``: ``HfArgumentParser`` adds
    the dash form of every field with an underscore as an alias (``long_options`` in
    transformers/hf_argparser.py ``_parse_dataclass_field``)."""
    name = word.partition("=")[0]
    return "--" + name[2:].replace("-", "_") if name.startswith("--") else name


def _walk(data: Any, where: str, found: list[tuple[str, str]], depth: int = 0) -> int:
    """Keys asking for bf16, tf32 or FlashAttention anywhere in ``data``; entries seen."""
    if depth > MAX_DEPTH:
        raise BadInput(f"{where}: nested deeper than {MAX_DEPTH} levels; hpcenv reads no deeper")
    seen = 1
    items = data.items() if isinstance(data, Mapping) else enumerate(data) if isinstance(
        data, list) else ()  # fmt: skip
    for key, value in items:
        if key in ("bf16", "tf32") and not isinstance(value, (Mapping, list)) and is_true(value):
            found.append((f"{where}: {key}: {_shown(value)}", str(key)))
        elif key in ("attn_implementation", "flash_attn") and str(value) in _FLASH:
            found.append((f"{where}: {key}: {value}", "flash_attention_2"))
        elif key == "use_flash_attention_2" and is_true(value):  # transformers before 4.36
            found.append((f"{where}: {key}: {_shown(value)}", "flash_attention_2"))
        seen += _walk(value, where, found, depth + 1)
        if seen > MAX_ENTRIES:
            raise BadInput(f"{where}: more than {MAX_ENTRIES} entries; hpcenv reads no more")
    return seen


def _shown(value: Any) -> str:
    """A true value as the file spells it (``true`` for YAML's and JSON's booleans)."""
    return "true" if value is True else str(value)


def trainer_asks(
    words: Sequence[str], cwd: Path, *, skip: Path | None = None
) -> tuple[tuple[str, str], ...]:
    """What the trainer's own words ask that needs compute capability 8.0: HF Trainer's
    ``--bf16``/``--tf32`` (bare or ``True``), ``--attn_implementation flash_attention_2``,
    and the keys of the YAML/JSON files it is given (a positional ``.yaml``/``.json``,
    ``--config F``); files that are not there are the trainer's to complain about."""
    found: list[tuple[str, str]] = []
    files: list[str] = []
    for i, word in enumerate(words):
        _, eq, value = word.partition("=")
        name = _option_name(word)
        after = words[i + 1] if i + 1 < len(words) else ""
        if name in ("--bf16", "--tf32") and _flag(words, i):
            valued = not eq and after and not after.startswith("-")
            found.append((f"{word} {after}" if valued else word, name[2:]))
        elif name == "--attn_implementation" and (value or after) in _FLASH:
            shown = word if eq else f"{word} {after}"
            found.append((shown, "flash_attention_2"))
        elif name in TRAINER_CONFIG_OPTIONS:
            files.append(value or after)
        elif word.endswith((".yaml", ".yml", ".json")) and not _is_value(words, i):
            files.append(word)
    in_files: list[tuple[str, str]] = []
    for name in dict.fromkeys(f for f in files if f):
        path = cwd / name
        if path.is_file() and path != skip:
            data = _load(path, "trainer config", mapping=False, strict=False)
            _walk(data, f"{path}", in_files)
    overrides = _overrides(words)
    kept = [(where, what) for where, what in in_files if what not in overrides]
    return (*found, *kept, *((w, what) for what, (w, asks) in overrides.items() if asks))


#: The keys a trainer's file sets that ask for each need (``_walk``'s keys).
_KEY_ASKS = {
    "bf16": "bf16", "tf32": "tf32", "attn_implementation": "flash_attention_2",
    "flash_attn": "flash_attention_2", "use_flash_attention_2": "flash_attention_2",
}  # fmt: skip
_OVERRIDE = re.compile(r"[A-Za-z_][\w.]*=")


def _overrides(words: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """``key=value`` words laid over the trainer's config file, the last winning
    (OmegaConf's ``from_cli`` dotlist: LLaMA-Factory's ``read_args``, torchtune's and Hydra's
    overrides; the value read as YAML, a dotted key by its last part): for each need they
    set, the word and whether it asks."""
    out: dict[str, tuple[str, bool]] = {}
    for i, word in enumerate(words):
        if not _OVERRIDE.match(word) or _is_value(words, i):
            continue
        key, _, value = word.partition("=")
        what = _KEY_ASKS.get(key.rsplit(".", 1)[-1])
        if what == "flash_attention_2" and not key.endswith("use_flash_attention_2"):
            out[what] = (word, value in _FLASH)
        elif what:
            out[what] = (word, is_true(value))
    return out


_FLASH_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+flash_attn\b", re.M)


def script_text(script: Path) -> str:
    """The job's script (its first MAX_CONFIG_BYTES); "" when it is not there, unreadable
    or not a regular file: a FIFO or device is never read (``fsio.read_blocks`` opens it
    without blocking and refuses it before any read)."""
    try:
        blocks = fsio.read_blocks(script, "script", size=MAX_CONFIG_BYTES)
        text = next(blocks, b"").decode("utf-8", errors="replace")
        blocks.close()
    except (BadInput, OSError):
        return ""
    return text


def flash_imports(script: Path, text: str) -> tuple[str, ...]:
    """``script:LINE`` for each line of the script's ``text`` importing flash_attn."""
    return tuple(
        f"{script}:{text.count(chr(10), 0, m.start()) + 1}" for m in _FLASH_IMPORT.finditer(text)
    )


_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def top_imports(text: str) -> frozenset[str]:
    """The top-level packages a script's ``text`` imports (``import lightning.pytorch as
    pl``: lightning)."""
    return frozenset(m.group(1) for m in _IMPORT.finditer(text))


def _is_value(words: Sequence[str], i: int) -> bool:
    """``words[i]`` is the value of the option before it (``--train_file data.json``)."""
    before = words[i - 1] if i > 0 else ""
    return before.startswith("-") and "=" not in before


def default_accelerate_config(env: Mapping[str, str]) -> Path:
    """accelerate's default config file (``accelerate config`` writes it)."""
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME", "~"), ".cache")
    home = env.get("HF_HOME") or os.path.join(cache, "huggingface")
    return Path(os.path.expanduser(home)) / "accelerate" / "default_config.yaml"


def _load(
    path: Path, what: str, *, as_json: bool = False, mapping: bool = True, strict: bool = True
) -> Any:
    """``path`` through fsio's one loader per format (JSON, else YAML; bounded size, depth
    and numbers); ``strict=False``: None for text that does not parse (a trainer's own
    format: its to judge), though a file past the bounds is still refused."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_text says why it cannot be read
    if size > MAX_CONFIG_BYTES:
        raise BadInput(
            f"{path}: a {what} of {size} bytes; hpcenv reads at most {MAX_CONFIG_BYTES} "
            "(is this the right file?)"
        )
    text = fsio.read_text(path, what=what)
    if not strict and not _parses(text, as_json or path.suffix == ".json"):
        return None
    if as_json or path.suffix == ".json":
        data = fsio.parse_json(text, f"{path}", f"a {what} is JSON; fix the file")
    else:
        data = fsio.parse_yaml(text, f"{path}", what)
    if mapping and not isinstance(data, Mapping):
        raise BadInput(f"{path}: a {what} holds a mapping of keys; this one does not")
    return data


def _parses(text: str, as_json: bool) -> bool:
    """Whether ``text`` is JSON (or YAML) at all; the bounded loaders judge the rest."""
    import yaml  # type: ignore[import-untyped]  # here: only a job with a config pays for it

    try:
        json.loads(text) if as_json else fsio.safe_yaml(text)
    except (ValueError, yaml.YAMLError, RecursionError):
        return False
    return True


def read(cmd: command.Command, cwd: Path, env: Mapping[str, str]) -> Configs:
    """The accelerate and DeepSpeed configuration files ``cmd`` names, read (the command's
    own ``VAR=value`` words count: ``HF_HOME=... accelerate launch``)."""
    argv, kind, start = cmd.words, cmd.kind, cmd.start
    env = cmd.environ(env)
    acc = None
    if kind == "accelerate":
        named = command.option_value(argv[start:], "--config_file", "--config-file")
        path = (cwd / named) if named else default_accelerate_config(env)
        if named or path.is_file():
            acc = (path, _load(path, "accelerate config"))
    ds_name = command.option_value(
        argv, "--deepspeed", "--deepspeed_config", "--deepspeed-config", "--deepspeed_config_file"
    )
    if ds_name is None and acc is not None:
        nested = acc[1].get("deepspeed_config") or {}
        ds_name = nested.get("deepspeed_config_file") if isinstance(nested, Mapping) else None
        if ds_name is not None and not isinstance(ds_name, str):
            raise BadInput(
                f"{acc[0]}: deepspeed_config.deepspeed_config_file: {str(ds_name)[:40]!r} is not "
                "a file name; give the path of the DeepSpeed JSON"
            )
    ds = None
    if ds_name:  # JSON whatever its suffix (open-instruct's are .conf)
        ds_path = cwd / ds_name
        ds = (ds_path, _load(ds_path, "DeepSpeed config", as_json=True))
    cli: dict[str, str | None] = {}
    if kind == "accelerate":
        for key in ("--num_processes", "--num_machines", "--mixed_precision"):
            value = command.option_value(argv[start:], key, key.replace("_", "-"))
            if value is not None:
                cli[key] = value
    text = script_text(cwd / cmd.script) if cmd.script else ""
    return Configs(
        accelerate=acc, deepspeed=ds, cli=cli, kind=kind, options=cmd.options(),
        trainer=trainer_asks(cmd.arguments, cwd, skip=ds[0] if ds else None),
        flash_imports=flash_imports(cwd / cmd.script, text),
        imports=top_imports(text),
    )  # fmt: skip


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A nested table of a config; empty when absent or not a table."""
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> int | None:
    """An integer setting; None for "auto", absent or anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        return int(value)
    except ValueError:
        return None


#: The words torchrun's ``--nproc-per-node`` takes besides a number
#: (``determine_local_world_size`` in torch/distributed/run.py).
TORCHRUN_NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")

#: Rendezvous hosts that are each node's own (torch's --standalone uses localhost).
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")

#: The largest count a config may give (processes, machines, batch sizes, steps).
MAX_COUNT = 10**9


def _config_count(value: Any, where: str) -> int | None:
    """A setting that counts things: a positive integer up to ``MAX_COUNT``; None when
    absent or "auto"; BadInput naming ``where`` for anything else (negative, zero, NaN, a
    fraction, thousands of digits)."""
    if value is None or value == "auto":
        return None
    number: float | int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif (
        isinstance(value, str)
        and value.strip().isascii()
        and value.strip().isdigit()
        and len(value.strip()) <= 10
    ):
        number = int(value.strip())
    if number is None or not 0 < number <= MAX_COUNT:
        small = not isinstance(value, int) or abs(value) < 10**12
        shown = repr(value) if small else "a number of many digits"
        raise BadInput(
            f"{where}: {shown[:40]} is not a count; give a positive whole number "
            f'(at most {MAX_COUNT:,}) or "auto"'
        )
    return int(number)


def _below_8(job: Job) -> bool:
    try:
        return bool(job.compute_capability) and float(job.compute_capability) < 8.0
    except ValueError:
        return False


#: What each need of compute capability 8.0 becomes on an older GPU.
_INSTEAD = {"bf16": "use fp16", "tf32": "set it false", "flash_attention_2": "use sdpa"}


def precision_asks(cfg: Configs) -> list[tuple[str, str]]:
    """Every place the job asks for bf16, tf32 or FlashAttention-2: accelerate's
    mixed_precision (command line or config), DeepSpeed's bf16.enabled, the trainer's."""
    places: list[tuple[str, str]] = []
    data = cfg.accelerate[1] if cfg.accelerate else {}
    if cfg.cli.get("--mixed_precision") == "bf16":
        places.append(("--mixed_precision bf16 (mixed_precision: bf16)", "bf16"))
    elif cfg.accelerate and data.get("mixed_precision") == "bf16":
        places.append((f"{cfg.accelerate[0]} mixed_precision: bf16", "bf16"))
    if cfg.deepspeed:
        # DeepSpeed reads "bf16", else the older "bfloat16" section, its enabled a pydantic
        # bool (get_bfloat16_config in deepspeed/runtime/precision_config.py, 0.19.8)
        section = "bf16" if "bf16" in cfg.deepspeed[1] else "bfloat16"
        enabled = _section(cfg.deepspeed[1], section).get("enabled")
        if is_true(enabled):
            places.append((f"{cfg.deepspeed[0]}: {section}.enabled: {_shown(enabled)}", "bf16"))
    return places + list(cfg.trainer)


def _judge_precision(cfg: Configs, job: Job) -> list[str]:
    """One error listing every place that asks what GPUs below 8.0 cannot run."""
    places = precision_asks(cfg)
    if not places or not _below_8(job):
        return []
    gpu = f"{job.gpu} GPUs" if job.gpu else "these GPUs"
    needs = sorted({what for _, what in places})
    fixes = ", ".join(f"{where} ({_INSTEAD[what]})" for where, what in places)
    return [
        f"{'/'.join(needs)} on {gpu} (compute capability {job.compute_capability}) cannot "
        f"run: they need 8.0 or newer; change every place the job asks for them: {fixes}"
    ]


def _judge_accelerate(cfg: Configs, job: Job) -> tuple[list[str], list[str], list[str], int]:
    """Errors, warnings, notes and the world size accelerate will use."""
    errors: list[str] = []
    warnings: list[str] = []
    total = job.nodes * job.per_node
    path, data = cfg.accelerate if cfg.accelerate else (Path("accelerate"), {})
    machines = _config_count(
        cfg.cli.get("--num_machines") or data.get("num_machines"),
        "--num_machines" if "--num_machines" in cfg.cli else f"{path}: num_machines",
    )
    notes: list[str] = []
    world = _config_count(
        cfg.cli.get("--num_processes") or data.get("num_processes"),
        "--num_processes" if "--num_processes" in cfg.cli else f"{path}: num_processes",
    )
    if single_machine(cfg, job.nodes):  # the repos' SLURM recipes override it on the CLI
        given = f"--num_machines {job.nodes}"
        if "--num_processes" not in cfg.cli:
            given += f" --num_processes {total}"
            world = None
        notes.append(
            f"{path}: num_machines: 1 (written for one machine): hpcenv gives {given} on "
            "accelerate's command line"
        )
        machines = None
    if machines is not None and machines != job.nodes:
        where = "--num_machines" if "--num_machines" in cfg.cli else f"{path}: num_machines:"
        errors.append(
            f"{where} {machines} but the job has {job.nodes} node(s); the rendezvous would "
            f"wait for machines that never come; give {job.nodes} (or leave it out: hpcenv "
            "gives --num_machines)"
        )
    where = "--num_processes" if "--num_processes" in cfg.cli else f"{path}: num_processes:"
    if world is not None and world > total:
        errors.append(
            f"{where} {world} but the job has {total} GPU(s) or task(s) "
            f"({job.nodes} x {job.per_node}); give {total}"
        )
    elif world is not None and world < total:
        warnings.append(
            f"{where} {world} while the job has {total} ({job.nodes} x "
            f"{job.per_node}); {total - world} would sit idle (give {total})"
        )
    nested = _section(data, "deepspeed_config")
    offloaded = [
        key
        for key in ("offload_optimizer_device", "offload_param_device")
        if nested.get(key) in ("cpu", "nvme")
    ]
    if offloaded:
        warnings.append(_offload(job, f"{path}", offloaded))
    return errors, warnings, notes, world or total


def single_machine(cfg: Configs, nodes: int) -> bool:
    """An accelerate config written for one machine (``num_machines: 1``) on a job of
    several nodes, with no ``--num_machines`` on the command line: hpcenv gives
    ``--num_machines``/``--num_processes`` from the allocation instead of refusing it."""
    data = cfg.accelerate[1] if cfg.accelerate else {}
    return nodes > 1 and "--num_machines" not in cfg.cli and _number(data.get("num_machines")) == 1


def _offload(job: Job, where: str, parts: Sequence[str]) -> str:
    per_rank = f"{job.memory_gib / job.per_node:.0f} GiB" if job.memory_gib else "unknown"
    have = f"{job.memory_gib:g} GiB" if job.memory_gib else "an unknown amount of memory"
    return (
        f"{where}: ZeRO offloads {' and '.join(parts)} to host memory: the node has "
        f"{have} for {job.per_node} rank(s) ({per_rank} each); the offloaded state must fit "
        "there or the job dies of OOM"
    )


def _judge_deepspeed(cfg: Configs, job: Job, world: int) -> tuple[list[str], list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    if cfg.deepspeed is None:
        return errors, warnings, notes
    path, ds = cfg.deepspeed
    total = _config_count(ds.get("train_batch_size"), f"{path}: train_batch_size")
    micro = _config_count(
        ds.get("train_micro_batch_size_per_gpu"), f"{path}: train_micro_batch_size_per_gpu"
    )
    accum = _config_count(
        ds.get("gradient_accumulation_steps", 1), f"{path}: gradient_accumulation_steps"
    )
    if micro is not None and accum is not None:
        product = micro * accum * world
        shown = f"{micro} x {accum} x {world} GPUs = {product}"
        if total is not None and total != product:
            errors.append(
                f"{path}: train_batch_size {total} is not train_micro_batch_size_per_gpu x "
                f"gradient_accumulation_steps x world size ({shown}); DeepSpeed stops at start: "
                f'set train_batch_size to {product} (or "auto")'
            )
        else:
            notes.append(f"effective batch: {shown} (micro-batch x accumulation x world)")
    zero = _section(ds, "zero_optimization")
    offloaded = [
        part
        for part in ("offload_optimizer", "offload_param")
        if _section(zero, part).get("device") in ("cpu", "nvme")
    ]
    if offloaded:
        warnings.append(_offload(job, f"{path}", offloaded))
    return errors, warnings, notes


def _count(
    option: str, asked: int, have: int, what: str, *, errors: list[str], warnings: list[str]
) -> None:
    """``option asked`` against the ``have`` of the job: more is an error, fewer a warning."""
    if asked > have:
        errors.append(
            f"{option} {asked} but the job has {have} {what}; the launcher would wait for or "
            f"start on what is not there: give {have} (or leave it out: hpcenv gives it)"
        )
    elif asked < have:
        warnings.append(f"{option} {asked} while the job has {have} {what}: {have - asked} idle")


def _included(value: str) -> int:
    """The most GPUs DeepSpeed's ``--include host:0,1@host2:2`` names on one host (0: a
    host without ids, all of its GPUs)."""
    most = 0
    for part in value.split("@"):
        _, _, ids = part.partition(":")
        most = max(most, len([i for i in ids.split(",") if i.strip()]))
    return most


def _judge_processes(cfg: Configs, job: Job) -> tuple[list[str], list[str]]:
    """torchrun's and deepspeed's own process and node counts against the allocation
    (accelerate's are judged with its config)."""
    errors: list[str] = []
    warnings: list[str] = []
    opts, gpus = cfg.options, "GPU(s) or task(s) per node"
    if cfg.kind == "torchrun":
        given = opts.get("--nproc_per_node")
        per_node = _number(given)  # "gpu", "auto", "cpu", "xpu": torchrun's to count
        if given is not None and per_node is None and given not in TORCHRUN_NPROC_WORDS:
            errors.append(
                f"torchrun --nproc-per-node {given!r} is not a count; give a whole number or "
                f"one of {', '.join(TORCHRUN_NPROC_WORDS)} (torch/distributed/run.py)"
            )
        if per_node is not None:
            _count(
                "--nproc_per_node", per_node, job.per_node, gpus, errors=errors, warnings=warnings
            )
        endpoint = str(opts.get("--rdzv_endpoint") or "")
        host = endpoint.rpartition(":")[0].strip("[]") if ":" in endpoint else endpoint
        if job.nodes > 1 and host.lower() in _LOCAL_HOSTS:
            errors.append(
                f"--rdzv_endpoint {endpoint} on {job.nodes} nodes: each node's torchrun would "
                "rendezvous alone on its own host and wait for the others; leave it out (the "
                "job's PET_RDZV_ENDPOINT names the first node)"
            )
        nnodes = str(opts.get("--nnodes") or "")
        low, _, high = nnodes.partition(":")
        if nnodes and (_number(low) is None or (high and _number(high) is None)):
            errors.append(
                f"torchrun --nnodes {nnodes!r} is not a node count; give {job.nodes} (or "
                "MIN:MAX), or leave it out: the job's PET_NNODES says it"
            )
        elif (
            nnodes
            and _number(low) is not None
            and not (int(low) <= job.nodes <= (_number(high) or int(low)))
        ):
            errors.append(
                f"--nnodes {nnodes} but the job has {job.nodes} node(s): torchrun on each node "
                f"would form a world of its own or wait; give --nnodes {job.nodes} (or leave "
                "it out: the job's PET_NNODES says it)"
            )
    elif cfg.kind == "deepspeed":
        for option, have, what in (
            ("--num_gpus", job.per_node, gpus),
            ("--num_nodes", job.nodes, "node(s)"),
        ):
            try:  # deepspeed's runner reads both with type=int: anything else is a traceback
                asked = _config_count(opts.get(option), f"deepspeed {option}")
            except BadInput as exc:
                errors.append(str(exc).replace(' or "auto"', ""))
                continue
            if asked is not None:
                _count(option, asked, have, what, errors=errors, warnings=warnings)
        include = _included(str(opts.get("--include") or opts.get("--i") or ""))
        if include > job.per_node:
            errors.append(
                f"--include names {include} GPUs on a node but the job has {job.per_node} "
                f"{gpus}; name at most {job.per_node}"
            )
    return errors, warnings


def judge(cfg: Configs, job: Job) -> Findings:
    """The findings for ``cfg`` on ``job`` (pure)."""
    errors, warnings, notes, world = _judge_accelerate(cfg, job)
    ds_errors, ds_warnings, ds_notes = _judge_deepspeed(cfg, job, world)
    count_errors, count_warnings = _judge_processes(cfg, job)
    if cfg.flash_imports and _below_8(job):  # maybe guarded (try/except): a warning
        count_warnings.append(
            f"{', '.join(cfg.flash_imports)} imports flash_attn, whose FlashAttention-2 "
            f"kernels need compute capability 8.0 ({job.gpu or 'these GPUs'} have "
            f"{job.compute_capability}): unless the script falls back, use sdpa"
        )
    return Findings(
        errors=tuple(_judge_precision(cfg, job) + errors + ds_errors + count_errors),
        warnings=tuple(warnings + ds_warnings + count_warnings),
        notes=tuple(notes + ds_notes),
    )


#: accelerate config keys the user's file sets that hpcenv then leaves alone (the rank of a
#: machine is always the node's own: a config's machine_rank is that of the one it was
#: written on).
RESPECTED = ("num_processes", "num_machines", "main_process_ip", "main_process_port")


def configured(cfg: Configs, nodes: int = 1) -> frozenset[str]:
    """The launcher options an accelerate config already gives (``RESPECTED``); on
    ``nodes`` > 1 a config written for one machine gives neither num_machines nor
    num_processes (``single_machine``: the allocation's are added)."""
    data = cfg.accelerate[1] if cfg.accelerate else {}
    keys = [k for k in RESPECTED if data.get(k) is not None]
    if single_machine(cfg, nodes):
        keys = [k for k in keys if k not in ("num_machines", "num_processes")]
    return frozenset(f"--{key}" for key in keys)


def check(cmd: command.Command, *, job: Job, cwd: Path, env: Mapping[str, str]) -> Findings:
    """Read what ``cmd`` names and judge it; BadInput (exit 2) when it cannot work."""
    return verdict(read(cmd, cwd, env), job)


def verdict(cfg: Configs, job: Job) -> Findings:
    """``judge``, its errors raised as one BadInput (exit 2)."""
    found = judge(cfg, job)
    if found.errors:
        raise BadInput("; ".join(found.errors))
    return found
