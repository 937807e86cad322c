"""Launching what researchers launch (issue 23): part of a node (``--gpus``), the daily
sbatch options, accelerate/DeepSpeed/torchrun told their node rank, and their
configuration checked before the queue. Rendering only; the real two-node accelerate job
is in tests/integration/slurm/test_launchers_slurm.py.

Config files: open-instruct's real accelerate and DeepSpeed configs
(tests/data/launch_configs/open-instruct/ORIGIN) and small ones written here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.job import command, launch_config, launchers
from hpcenv.slurm import sbatch
from support import REPO

OPEN_INSTRUCT = REPO / "tests" / "data" / "launch_configs" / "open-instruct"


def _sbatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", *args],
        capture_output=True, text=True, cwd=cwd or REPO, timeout=120, check=False,
    )  # fmt: skip


def _directives(script: str) -> list[str]:
    return re.findall(r"^#SBATCH (.*)$", script, re.M)


# --- part of a node and the daily options ----------------------------------------------


@pytest.mark.parametrize(
    ("profile", "request_line"),
    [("brtx", "--gpus=4"), ("supercloud", "--gres=gpu:volta:2"), ("isambard", "--gpus-per-node=2")],
)
def test_gpus_asks_for_part_of_a_node_in_the_profile_s_syntax(
    profile: str, request_line: str
) -> None:
    gpus = request_line.rsplit(":", 1)[-1].rsplit("=", 1)[-1]
    done = _sbatch(profile, "--gpus", gpus, "--", "python", "train.py")
    assert done.returncode == 0, done.stderr
    lines = _directives(done.stdout)
    assert request_line in lines
    assert f"--ntasks-per-node={gpus}" in lines  # tasks follow the GPUs


def test_more_gpus_than_a_node_has_is_refused_with_the_node_s_count() -> None:
    done = _sbatch("brtx", "--gpus", "9", "--", "python", "train.py")
    assert done.returncode == 2
    assert "--gpus 9: the nodes of brtx have 8 GPUs" in done.stderr
    assert "Traceback" not in done.stderr


def test_gpus_on_a_profile_that_asks_for_none_is_refused() -> None:
    done = _sbatch("local", "--gpus", "1", "--", "true")
    assert done.returncode == 2 and "asks for no GPUs" in done.stderr


def test_every_daily_sbatch_option_reaches_the_script() -> None:
    given = {name: f"v{i}" for i, (name, _) in enumerate(sbatch.PASSTHROUGH)}
    given["mail-user"] = "me@example.org"
    args = [w for name, value in given.items() for w in (f"--{name}", value)]
    done = _sbatch("brtx", *args, "--sbatch-arg=--exclusive", "--sbatch-arg=--gres=nvme:1",
                   "--", "python", "train.py")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = _directives(done.stdout)
    for name, value in given.items():
        assert f"--{name}={value}" in lines
    assert "--partition=brtx6" not in lines  # the command line wins over the profile
    assert "--exclusive" in lines and "--gres=nvme:1" in lines
    # a probe job (TARGET) takes them too
    target = _sbatch("brtx", "nccl", "--account", "proj", "--qos", "high")
    assert {"--account=proj", "--qos=high"} <= set(_directives(target.stdout)), target.stderr


def test_profile_defaults_for_account_and_qos(tmp_path: Path) -> None:
    prof = tmp_path / "site.toml"
    prof.write_text((REPO / "envs" / "brtx.toml").read_text() + "\n")
    text = prof.read_text().replace("[slurm]\n", '[slurm]\naccount = "lab"\nqos = "normal"\n', 1)
    prof.write_text(text)
    lines = _directives(_sbatch(str(prof), "--", "true").stdout)
    assert "--account=lab" in lines and "--qos=normal" in lines
    lines = _directives(_sbatch(str(prof), "--qos", "high", "--", "true").stdout)
    assert "--qos=high" in lines and "--qos=normal" not in lines


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--partition", "a b"], "cannot go on an #SBATCH line"),
        (["--account", "x\n#SBATCH --wrap=evil"], "line break or control character"),
        (["--sbatch-arg=--time=1"], "give --time VALUE directly"),
        (["--sbatch-arg=--exclude=n1"], "give --exclude VALUE directly"),
        (["--sbatch-arg=--gpus=8"], "the GPU request is hpcenv's"),
        (["--sbatch-arg=--output=x"], "hpcenv writes --output itself"),
        (["--sbatch-arg=exclusive"], "give one sbatch option as --name=value"),
    ],
)
def test_a_bad_option_value_is_one_line(args: list[str], says: str) -> None:
    done = _sbatch("brtx", *args, "--", "true")
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


# --- launchers told their node rank ----------------------------------------------------

ALLOC = launchers.Allocation(
    nodes=2, node_rank="1", per_node=4, master_addr="n1", master_port="29500", hostfile="/h"
)


def test_accelerate_gets_what_each_node_needs() -> None:
    got = launchers.plan(command.read(["accelerate", "launch", "train.py", "--lr", "1"]), ALLOC)
    assert got.argv == (
        "accelerate", "launch", "--num_machines", "2", "--machine_rank", "1",
        "--main_process_ip", "n1", "--main_process_port", "29500", "--num_processes", "8",
        "--multi_gpu", "train.py", "--lr", "1",
    )  # fmt: skip
    assert got.describe().startswith("accelerate gets --num_machines 2 --machine_rank 1")


def test_options_the_user_wrote_win_in_either_spelling() -> None:
    argv = [
        "accelerate", "launch", "--num-machines", "2", "--num_processes=8",
        "--main_process_port", "1234", "--use_deepspeed", "t.py", "--num_machines", "9",
    ]  # fmt: skip
    got = launchers.plan(command.read(argv), ALLOC)
    assert got.added == ("--machine_rank", "1", "--main_process_ip", "n1")
    assert got.argv[-3:] == ("t.py", "--num_machines", "9")  # the script's own words untouched


def test_a_config_file_s_settings_count_as_given() -> None:
    cmd = command.read(["accelerate", "launch", "--config_file", "deepspeed_zero3.yaml", "t.py"])
    cfg = launch_config.read(cmd, OPEN_INSTRUCT, {})
    got = launchers.plan(cmd, ALLOC, launch_config.configured(cfg))
    # num_processes/num_machines come from the file; the rank is always the node's own
    assert got.added == (
        "--machine_rank", "1", "--main_process_ip", "n1", "--main_process_port", "29500"
    )  # fmt: skip


def test_deepspeed_needs_no_ssh_and_torchrun_its_processes() -> None:
    ds = launchers.plan(command.read(["deepspeed", "train.py", "--deepspeed", "ds.json"]), ALLOC)
    assert ds.added == ("--hostfile", "/h", "--no_ssh", "--node_rank", "1",
                        "--master_addr", "n1", "--master_port", "29500")  # fmt: skip
    assert ds.argv[-3:] == ("train.py", "--deepspeed", "ds.json")
    tr = launchers.plan(
        command.read([sys.executable, "-m", "torch.distributed.run", "t.py"]), ALLOC
    )
    assert tr.added == ("--nproc_per_node", "4")
    assert (
        launchers.plan(command.read(["torchrun", "--nproc-per-node=2", "t.py"]), ALLOC).added == ()
    )
    assert launchers.plan(command.read(["python", "train.py"]), ALLOC).kind == ""


def test_the_script_wraps_a_launcher_once_per_node_and_says_what_it_adds() -> None:
    done = _sbatch("brtx", "--nodes", "2", "--gpus", "4", "--", "deepspeed", "train.py")
    assert done.returncode == 0, done.stderr
    script = done.stdout
    assert 'export HPCENV_LAUNCH_NODES="$nodes" HPCENV_LAUNCH_PER_NODE=4' in script
    assert 'echo "$host slots=4"' in script
    assert "cmd=(deepspeed train.py)" in script  # CMD word for word, then wrapped
    assert '-m hpcenv.job.launchers -- "${cmd[@]}")' in script
    assert "hpcenv: deepspeed gets --hostfile <hostfile> --no_ssh" in script
    bash = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert bash.returncode == 0, bash.stderr


def test_a_launcher_per_task_is_refused() -> None:
    done = _sbatch("brtx", "--per-task", "--", "accelerate", "launch", "t.py")
    assert done.returncode == 2 and "leave out --per-task" in done.stderr


def test_the_wrapper_execs_the_launcher_with_the_node_s_rank(tmp_path: Path) -> None:
    """``python -m hpcenv.job.launchers`` on a node: a stand-in ``accelerate`` (a script
    printing its argv, standing in for the real launcher) gets this node's rank."""
    fake = tmp_path / "bin" / "accelerate"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "SLURM_NODEID": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "HPCENV_LAUNCH_NODES": "2", "HPCENV_LAUNCH_PER_NODE": "1",
           "HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv.job.launchers", "--", "accelerate", "launch", "t.py"],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "launch", "--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "n1",
        "--main_process_port", "29500", "--num_processes", "2", "--multi_gpu", "t.py",
    ]  # fmt: skip
    assert "hpcenv: node 1: accelerate gets" in done.stderr


# --- the launcher's configuration, before the queue ------------------------------------


def test_bf16_on_v100s_is_caught_naming_the_fix() -> None:
    done = _sbatch("supercloud", "--", "accelerate", "launch", "--config_file",
                   str(OPEN_INSTRUCT / "deepspeed_zero3.yaml"), "train.py")  # fmt: skip
    assert done.returncode == 2
    assert "mixed_precision: bf16" in done.stderr and "use fp16" in done.stderr
    assert "compute capability 7.0" in done.stderr


def test_a_one_machine_config_on_two_nodes_gets_the_allocation_s_counts() -> None:
    """open-instruct's configs say num_machines: 1, num_processes: 8; its SLURM recipe
    overrides them on accelerate's command line, and so does hpcenv (said in the log);
    only a conflicting value the user wrote on the command line is refused."""
    zero3 = str(OPEN_INSTRUCT / "deepspeed_zero3.yaml")
    done = _sbatch("isambard", "--nodes", "2", "--", "accelerate", "launch", "--config_file",
                   zero3, "train.py")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "num_machines: 1 (written for one machine): hpcenv gives --num_machines 2 " \
        "--num_processes 8 on accelerate's command line" in done.stderr
    said = re.search(r"^echo 'hpcenv: accelerate gets (.*)'$", done.stdout, re.M)
    assert said and "--num_machines 2" in said[1] and "--num_processes 8" in said[1]
    cfg = launch_config.read(
        command.read(["accelerate", "launch", "--config_file", zero3, "t.py"]), REPO, {}
    )
    assert {"--num_machines", "--num_processes"} <= set(launchers.plan(
        command.read(["accelerate", "launch", "--config_file", zero3, "t.py"]), ALLOC,
        launch_config.configured(cfg, nodes=2)).added)  # fmt: skip
    assert "--num_machines" not in launch_config.configured(cfg, nodes=2)
    assert "--num_machines" in launch_config.configured(cfg, nodes=1)
    conflict = _sbatch("isambard", "--nodes", "2", "--", "accelerate", "launch", "--config_file",
                       zero3, "--num_machines", "1", "train.py")  # fmt: skip
    assert conflict.returncode == 2
    assert "--num_machines 1 but the job has 2 node(s)" in conflict.stderr


def test_num_processes_against_the_gpus(tmp_path: Path) -> None:
    acc_yaml = tmp_path / "acc.yaml"
    acc_yaml.write_text("mixed_precision: fp16\nnum_machines: 1\nnum_processes: 8\n")
    brtx = str(REPO / "envs" / "brtx.toml")
    acc = ["accelerate", "launch", "--config_file", "acc.yaml", "t.py"]
    whole = _sbatch(brtx, "--", *acc, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr  # 8 GPUs on one BRTX node: right
    part = _sbatch(brtx, "--gpus", "4", "--", *acc, cwd=tmp_path)
    assert part.returncode == 2 and "num_processes: 8 but the job has 4 GPU(s)" in part.stderr
    acc_yaml.write_text("num_processes: 1\n")
    idle = _sbatch(brtx, "--", *acc, cwd=tmp_path)
    assert idle.returncode == 0 and "warning:" in idle.stderr and "7 would sit idle" in idle.stderr


def _ds(tmp_path: Path, **settings: object) -> Path:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(settings))
    return path


def test_a_deepspeed_batch_that_does_not_add_up_is_caught(tmp_path: Path) -> None:
    _ds(tmp_path, train_batch_size=500, train_micro_batch_size_per_gpu=8,
        gradient_accumulation_steps=16)  # fmt: skip
    done = _sbatch(str(REPO / "envs" / "brtx.toml"), "--gpus", "4", "--", "deepspeed",
                   "train.py", "--deepspeed", "ds.json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert "train_batch_size 500 is not" in done.stderr and "(8 x 16 x 4 GPUs = 512)" in done.stderr


def test_the_effective_batch_is_printed(tmp_path: Path) -> None:
    _ds(tmp_path, train_batch_size=512, train_micro_batch_size_per_gpu=8,
        gradient_accumulation_steps=16)  # fmt: skip
    done = _sbatch(str(REPO / "envs" / "brtx.toml"), "--gpus", "4", "--", "deepspeed",
                   "train.py", "--deepspeed", "ds.json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "effective batch: 8 x 16 x 4 GPUs = 512" in done.stderr


def test_auto_values_are_the_trainer_s_and_offload_is_a_warning() -> None:
    """open-instruct's ZeRO-3 config: every batch size "auto" (not judged), parameters and
    optimizer offloaded to CPU (a warning naming the node's memory per rank)."""
    cfg = launch_config.read(
        command.read(["deepspeed", "t.py", "--deepspeed", "stage3_offloading.conf"]),
        OPEN_INSTRUCT, {},
    )  # fmt: skip
    job = launch_config.Job(nodes=1, per_node=4, compute_capability="9.0", memory_gib=480)
    found = launch_config.judge(cfg, job)
    assert found.errors == () and found.notes == ()
    (warning,) = found.warnings
    assert "offload_optimizer and offload_param" in warning and "120 GiB each" in warning


def test_an_unreadable_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "acc.yaml").write_text("num_processes: [unclosed\n")
    done = _sbatch(str(REPO / "envs" / "brtx.toml"), "--", "accelerate", "launch",
                   "--config_file", "acc.yaml", "t.py", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "not a readable accelerate config" in done.stderr
    assert done.stderr.count("\n") == 1
    missing = _sbatch(str(REPO / "envs" / "brtx.toml"), "--", "deepspeed", "t.py",
                      "--deepspeed", "nope.json", cwd=tmp_path)  # fmt: skip
    assert missing.returncode == 2 and "nope.json" in missing.stderr


def _preflight(tmp_path: Path, config: str) -> dict[str, str]:
    (tmp_path / "acc.yaml").write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "preflight", "supercloud", "--json", "--facts",
         str(REPO / "tests" / "data" / "facts" / "v100-supercloud.json"),
         "--", "accelerate", "launch", "--config_file", "acc.yaml", "t.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return checks["launcher-config"]


def test_preflight_repeats_the_config_check_on_the_node(tmp_path: Path) -> None:
    """In the job the gate runs ``hpcenv preflight PROFILE -- CMD`` on every node: the
    node's real GPUs (here the recorded V100 facts) judge the config again."""
    bad = _preflight(tmp_path, "mixed_precision: bf16\n")
    assert bad["status"] == "fail" and "bf16" in bad["reason"] and "use fp16" in bad["reason"]
    ok = _preflight(tmp_path, "mixed_precision: fp16\n")
    assert ok["status"] == "pass", ok


def test_the_gate_passes_the_command_to_preflight() -> None:
    script = _sbatch("brtx", "--nodes", "2", "--", "accelerate", "launch", "t.py").stdout
    assert re.search(r'^gate "preflight .* preflight brtx -- "\$\{cmd\[@\]\}"$', script, re.M)
    assert script.index("cmd=(accelerate launch t.py)") < script.index('gate "preflight')
