"""A JAX job's task layout (``hpcenv.job.jax_job``): what ``jax.distributed.initialize()``
reads of SLURM (knowledge/jax_slurm.toml, read from the jax 0.7.2 wheel), the layouts it
can drive every GPU with (one task per GPU, or one per node with JAX_LOCAL_DEVICE_IDS), the
ones refused before the queue (exit 2, the numbers and the fix), and the script's own
arguments read as data. The decision is pure; the real two-node run on the test SLURM
cluster is tests/integration/slurm/test_jax_slurm.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.job import command, jax_job
from hpcenv.knowledge import jax_slurm
from hpcenv.utils.errors import BadInput

K = jax_slurm.get()
CALLS = jax_job.Call(where="train.py:3")
SCRIPT = jax_job.Evidence(script="train.py", imports=("jax",), call=CALLS, version="0.7.2",
                          venv="/v")  # fmt: skip


def _layout(tasks: int, gpus: int, *binds: str) -> jax_job.Layout:
    return jax_job.Layout(nodes=2, tasks_per_node=tasks, gpus_per_node=gpus, binds=binds)


def test_the_knowledge_names_slurms_variables_and_the_port_rule() -> None:
    names = {v.name: v.fills for v in K.variables}
    assert names == {
        "SLURM_STEP_NODELIST": "coordinator_address", "SLURM_JOB_ID": "coordinator_address",
        "SLURM_NTASKS": "num_processes", "SLURM_PROCID": "process_id",
        "SLURM_LOCALID": "local_device_ids",
    }  # fmt: skip
    assert K.port(4242) == 61440 + 4242 % 4096 and K.port(4096) == 61440
    assert K.device_ids_env_since == (0, 4, 32)
    assert all("sha256" in s for s in K.sources)


def test_one_task_per_gpu_is_said_and_adds_nothing() -> None:
    verdict = jax_job.decide(SCRIPT, _layout(4, 4))
    assert verdict.env == ()
    said = " ".join(verdict.says)
    assert "train.py:3 calls jax.distributed.initialize() (jax 0.7.2 in /v)" in said
    for name in ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
                 "SLURM_LOCALID"):  # fmt: skip
        assert name in said
    assert "one process per GPU: 4 tasks per node" in said


def test_one_task_per_node_gets_every_gpu_through_jax_local_device_ids() -> None:
    verdict = jax_job.decide(SCRIPT, _layout(1, 4))
    assert verdict.env == (("JAX_LOCAL_DEVICE_IDS", "0,1,2,3"),)
    assert "else SLURM_LOCALID=0 would give it GPU 0 alone" in verdict.says[-1]


@pytest.mark.parametrize(
    ("tasks", "gpus", "words"),
    [
        (2, 4, "2 tasks per node on 4 GPUs per node cannot work: GPUs 2 to 3 of each node would "
               "stay idle"),
        (8, 4, "tasks 4 to 7 of each node would ask for GPUs that are not there"),
    ],
)  # fmt: skip
def test_another_count_is_refused_with_the_numbers_and_the_fix(
    tasks: int, gpus: int, words: str
) -> None:
    with pytest.raises(BadInput) as err:
        jax_job.decide(SCRIPT, _layout(tasks, gpus))
    message = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in message
    assert message.startswith("train.py:3 calls jax.distributed.initialize()")
    assert words in message
    assert "give --ntasks-per-node=4 (one process per GPU) or --ntasks-per-node=1" in message


def test_slurm_binding_each_task_to_its_gpu_is_refused() -> None:
    with pytest.raises(BadInput, match=r"--gpus-per-task gives each of the 4 tasks per node"):
        jax_job.decide(SCRIPT, _layout(4, 4, "--gpus-per-task"))
    # one task per node sees the node's GPUs however they are bound
    assert jax_job.decide(SCRIPT, _layout(1, 4, "--gpus-per-task")).env
    assert jax_job.binding_options(["--exclusive", "--gpu-bind=closest"]) == ("--gpu-bind",)


def test_a_jax_that_reads_no_jax_local_device_ids_cannot_run_one_per_node() -> None:
    old = jax_job.Evidence(script="train.py", imports=("jax",), version="0.4.31", venv="/v")
    with pytest.raises(BadInput, match=r"jax 0.4.31 reads no JAX_LOCAL_DEVICE_IDS .*--per-task"):
        jax_job.decide(old, _layout(1, 8))
    newer = jax_job.Evidence(script="train.py", imports=("jax",), version="0.4.32", venv="/v")
    eight = jax_job.decide(newer, _layout(1, 8)).env
    assert eight == (("JAX_LOCAL_DEVICE_IDS", "0,1,2,3,4,5,6,7"),)


def test_jax_in_the_venv_alone_warns_instead_of_refusing() -> None:
    venv_only = jax_job.Evidence(version="0.7.2", venv="/v")
    verdict = jax_job.decide(venv_only, _layout(2, 4))
    assert verdict.says[0].startswith("jax 0.7.2 is in the job's venv /v: if the command calls")
    assert verdict.warnings and "GPUs 2 to 3 of each node would stay idle" in verdict.warnings[0]


def test_cpu_nodes_take_any_layout() -> None:
    verdict = jax_job.decide(SCRIPT, _layout(3, 0))
    assert verdict.env == () and "CPU nodes" in verdict.says[-1]


def test_the_scripts_own_arguments_bypass_slurm_for_them(tmp_path: Path) -> None:
    text = (
        "import jax\n"
        "# jax.distributed.initialize(local_device_ids=[0])  (a comment: not a call)\n"
        "jax.distributed.initialize(\n"
        "    f'{host}:1234', num_processes=int(os.environ['N']),\n"
        "    process_id=rank)\n"
    )
    call = jax_job.find_call(text, "train.py", K)
    assert call == jax_job.Call(
        where="train.py:3", given=("coordinator_address", "num_processes", "process_id")
    )
    evidence = jax_job.Evidence(script="train.py", imports=("jax",), call=call, version="0.7.2",
                                venv="/v")  # fmt: skip
    said = jax_job.decide(evidence, _layout(4, 4)).says[1]
    assert "local_device_ids from SLURM_LOCALID" in said and "SLURM_NTASKS" not in said
    assert (
        "the job gives coordinator_address, num_processes, process_id itself: SLURM detection "
        "is bypassed for them" in said
    )
    every = jax_job.find_call("jax.distributed.initialize(a, 2, r, [0])\n", "t.py", K)
    assert every is not None and every.given == K.arguments
    alone = jax_job.Evidence(script="t.py", call=every, version="0.7.2", venv="/v")
    assert "SLURM detection is bypassed;" in jax_job.decide(alone, _layout(2, 4)).says[1]
    # another library's distributed.initialize is not JAX's
    assert jax_job.find_call("other.distributed.initialize()\n", "t.py", K) is None
    # local_device_ids given: the script binds its devices, no layout is refused
    bare = "from jax.distributed import initialize\ninitialize(local_device_ids=range(4))\n"
    own = jax_job.find_call(bare, "t.py", K)
    assert own is not None and own.given == ("local_device_ids",)
    mine = jax_job.Evidence(script="t.py", call=own, version="0.7.2", venv="/v")
    assert "drives the GPUs it names" in jax_job.decide(mine, _layout(2, 4)).says[-1]
    off = jax_job.find_call('jax.distributed.initialize(cluster_detection_method="deactivate")\n',
                            "t.py", K)  # fmt: skip
    assert off is not None and off.deactivated
    bypassed = jax_job.Evidence(script="t.py", call=off, version="0.7.2", venv="/v")
    assert "bypasses SLURM detection" in jax_job.decide(bypassed, _layout(3, 4)).says[0]


def test_read_takes_the_script_as_data_and_skips_launchers(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import flax.linen as nn\nimport jax\n")
    found = jax_job.read(command.read(["python", "train.py"]), None, tmp_path, {})
    assert found is not None and found.imports == ("flax", "jax") and found.call is None
    (tmp_path / "torch_train.py").write_text("import torch\n")
    assert jax_job.read(command.read(["python", "torch_train.py"]), None, tmp_path, {}) is None
    assert jax_job.read(command.read(["torchrun", "train.py"]), None, tmp_path, {}) is None
    given = jax_job.read(
        command.read(["JAX_LOCAL_DEVICE_IDS=0", "python", "train.py"]), None, tmp_path, {}
    )
    assert given is not None and given.given_env == ("JAX_LOCAL_DEVICE_IDS",)


def test_sbatch_refuses_a_bad_jax_layout_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import jax\njax.distributed.initialize()\n")
    run = [sys.executable, "-m", "hpcenv", "sbatch", "isambard", "--per-task"]
    done = subprocess.run(
        [*run, "--ntasks-per-node", "3", "--", "python", "train.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("hpcenv: error")]
    assert len(error) == 1 and "Traceback" not in done.stderr
    assert "3 tasks per node on 4 GPUs per node cannot work" in error[0]
    ok = subprocess.run(
        [*run, "--", "python", "train.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "# jax: jax.distributed.initialize() reads SLURM itself" in ok.stdout
    assert "echo 'hpcenv: jax: one process per GPU: 4 tasks per node" in ok.stdout


def test_one_process_per_node_is_rendered_with_every_gpu(tmp_path: Path) -> None:
    """The default launch (the command once per node) on isambard's 4-GPU nodes: the
    header says what JAX reads, the log echoes it, and JAX_LOCAL_DEVICE_IDS is exported
    after the gate and before the command's step; bash accepts the script."""
    from hpcenv.job import render
    from hpcenv.profile import schema

    (tmp_path / "train.py").write_text("import jax\njax.distributed.initialize()\n")
    spec = render.CommandJob(argv=("python", "train.py"), nodes=2)
    job = render.render(schema.load("isambard"), spec, workdir=tmp_path)
    script = job.script
    assert "# jax: train.py:2 calls jax.distributed.initialize()" in script
    export = script.index("export JAX_LOCAL_DEVICE_IDS=0,1,2,3\n")
    assert (
        script.index('gate "preflight') < export < script.rindex("--kill-on-bad-exit=1 -- bash -c")
    )
    assert any("JAX_LOCAL_DEVICE_IDS=0,1,2,3 set on each node" in n for n in job.notes)
    bash = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert bash.returncode == 0, bash.stderr
