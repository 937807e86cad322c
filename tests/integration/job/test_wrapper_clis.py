"""Wrapper CLIs (knowledge/wrappers.toml, issue 44) get, on each node, what their launcher
needs, judged by the wrappers' own code as released on PyPI (each wheel downloaded once,
checked against PyPI's sha256, ``cuda_artifacts.wheel``). None of these packages installs
here with its dependencies (torch with CUDA, transformers, accelerate), so each test runs
the wrapper's own launch code, taken from its wheel, with its launch step replaced by a
recorder (nothing is started):

- llamafactory 0.9.5: ``llamafactory/launcher.py`` ``launch()`` as released (its helpers
  from ``extras`` stand in: ``is_env_enabled`` copied from its ``misc.py``, a 4-GPU node's
  ``get_device_count``), run with the variables the job's node gets;
- axolotl 0.19.0: click (8.5) parses the words with the ``train`` command's own context
  settings (read from ``axolotl/cli/main.py``), and ``_launch_accelerate_training`` /
  ``_launch_torchrun_training`` / ``build_command`` from ``axolotl/cli/utils/train.py``
  build the launcher's command from click's ``ctx.args``;
- torchtune 0.6.1: ``tune run``'s ``_add_arguments``, ``_is_distributed_args`` and
  ``_run_distributed`` from ``torchtune/_cli/run.py`` over torch 2.13's own parser and
  ``run()`` (the probe venv's CPU torch), ``elastic_launch`` recorded.

The namespace SLURM cluster cannot start on this machine, so "one world of every rank" is
shown by what each node's launcher is given: the same node count, rendezvous and world,
and each node's own rank.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hpcenv.job import command, launchers
from hpcenv.knowledge import wrappers
from support import cuda_artifacts, require

ALLOC = launchers.Allocation(
    nodes=2, node_rank="1", per_node=4, master_addr="n1", master_port="29500"
)
#: What the job script exports on every node (job/render.py), node 1's NODE_RANK.
JOB_ENV = {"PATH": "/usr/bin:/bin", "MASTER_ADDR": "n1", "MASTER_PORT": "29500",
           "NNODES": "2", "GPUS_PER_NODE": "4", "WORLD_SIZE": "8", "NODE_RANK": "1",
           "PET_NNODES": "2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ID": "42",
           "PET_RDZV_ENDPOINT": "n1:29500"}  # fmt: skip


def _member(project: str, version: str, member: str) -> str:
    try:
        wheel = cuda_artifacts.wheel(project, version, "py3-none-any")
    except (cuda_artifacts.Unavailable, OSError) as exc:
        require("pypi", False, f"{project} {version}'s wheel on PyPI: {exc}")
        raise
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member).decode()


def _functions(source: str, *names: str) -> str:
    """The named functions (or methods) of ``source``, without their decorators."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            found[node.name] = ast.unparse(node)
    assert set(found) == set(names), f"not in the release: {set(names) - set(found)}"
    return "\n\n".join(found[n] for n in names)


def _run(python: str | Path, script: str, env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [str(python), "-c", script, *args], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- llamafactory-cli train: variables ---------------------------------------------------

_LLAMAFACTORY = """
import json, os, subprocess, sys, types
pkg = types.ModuleType("llamafactory"); pkg.__path__ = []
extras = types.ModuleType("llamafactory.extras"); extras.__path__ = []
logging = types.ModuleType("llamafactory.extras.logging")
class Log:
    def info_rank0(self, *a): pass
logging.get_logger = lambda name: Log()
env = types.ModuleType("llamafactory.extras.env"); env.VERSION = "0.9.5"; env.print_env = None
misc = types.ModuleType("llamafactory.extras.misc")
exec(sys.argv[2], misc.__dict__)  # is_env_enabled as released
misc.get_device_count = lambda: 4  # stands for a node with 4 GPUs
misc.find_available_port = lambda: 12345
misc.use_ray = misc.use_kt = lambda: False
train = types.ModuleType("llamafactory.train"); train.__path__ = []
tuner = types.ModuleType("llamafactory.train.tuner")
tuner.run_exp = lambda: seen.append(["one process: run_exp"])  # the non-distributed path
for m in (pkg, extras, logging, env, misc, train, tuner):
    sys.modules[m.__name__] = m
seen = []
launcher = types.ModuleType("llamafactory.launcher"); launcher.__package__ = "llamafactory"
launcher.__file__ = "llamafactory/launcher.py"
class Done: returncode = 0
def record(argv, env=None, check=False):
    seen.append(argv); return Done()
subprocess.run = record
exec(sys.argv[1], launcher.__dict__)  # llamafactory/launcher.py as released
sys.argv = ["llamafactory-cli", "train", "cfg.yaml"]
try:
    launcher.launch()
except SystemExit:
    pass
print(json.dumps(seen))
"""


def test_llamafactory_cli_gets_the_job_s_nodes_rank_and_processes() -> None:
    source = _member("llamafactory", "0.9.5", "llamafactory/launcher.py")
    misc = _functions(
        _member("llamafactory", "0.9.5", "llamafactory/extras/misc.py"), "is_env_enabled"
    )
    misc = "import os\n" + misc
    cmd = command.read(["llamafactory-cli", "train", "cfg.yaml"])
    launch = launchers.plan(cmd, ALLOC)
    assert launch.argv == cmd.words and launch.name == "llamafactory-cli train"
    node_env = {**JOB_ENV, **dict(launch.env)}
    (argv,) = _run(sys.executable, _LLAMAFACTORY, node_env, source, misc)
    assert argv[:11] == ["torchrun", "--nnodes", "2", "--node_rank", "1", "--nproc_per_node",
                         "4", "--master_addr", "n1", "--master_port", "29500"]  # fmt: skip
    assert argv[-2:] == ["llamafactory/launcher.py", "cfg.yaml"]  # its own trainer entry
    # the job's variables alone (no FORCE_TORCHRUN, NPROC_PER_NODE) on a 1-GPU node: no
    # torchrun at all, one process per node (what the table's env row is for)
    one_gpu = _LLAMAFACTORY.replace("lambda: 4  #", "lambda: 1  #")
    assert _run(sys.executable, one_gpu, JOB_ENV, source, misc) == [["one process: run_exp"]]


def test_a_user_s_own_variable_wins() -> None:
    cmd = command.read(["NPROC_PER_NODE=2", "llamafactory-cli", "train", "cfg.yaml"])
    env = dict(launchers.plan(cmd, ALLOC).env)
    assert "NPROC_PER_NODE" not in env and env["NNODES"] == "2"


# --- axolotl train: launcher options after -- --------------------------------------------

_AXOLOTL = """
import json, os, subprocess, sys
import click
seen = []
os.execvpe = lambda file, argv, env: seen.append(argv)
subprocess.run = lambda argv, check=False: seen.append(argv)
ns = {"os": os, "subprocess": subprocess, "sys": sys, "Any": object, "Literal": None}
exec(sys.argv[1], ns)  # build_command and the launch functions, as released
settings = json.loads(sys.argv[2])

@click.command(context_settings=settings)
@click.argument("config")
@click.option("--launcher", type=click.Choice(["accelerate", "torchrun", "python"]),
              default="accelerate")
@click.pass_context
def train(ctx, config, launcher):
    fn = ns["_launch_accelerate_training" if launcher == "accelerate"
            else "_launch_torchrun_training"]
    fn(config, {}, ctx.args if ctx.args else [], True)

train.main(json.loads(sys.argv[3]), standalone_mode=False)
print(json.dumps(seen))
"""


def _axolotl_settings() -> tuple[str, str]:
    main = _member("axolotl", "0.19.0", "axolotl/cli/main.py")
    train = ast.parse(main)
    fn = next(n for n in ast.walk(train) if isinstance(n, ast.FunctionDef) and n.name == "train")
    call = next(
        d for d in fn.decorator_list
        if isinstance(d, ast.Call) and any(k.arg == "context_settings" for k in d.keywords)
    )  # fmt: skip
    kw = next(k for k in call.keywords if k.arg == "context_settings")
    settings = ast.literal_eval(kw.value)
    utils = _member("axolotl", "0.19.0", "axolotl/cli/utils/train.py")
    code = _functions(
        utils,
        "_add_default_rdzv_args",
        "build_command",
        "_launch_accelerate_training",
        "_launch_torchrun_training",
    )
    return code, json.dumps(settings)


@pytest.mark.parametrize(
    ("words", "launcher_gets"),
    [
        (["axolotl", "train", "lora-1b.yml"],
         ["accelerate", "launch", "--num_machines", "2", "--machine_rank", "1",
          "--main_process_ip", "n1", "--main_process_port", "29500", "--num_processes", "8",
          "--multi_gpu", "-m", "axolotl.cli.train", "lora-1b.yml"]),
        (["axolotl", "train", "lora-1b.yml", "--launcher", "torchrun", "--", "--max-restarts",
          "1"],
         ["torchrun", "--max-restarts", "1", "--nproc_per_node", "4", "-m", "axolotl.cli.train",
          "lora-1b.yml"]),
        # click gives the launcher the options axolotl does not know wherever they stand
        # (ignore_unknown_options): yours win, as after --
        (["axolotl", "train", "lora-1b.yml", "--num_processes", "4"],
         ["accelerate", "launch", "--num_processes", "4", "--num_machines", "2",
          "--machine_rank", "1", "--main_process_ip", "n1", "--main_process_port", "29500",
          "--multi_gpu", "-m", "axolotl.cli.train", "lora-1b.yml"]),
    ],
)  # fmt: skip
def test_axolotl_train_passes_the_launcher_what_each_node_needs(
    words: list[str], launcher_gets: list[str]
) -> None:
    require("click", _has_click(), "click is not installed in hpcenv's venv")
    code, settings = _axolotl_settings()
    launch = launchers.plan(command.read(words), ALLOC)
    assert launch.name == "axolotl train"
    (argv,) = _run(sys.executable, _AXOLOTL, JOB_ENV, code, settings, json.dumps(launch.argv[2:]))
    assert argv == launcher_gets


def _has_click() -> bool:
    try:
        import click  # noqa: F401
    except ImportError:
        return False
    return True


# --- tune run: torchrun's options --------------------------------------------------------

_TUNE = """
import argparse, json, sys
from torch.distributed import run as torch_run
from torch.distributed.run import get_args_parser as get_torchrun_args_parser
seen = []
class Recorder:
    def __init__(self, config, entrypoint):
        seen.append(dict(endpoint=config.rdzv_endpoint, nodes=[config.min_nodes,
                         config.max_nodes], per_node=config.nproc_per_node))
    def __call__(self, *args):
        return {}
torch_run.elastic_launch = Recorder
ns = {"get_torchrun_args_parser": get_torchrun_args_parser, "run": torch_run.run,
      "argparse": argparse, "sys": sys}
exec(sys.argv[1], ns)  # torchtune's methods, as released
class Run:
    _add_arguments = ns["_add_arguments"]
    _is_distributed_args = ns["_is_distributed_args"]
    _run_distributed = ns["_run_distributed"]
worlds = []
for words in json.loads(sys.argv[2]):
    tune = Run()
    tune._parser = argparse.ArgumentParser(prog="tune run")
    tune._add_arguments()
    sys.argv = ["tune", *words]  # what _is_distributed_args counts
    args = tune._parser.parse_args(words[1:])
    seen.clear()
    if tune._is_distributed_args(args):
        tune._run_distributed(args, is_builtin=True)
    worlds.append(list(seen))
print(json.dumps(worlds))
"""


def test_tune_run_forms_the_job_s_world(torch_python: Path) -> None:
    code = _functions(
        _member("torchtune", "0.6.1", "torchtune/_cli/run.py"),
        "_add_arguments", "_is_distributed_args", "_run_distributed",
    )  # fmt: skip
    words = ["tune", "run", "full_finetune_distributed", "--config", "llama3/8B_full"]
    launch = launchers.plan(command.read(words), ALLOC)
    assert launch.added == ("--nproc_per_node", "4") and launch.name == "tune run"
    as_written, got = _run(
        torch_python, _TUNE, JOB_ENV, code, json.dumps([words[1:], list(launch.argv[1:])])
    )
    assert as_written == []  # no torchrun option: one process on each node
    assert got == [{"endpoint": "n1:29500", "nodes": [2, 2], "per_node": 4}]


# --- the table --------------------------------------------------------------------------


def test_every_row_names_its_release_and_the_reader_knows_each() -> None:
    rows = wrappers.wrappers()
    assert {w.name for w in rows} >= {"axolotl train", "llamafactory-cli train", "tune run",
                                      "trl", "composer", "Lightning"}  # fmt: skip
    for w in rows:
        assert "(PyPI wheel)" in w.source and w.source.split()[1][0].isdigit(), w.name
        if w.program:
            words = [w.program[0], *w.subcommands[:1], "x.yaml"]
            assert command.read(words).wrapped == w.name


def test_trl_gets_accelerate_s_options_and_composer_its_variables() -> None:
    trl = launchers.plan(command.read(["trl", "sft", "--model_name_or_path", "Q"]), ALLOC)
    assert trl.argv[-11:] == ("--num_machines", "2", "--machine_rank", "1",
                              "--main_process_ip", "n1", "--main_process_port", "29500",
                              "--num_processes", "8", "--multi_gpu")  # fmt: skip
    composer = launchers.plan(command.read(["composer", "train.py"]), ALLOC)
    assert dict(composer.env) == {"LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8", "NODE_RANK": "1",
                                  "MASTER_ADDR": "n1", "MASTER_PORT": "29500"}  # fmt: skip


def test_trl_s_accelerate_config_names_how_to_distribute() -> None:
    """``trl sft --accelerate_config zero3`` (trl 1.16.0, trl/cli/accelerate_config.py
    ``resolve_accelerate_config_argument``) reaches accelerate as ``--config_file``, which
    says how to distribute: an added ``--multi_gpu`` would make accelerate skip the config's
    distributed_type (DEEPSPEED) and run plain DDP."""
    words = ["trl", "sft", "--accelerate_config", "zero3", "--model_name_or_path", "Q"]
    got = launchers.plan(command.read(words), ALLOC)
    assert "--multi_gpu" not in got.argv and "--num_machines" in got.argv
    assert command.read(words).options()["--config_file"] == "zero3"


@pytest.mark.parametrize("words", [["-n", "2"], ["--nproc", "2"], ["--nproc=2"]])
def test_composer_s_own_process_count_shapes_the_world(words: list[str]) -> None:
    """composer's -n/--nproc wins over $LOCAL_WORLD_SIZE, and $WORLD_SIZE is its world when
    it differs (mosaicml 0.32.1, composer/cli/launcher.py ``_parse_args``): with -n 2 on 2
    nodes of 4 GPUs the world is 4, not 8 (8 would wait for ranks that never start)."""
    got = launchers.plan(command.read(["composer", *words, "train.py"]), ALLOC)
    assert dict(got.env)["WORLD_SIZE"] == "4" and dict(got.env)["LOCAL_WORLD_SIZE"] == "2"


def test_composer_s_count_that_is_not_a_number_is_one_line(tmp_path: Path) -> None:
    done = _sbatch(tmp_path, "--", "composer", "-n", "abc", "train.py")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "hpcenv: error: composer -n 'abc': not a count; give a whole number above 0"
    )


# --- in the job script ------------------------------------------------------------------


def _sbatch(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", "brtx", "--nodes", "2", "--gpus", "4", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
    )  # fmt: skip


def test_a_lightning_script_needs_one_task_per_gpu(tmp_path: Path) -> None:
    """Lightning's SLURMEnvironment takes its world from SLURM's tasks (lightning 2.6.6,
    lightning/fabric/plugins/environments/slurm.py): once per node it would refuse
    ntasks-per-node 1 against devices=4."""
    (tmp_path / "train.py").write_text("import lightning as L\ntrainer = L.Trainer()\n")
    once = _sbatch(tmp_path, "--", "python", "train.py")
    assert once.returncode == 2 and "add --per-task (4 tasks per node)" in once.stderr
    per_task = _sbatch(tmp_path, "--per-task", "--", "python", "train.py")
    assert per_task.returncode == 0, per_task.stderr


def test_the_script_wraps_a_wrapper_cli_and_checks_its_config(tmp_path: Path) -> None:
    (tmp_path / "lora-1b.yml").write_text("base_model: x\nbf16: true\n")
    done = _sbatch(tmp_path, "--", "axolotl", "train", "lora-1b.yml")
    assert done.returncode == 2 and "lora-1b.yml: bf16: true (use fp16)" in done.stderr
    (tmp_path / "lora-1b.yml").write_text("base_model: x\nfp16: true\n")
    done = _sbatch(tmp_path, "--", "axolotl", "train", "lora-1b.yml")
    assert done.returncode == 0, done.stderr
    assert '-m hpcenv.job.launchers -- "${cmd[@]}")' in done.stdout
    assert "hpcenv: axolotl train (accelerate) gets --num_machines 2" in done.stdout
