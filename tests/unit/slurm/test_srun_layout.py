"""Allocation detection, rank layout and srun command lines (no daemons needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.kit.ports import free_port
from hpcenv.runner import probes as runner
from hpcenv.slurm import allocation, srun
from hpcenv.utils.errors import BadInput

GPU_JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "nid[001-002]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NTASKS": "8",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_GPUS_ON_NODE": "4",
}
CPU_JOB = {
    "SLURM_JOB_ID": "7",
    "SLURM_JOB_NODELIST": "vm",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NTASKS": "2",
    "SLURM_TASKS_PER_NODE": "2",
}


def test_outside_an_allocation_there_is_no_srun_launcher() -> None:
    assert allocation.current({"PATH": "/usr/bin"}) is None
    assert srun.launcher_for({"PATH": "/usr/bin"}) is None


def test_one_rank_per_gpu_on_every_node() -> None:
    alloc = allocation.from_env(GPU_JOB)
    assert alloc is not None
    lay = allocation.layout(alloc)
    assert (lay.ranks, lay.per_node, lay.gpus) == (8, 4, True)
    assert [lay.host_of(k) for k in (0, 3, 4, 7)] == ["nid001", "nid001", "nid002", "nid002"]


def test_one_rank_per_task_on_cpu() -> None:
    alloc = allocation.from_env(CPU_JOB)
    assert alloc is not None
    lay = allocation.layout(alloc)
    assert (lay.ranks, lay.per_node, lay.gpus) == (2, 2, False)


def test_salloc_without_a_task_count_still_gets_one_rank_per_gpu() -> None:
    """salloc -N2 --gpus-per-node=4: SLURM sets SLURM_TASKS_PER_NODE=1(x2) anyway."""
    implicit = {
        k: v for k, v in GPU_JOB.items() if k not in ("SLURM_NTASKS", "SLURM_NTASKS_PER_NODE")
    }
    implicit["SLURM_TASKS_PER_NODE"] = "1(x2)"
    alloc = allocation.from_env(implicit)
    assert alloc is not None
    assert allocation.layout(alloc).per_node == 4


def test_fewer_tasks_than_gpus_per_node_give_one_rank_per_task() -> None:
    """sbatch --ntasks-per-node 1 on a 4-GPU profile: one rank per node, or srun refuses."""
    one_task = {**GPU_JOB, "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1"}
    one_task["SLURM_TASKS_PER_NODE"] = "1(x2)"
    alloc = allocation.from_env(one_task)
    assert alloc is not None
    lay = allocation.layout(alloc)
    assert (lay.ranks, lay.per_node, lay.gpus) == (2, 1, True)
    argv = srun.srun_argv(lay, ["x"])
    assert "--ntasks=2" in argv and "--ntasks-per-node=1" in argv and "--nodes=2" in argv
    # no --ntasks-per-node, only a total (SLURM_TASKS_PER_NODE "3,2"): within it
    uneven = {k: v for k, v in GPU_JOB.items() if k != "SLURM_NTASKS_PER_NODE"}
    uneven.update(SLURM_NTASKS="5", SLURM_TASKS_PER_NODE="3,2")
    alloc = allocation.from_env(uneven)
    assert alloc is not None
    lay = allocation.layout(alloc)
    assert lay.per_node == 2 and lay.ranks <= 5
    # more tasks than GPUs: still one rank per GPU
    alloc = allocation.from_env({**GPU_JOB, "SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8"})
    assert alloc is not None
    assert allocation.layout(alloc).per_node == 4


def test_srun_argv_is_an_argument_list_that_ends_the_step_on_a_bad_rank() -> None:
    alloc = allocation.from_env(GPU_JOB)
    assert alloc is not None
    argv = srun.srun_argv(
        allocation.layout(alloc), ["/venv/bin/python", "probes/nccl_probe.py"], wait_s=30
    )
    assert argv[:2] == ["srun", "--ntasks=8"]
    assert "--nodes=2" in argv and "--ntasks-per-node=4" in argv
    assert "--kill-on-bad-exit=1" in argv and "--wait=30" in argv and "--export=ALL" in argv
    assert argv[-3:] == ["--", "/venv/bin/python", "probes/nccl_probe.py"]
    fewer = srun.srun_argv(allocation.layout(alloc), ["x"], ranks=2)
    assert "--nodes=1" in fewer and "--ntasks-per-node=2" in fewer
    with pytest.raises(BadInput, match="room for 8"):
        srun.srun_argv(allocation.layout(alloc), ["x"], ranks=9)


def test_launcher_env_drops_rank_vars_and_sets_master() -> None:
    alloc = allocation.from_env(GPU_JOB)
    assert alloc is not None
    launcher = srun.SrunLauncher(alloc, hosts=["nid001", "nid002"], env=GPU_JOB)
    env = launcher.env_for({"RANK": "0", "WORLD_SIZE": "1", "NCCL_DEBUG": "INFO"})
    assert "RANK" not in env and "WORLD_SIZE" not in env
    assert env["MASTER_ADDR"] == "nid001" and int(env["MASTER_PORT"]) > 0
    assert env["NCCL_DEBUG"] == "INFO"
    assert launcher.hosts_for(8) == ["nid001"] * 4 + ["nid002"] * 4


def test_failed_tasks_names_the_rank_and_host() -> None:
    stderr = (
        "srun: error: nid002: task 5: Exited with exit code 1\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=12.0\n"
        "srun: error: nid001: tasks 0-3: Killed\n"
        "srun: error: nid002: tasks 4,6-7: Killed\n"
    )
    failed = srun.failed_tasks(stderr)
    assert failed[5] == "nid002: Exited with exit code 1"
    assert failed[0] == "nid001: Killed" and failed[7] == "nid002: Killed"
    assert sorted(failed) == list(range(8))


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("", port))


def test_rank_exit_codes_blame_the_rank_that_failed(tmp_path: Path) -> None:
    alloc = allocation.from_env(CPU_JOB)
    assert alloc is not None
    launcher = srun.SrunLauncher(alloc, hosts=["vm"], env=CPU_JOB)
    env = {"HPCENV_RESULT_DIR": str(tmp_path), "HPCENV_PROBE_NAME": "nccl"}
    assert launcher.rank_exit_codes(env, 2, [0]) == [0, 0]
    assert launcher.rank_exit_codes(env, 2, [None]) == [None, None]
    assert launcher.rank_exit_codes(env, 2, [1]) == [1, 1]  # srun said nothing per task
    (tmp_path / "nccl.srun.stderr").write_text(
        "srun: error: vm: task 1: Exited with exit code 3\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=2.0\n"
        "srun: error: vm: task 0: Terminated\n"
    )
    assert launcher.rank_exit_codes(env, 2, [143]) == [None, 3]
    assert launcher.output_args(env) == [
        f"--output={tmp_path}/nccl.rank%t.stdout",
        f"--error={tmp_path}/nccl.rank%t.stderr",
    ]


def test_a_node_where_launching_failed_names_its_ranks(tmp_path: Path) -> None:
    alloc = allocation.from_env(GPU_JOB)
    assert alloc is not None
    launcher = srun.SrunLauncher(alloc, hosts=["nid001", "nid002"], env=GPU_JOB)
    env = {"HPCENV_RESULT_DIR": str(tmp_path), "HPCENV_PROBE_NAME": "nccl"}
    (tmp_path / "nccl.srun.stderr").write_text(
        "srun: error: Task launch for StepId=77.0 failed on node nid002: Invalid node name\n"
        "srun: error: Application launch failed: Invalid node name\n"
    )
    failed = launcher.failed(env)
    assert sorted(failed) == [4, 5, 6, 7]
    assert failed[4] == "nid002: task launch failed: Invalid node name"


def test_a_rank_killed_first_is_the_cause_and_named_by_its_signal(tmp_path: Path) -> None:
    """What srun printed when the rank on node3 was SIGKILLed mid-allreduce (the OOM
    killer's signal; tests/integration/slurm/test_multinode.py does it for real): rank 1 is
    the cause, rank 0 was terminated because of it."""
    alloc = allocation.from_env(CPU_JOB)
    assert alloc is not None
    launcher = srun.SrunLauncher(alloc, hosts=["node1", "node3"], env=CPU_JOB)
    env = {"HPCENV_RESULT_DIR": str(tmp_path), "HPCENV_PROBE_NAME": "nccl"}
    (tmp_path / "nccl.srun.stderr").write_text(
        "srun: error: node3: task 1: Killed\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=2.0\n"
        "srun: error: node1: task 0: Terminated\n"
        "srun: Force Terminated StepId=2.0\n"
    )
    assert launcher.rank_exit_codes(env, 2, [137]) == [None, -9]
    (tmp_path / "nccl.srun.stderr").write_text(
        "srun: error: node1: task 0: Segmentation fault\nsrun: error: node3: task 1: Killed\n"
    )
    assert launcher.rank_exit_codes(env, 2, [139]) == [-11, None]
    assert runner.exit_text(-9) == "killed by SIGKILL" and runner.exit_text(3) == "exit 3"
