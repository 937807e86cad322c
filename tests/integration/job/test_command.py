"""The job's command read as the shell runs it (``hpcenv.job.command``): ``VAR=value``
words, ``env [-u NAME]``, ``uv run --`` and the module forms of the launchers; the
prefixed and bare forms of one command render the same launcher arguments and get the
same checks; the rendered script runs the user's words with the variables applied (never
``VAR=value`` as a program); torch.distributed's conventions exported per node.

Commands are those public training repos put in their READMEs (accelerate's
``ACCELERATE_LOG_LEVEL=info accelerate launch``, LLaMA-Factory's
``FORCE_TORCHRUN=1 llamafactory-cli train``); configs are open-instruct's
(tests/data/launch_configs/open-instruct/ORIGIN).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.job import command, launchers
from hpcenv.job import render as slurm_job
from hpcenv.profile import schema
from hpcenv.utils.errors import BadInput
from support import REPO

OPEN_INSTRUCT = REPO / "tests" / "data" / "launch_configs" / "open-instruct"
ZERO3 = str(OPEN_INSTRUCT / "deepspeed_zero3.yaml")
ALLOC = launchers.Allocation(
    nodes=2, node_rank="1", per_node=4, master_addr="n1", master_port="29500", hostfile="/h",
    hosts=("n1", "n2"),
)  # fmt: skip


# --- the reader -----------------------------------------------------------------------


def test_leading_assignments_are_the_environment_not_the_program() -> None:
    cmd = command.read(["ACCELERATE_LOG_LEVEL=info", "A=1=2", "accelerate", "launch", "t.py"])
    assert cmd.env == (("ACCELERATE_LOG_LEVEL", "info"), ("A", "1=2"))
    assert cmd.kind == "accelerate" and cmd.start == 4 and cmd.program == 2
    assert cmd.runs == ("accelerate", "launch", "t.py") and cmd.assigns_first
    assert cmd.environ({"A": "0", "B": "b"}) == {"A": "1=2", "B": "b",
                                                 "ACCELERATE_LOG_LEVEL": "info"}  # fmt: skip


def test_env_with_unset_and_assignments() -> None:
    cmd = command.read(["/usr/bin/env", "-u", "CUDA_VISIBLE_DEVICES", "--unset=X", "B=2",
                        "deepspeed", "--num_gpus", "2", "t.py"])  # fmt: skip
    assert cmd.unset == ("CUDA_VISIBLE_DEVICES", "X") and cmd.env == (("B", "2"),)
    assert cmd.kind == "deepspeed" and cmd.options() == {"--num_gpus": "2"}
    assert not cmd.assigns_first  # env is a real program: the words run as they are
    assert cmd.environ({"CUDA_VISIBLE_DEVICES": "0", "X": "x"}) == {"B": "2"}


def test_env_with_other_options_is_the_program_run_as_written() -> None:
    for argv in (["env", "-i", "torchrun", "t.py"], ["env", "-0"], ["env"]):
        cmd = command.read(argv)
        assert (cmd.kind, cmd.program, cmd.runs) == ("", 0, tuple(argv))


@pytest.mark.parametrize(
    ("argv", "kind", "wrapper"),
    [
        (["uv", "run", "--", "torchrun", "t.py"], "torchrun", ("uv", "run", "--")),
        (["uv", "run", "--with", "x", "--", "accelerate", "launch", "t.py"], "accelerate",
         ("uv", "run", "--with", "x", "--")),
        (["uv", "run", "deepspeed", "t.py"], "deepspeed", ("uv", "run")),
        (["python3", "-m", "torch.distributed.run", "t.py"], "torchrun", ()),
        (["python", "-m", "accelerate.commands.launch", "t.py"], "accelerate", ()),
        (["python", "-m", "deepspeed.launcher.runner", "t.py"], "deepspeed", ()),
        (["X=1", "uv", "run", "--", "python", "-m", "deepspeed.launcher.runner", "t.py"],
         "deepspeed", ("uv", "run", "--")),
        (["python", "train.py"], "", ()),
        (["llamafactory-cli", "train", "cfg.yaml"], "torchrun", ()),  # a wrapper CLI (issue 44)
    ],
)  # fmt: skip
def test_launchers_behind_wrappers_and_module_forms(
    argv: list[str], kind: str, wrapper: tuple[str, ...]
) -> None:
    cmd = command.read(argv)
    assert (cmd.kind, cmd.wrapper) == (kind, wrapper)


# --- prefixed and bare: the same arguments, the same checks -------------------------

PREFIXES = (
    ["ACCELERATE_LOG_LEVEL=info"],
    ["env", "ACCELERATE_LOG_LEVEL=info"],
    ["env", "-u", "NCCL_DEBUG", "A=1"],
    ["uv", "run", "--"],
    ["A=1", "uv", "run", "--frozen", "--"],
)
COMMANDS = (
    ["accelerate", "launch", "--num_processes", "8", "t.py", "--lr", "1"],
    ["deepspeed", "--master_port", "1234", "t.py", "--deepspeed", "ds.json"],
    ["torchrun", "--nnodes", "2", "t.py"],
    ["python", "-m", "torch.distributed.run", "t.py"],
)


@pytest.mark.parametrize("prefix", PREFIXES, ids=" ".join)
@pytest.mark.parametrize("bare", COMMANDS, ids=" ".join)
def test_prefixed_and_bare_get_the_same_launcher_arguments(
    prefix: list[str], bare: list[str]
) -> None:
    plain = launchers.plan(command.read(bare), ALLOC)
    prefixed = launchers.plan(command.read([*prefix, *bare]), ALLOC)
    assert plain.added and prefixed.added == plain.added
    assert prefixed.argv == (*prefix, *plain.argv)  # the user's words, with what is added


def _render(*argv: str, profile: str = "brtx", nodes: int = 1) -> str:
    spec = slurm_job.CommandJob(argv=argv, nodes=nodes)
    return slurm_job.render(schema.load(profile), spec, workdir=REPO).script


def _error(*argv: str, profile: str, nodes: int) -> str:
    with pytest.raises(BadInput) as info:
        _render(*argv, profile=profile, nodes=nodes)
    return str(info.value)


@pytest.mark.parametrize("prefix", PREFIXES, ids=" ".join)
def test_prefixed_and_bare_get_the_same_checks(prefix: list[str]) -> None:
    """The three errors of open-instruct's ZeRO-3 config on two V100 nodes (bf16 in the
    file; --num_machines 1 and --num_processes 8 on 2 x 2 GPUs) whatever the prefix."""
    acc = ["accelerate", "launch", "--config_file", ZERO3, "--num_machines", "1",
           "--num_processes", "8", "t.py"]  # fmt: skip
    bare = _error(*acc, profile="supercloud", nodes=2)
    assert "bf16" in bare and "--num_machines 1 but" in bare and "--num_processes 8 but" in bare
    assert _error(*prefix, *acc, profile="supercloud", nodes=2) == bare


def test_the_script_says_what_a_prefixed_launcher_gets() -> None:
    bare = _render("accelerate", "launch", "t.py", nodes=2)
    prefixed = _render("ACCELERATE_LOG_LEVEL=info", "accelerate", "launch", "t.py", nodes=2)
    said = re.findall(r"^echo 'hpcenv: accelerate gets .*$", bare, re.M)
    assert said and said == re.findall(r"^echo 'hpcenv: accelerate gets .*$", prefixed, re.M)
    assert "cmd=(env ACCELERATE_LOG_LEVEL=info accelerate launch t.py)" in prefixed
    assert '-m hpcenv.job.launchers -- "${cmd[@]}")' in prefixed
    assert re.search(r'^gate "preflight .* -- "\$\{cmd\[@\]\}"$', prefixed, re.M)


# --- what runs: the user's words with the variables applied ---------------------------


def _stand_in(tmp_path: Path, name: str) -> Path:
    """A stand-in for a launcher or program (prints its argv and two variables)."""
    fake = tmp_path / "bin" / name
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f'#!/bin/sh\necho "{name} $* LOG=${{ACCELERATE_LOG_LEVEL-unset}} '
                    'NODE_RANK=${NODE_RANK-unset}"\n')  # fmt: skip
    fake.chmod(0o755)
    return fake.parent


def test_the_script_s_command_runs_assignments_as_the_environment(tmp_path: Path) -> None:
    """The ``cmd=(...)`` line and the node launch of the rendered script, run by bash with
    a stand-in ``srun`` (one node: runs its command) and a stand-in program."""
    bindir = _stand_in(tmp_path, "train")
    (bindir / "srun").write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\n'
                                 'exec "$@"\n')  # fmt: skip
    (bindir / "srun").chmod(0o755)
    script = _render("ACCELERATE_LOG_LEVEL=info", "train", "--x", "1")
    cmd_line = next(line for line in script.splitlines() if line.startswith("cmd=("))
    srun_line = next(line for line in script.splitlines() if line.startswith("srun --nodes="))
    bash = "\n".join([cmd_line, "nodes=1", srun_line.rstrip(" &"), ""])
    done = subprocess.run(
        ["bash", "-c", bash], capture_output=True, text=True, timeout=30, check=False,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "SLURM_NODEID": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "train --x 1 LOG=info NODE_RANK=1"


def test_the_node_wrapper_applies_the_prefix_and_execs_the_launcher(tmp_path: Path) -> None:
    bindir = _stand_in(tmp_path, "accelerate")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "SLURM_NODEID": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "HPCENV_LAUNCH_NODES": "2", "HPCENV_LAUNCH_PER_NODE": "1",
           "HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv.job.launchers", "--", "env", "ACCELERATE_LOG_LEVEL=info",
         "accelerate", "launch", "t.py"],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:3] == ["accelerate", "launch", "--num_machines"]
    assert "--machine_rank 1" in done.stdout and "LOG=info" in done.stdout


def test_hpcenv_run_takes_leading_assignments_as_the_environment(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "run", "local", "--env", str(venv), "--",
         "ACCELERATE_LOG_LEVEL=info", "sh", "-c", 'echo "$ACCELERATE_LOG_LEVEL"'],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "info"


# --- torch.distributed's conventions for any command ---------------------------------


def test_a_trainer_cli_gets_the_torch_distributed_conventions() -> None:
    script = _render("FORCE_TORCHRUN=1", "llamafactory-cli", "train", "cfg.yaml", nodes=2)
    assert 'export MASTER_ADDR="${hosts[0]}"' in script
    assert 'export NNODES="$nodes" GPUS_PER_NODE=8 WORLD_SIZE=$((nodes * 8))' in script
    assert """bash -c 'export NODE_RANK="$SLURM_NODEID"; exec "$@"' hpcenv-node""" in script
    assert "cmd=(env FORCE_TORCHRUN=1 llamafactory-cli train cfg.yaml)" in script


# --- --gpus N is per node -------------------------------------------------------------


def test_gpus_on_several_nodes_is_asked_per_node_like_the_hostfile() -> None:
    """brtx asks for GPUs as a job total (--gpus=): --nodes 2 --gpus 4 is 4 on each node
    (the hostfile's slots=4, nproc 4), never --gpus=8 that SLURM may place 6 + 2."""
    spec = slurm_job.CommandJob(
        argv=("deepspeed", "train.py"),
        nodes=2,
        request=slurm_job.sbatch.Request(gpus=4),
    )
    script = slurm_job.render(schema.load("brtx"), spec, workdir=REPO).script
    directives = re.findall(r"^#SBATCH (.*)$", script, re.M)
    assert "--gpus-per-node=4" in directives and "--gpus=8" not in directives
    assert 'echo "$host slots=4"' in script and "HPCENV_LAUNCH_PER_NODE=4" in script
    assert "GPUS_PER_NODE=4 WORLD_SIZE=$((nodes * 4))" in script


# --- process counts for every launcher ------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["torchrun", "--nproc_per_node", "8", "t.py"], "--nproc_per_node 8 but the job has 2"),
        (["torchrun", "--nproc-per-node=8", "t.py"], "--nproc_per_node 8 but the job has 2"),
        (["torchrun", "--nnodes", "1", "t.py"], "--nnodes 1 but the job has 2 node(s)"),
        (["torchrun", "--nnodes=3:4", "t.py"], "--nnodes 3:4 but the job has 2 node(s)"),
        (["deepspeed", "--num_gpus", "8", "t.py"], "--num_gpus 8 but the job has 2"),
        (["deepspeed", "--num_nodes", "3", "t.py"], "--num_nodes 3 but the job has 2 node(s)"),
        (["deepspeed", "--include", "localhost:0,1,2", "t.py"], "--include names 3 GPUs"),
        (["python", "-m", "torch.distributed.run", "--nproc_per_node", "4", "t.py"],
         "--nproc_per_node 4 but the job has 2"),
    ],
)  # fmt: skip
def test_more_processes_or_nodes_than_the_allocation_is_refused(argv: list[str], says: str) -> None:
    """Two V100 nodes of 2 GPUs (supercloud), the launchers' counts written by the user."""
    assert says in _error(*argv, profile="supercloud", nodes=2)
    assert says in _error("NCCL_DEBUG=INFO", *argv, profile="supercloud", nodes=2)


def test_fewer_processes_than_gpus_is_a_warning() -> None:
    spec = slurm_job.CommandJob(argv=("torchrun", "--nproc_per_node", "1", "t.py"), nodes=2)
    job = slurm_job.render(schema.load("supercloud"), spec, workdir=REPO)
    assert "warning: --nproc_per_node 1 while the job has 2 GPU(s) or task(s) per node: 1 idle" in (
        job.notes
    )
    for fits in (["torchrun", "--nnodes", "1:2", "--nproc_per_node", "gpu", "t.py"],
                 ["deepspeed", "--num_gpus", "2", "--num_nodes", "2", "t.py"]):  # fmt: skip
        _render(*fits, profile="supercloud", nodes=2)


# --- which venv ----------------------------------------------------------------------


def _sbatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", *args],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_sbatch_project_uses_the_project_s_venv_and_says_so(tmp_path: Path) -> None:
    """``hpcenv build local --project DIR`` makes ``venvs/local-<project>``; ``hpcenv
    sbatch local --project DIR`` runs CMD there, named in the header and on stderr."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-proj"\nversion = "0"\n')
    home = tmp_path / "home"
    done = _sbatch("local", "--project", str(project), "--", "python", "t.py",
                   env={"HPCENV_HOME": str(home)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    venv = home / "venvs" / "local-my-proj"
    assert f"# venv: {venv} (given by --env or --project)" in done.stdout
    assert f"the job uses the venv {venv}" in done.stderr
    assert f"VIRTUAL_ENV={venv}" in done.stdout
    assert 'echo "hpcenv: the job uses the venv $VIRTUAL_ENV" >&2' in done.stdout
    plain = _sbatch("local", "--", "python", "t.py", env={"HPCENV_HOME": str(home)})
    assert f"# venv: {home / 'venvs' / 'local'} (the profile's build)" in plain.stdout
    both = _sbatch("local", "--project", str(project), "--env", str(tmp_path), "--", "true")
    assert both.returncode == 2 and "give one of them" in both.stderr
    missing = _sbatch("local", "--project", str(tmp_path / "nope"), "--", "true")
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_the_job_is_named_after_the_program_not_its_variables() -> None:
    script = _render("ACCELERATE_LOG_LEVEL=info", "uv", "run", "--", "accelerate", "launch", "t.py")
    assert "#SBATCH --job-name=hpcenv-brtx-accelerate" in script
