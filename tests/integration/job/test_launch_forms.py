"""The job as repos launch it (issue 44): torchrun's ``--standalone`` on several nodes, and
a count that is not a number.

``--standalone`` is judged by torch's own ``torch.distributed.run.run`` (the CPU torch
2.13.0 of the probe venv, ``torch_python``): its launch (``elastic_launch``) is replaced by
a recorder, so what the test reads is the rendezvous torch itself decided from the
words and the job's ``PET_*`` variables, and nothing is started.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.job import command, launchers
from hpcenv.utils.errors import BadInput
from support import REPO

NANOGPT = ["torchrun", "--standalone", "--nproc_per_node=4", "train.py"]  # nanoGPT's README
ALLOC = launchers.Allocation(
    nodes=2, node_rank="1", per_node=4, master_addr="n1", master_port="29500"
)
#: What the job script exports on every node (job/render.py): torchrun's rendezvous.
PET = {"PET_NNODES": "2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ID": "42",
       "PET_RDZV_ENDPOINT": "n1:29500"}  # fmt: skip

#: torch's run() up to the launch, for each command (a JSON list of argv): the config
#: elastic_launch would get.
_RECORD = """
import json, sys
from torch.distributed import run
seen = []
class Recorder:
    def __init__(self, config, entrypoint):
        seen.append(dict(endpoint=config.rdzv_endpoint, run_id=config.run_id,
                         nodes=[config.min_nodes, config.max_nodes],
                         per_node=config.nproc_per_node))
    def __call__(self, *args):
        return {}
run.elastic_launch = Recorder
for words in json.loads(sys.argv[1]):
    run.run(run.parse_args(words[1:]))
print(json.dumps(seen))
"""


def _torch_decides(python: Path, *commands: tuple[str, ...]) -> list[dict[str, object]]:
    done = subprocess.run(
        [str(python), "-c", _RECORD, json.dumps(commands)],
        env={"PATH": "/usr/bin:/bin", **PET}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_standalone_on_two_nodes_gives_way_to_the_job_s_rendezvous(torch_python: Path) -> None:
    got = launchers.plan(command.read(NANOGPT), ALLOC)
    assert "--standalone" not in got.argv
    assert got.argv[-1] == "train.py" and "--nproc_per_node=4" in got.argv
    assert "without --standalone (on 2 nodes" in got.describe()
    as_written, decided = _torch_decides(torch_python, tuple(NANOGPT), got.argv)
    assert as_written["endpoint"] == "localhost:0"  # each node alone: the bug
    assert decided == {"endpoint": "n1:29500", "run_id": "42", "nodes": [2, 2], "per_node": 4}


@pytest.mark.parametrize(
    "words",
    [
        ["axolotl", "train", "c.yml", "--launcher", "torchrun", "--", "--standalone"],
        ["tune", "run", "--standalone", "--nproc_per_node", "4", "recipe", "--config", "c.yaml"],
    ],
)
def test_a_wrapper_s_standalone_on_two_nodes_is_left_out_too(words: list[str]) -> None:
    """axolotl's --launcher torchrun passes the words after -- to torchrun as they are
    (axolotl 0.19.0, axolotl/cli/utils/train.py _launch_torchrun_training); tune run takes
    torchrun's own options (torchtune 0.6.1, torchtune/_cli/run.py)."""
    got = launchers.plan(command.read(words), ALLOC)
    assert "--standalone" not in got.argv, got.argv
    assert got.describe().startswith(command.read(words).wrapped + " (torchrun)")
    assert "without --standalone (on 2 nodes" in got.describe()


def test_standalone_on_one_node_stays() -> None:
    one = launchers.Allocation(nodes=1, node_rank="0", per_node=4, master_addr="n1",
                               master_port="29500")  # fmt: skip
    got = launchers.plan(command.read(NANOGPT), one)
    assert got.argv == tuple(NANOGPT) and got.dropped == ()


def test_the_job_says_it_left_standalone_out() -> None:
    done = _sbatch("brtx", "--nodes", "2", "--", *NANOGPT)
    assert done.returncode == 0, done.stderr
    assert "the launcher runs without --standalone (on 2 nodes" in done.stderr
    assert "without --standalone" in done.stdout  # and the node's log says it again
    header = done.stdout.split("#SBATCH", 1)[0]  # the script's head says it before any line
    assert "# launcher: torchrun without --standalone (on 2 nodes" in header, header


def _sbatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", *args],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["deepspeed", "--num_gpus", "abc", "train.py"], "deepspeed --num_gpus: 'abc' is not"),
        (["deepspeed", "--num_nodes", "2x", "train.py"], "deepspeed --num_nodes: '2x' is not"),
        (["torchrun", "--nnodes", "2x", "t.py"], "torchrun --nnodes '2x' is not a node count"),
        # DeepSpeed's runner: add_argument("--num_gpus", "--num_accelerators", type=int)
        # (deepspeed/launcher/runner.py, 0.12.6 to 0.19.8): one option, two spellings
        (["deepspeed", "--num_accelerators", "abc", "t.py"], "--num_gpus: 'abc' is not"),
        (["deepspeed", "--num_accelerators=16", "t.py"], "--num_gpus 16 but the job has 8"),
        (["torchrun", "--nproc-per-node", "four", "t.py"], "'four' is not a count"),
    ],
)
def test_a_count_that_is_not_a_number_is_one_line(words: list[str], says: str) -> None:
    done = _sbatch("brtx", "--nodes", "2", "--", *words)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_old_deepspeed_s_bad_count_on_the_node_is_one_line(tmp_path: Path) -> None:
    """DeepSpeed 0.14 (a venv holding only its dist-info) on 2 nodes: the node's wrapper
    builds the per-node launcher from --num_gpus; 'abc' was a ValueError traceback."""
    meta = tmp_path / "venv/lib/python3.11/site-packages/deepspeed-0.14.4.dist-info/METADATA"
    meta.parent.mkdir(parents=True)
    meta.write_text("Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.14.4\n")
    env = {"PATH": "/usr/bin:/bin", "SLURM_NODEID": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "HPCENV_LAUNCH_NODES": "2", "HPCENV_LAUNCH_PER_NODE": "4",
           "VIRTUAL_ENV": str(tmp_path / "venv"), "HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv.job.launchers", "--", "deepspeed", "--num_gpus", "abc",
         "train.py"],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "hpcenv: deepspeed --num_gpus 'abc': not a count; give a whole number above 0"
    )
    with pytest.raises(BadInput, match="--num_nodes '2x'"):
        launchers.plan(
            command.read(["deepspeed", "--num_nodes", "2x", "t.py"]), ALLOC, deepspeed="0.14.4"
        )


# --- the checks on the node, for every command --------------------------------------------


def test_a_plain_command_is_checked_again_on_the_node(tmp_path: Path) -> None:
    """``python train.py --bf16 T`` (no launcher): the gate gives preflight the command
    too, and preflight on a V100 node (recorded facts) fails it."""
    script = _sbatch("brtx", "--nodes", "2", "--", "python", "train.py", "--lr", "1").stdout
    assert re.search(r'^gate "preflight .* preflight brtx -- "\$\{cmd\[@\]\}"$', script, re.M)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "preflight", "supercloud", "--json", "--facts",
         str(REPO / "tests" / "data" / "facts" / "v100-supercloud.json"),
         "--", "python", "train.py", "--bf16", "T"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["launcher-config"]["status"] == "fail"
    assert "--bf16 T (use fp16)" in checks["launcher-config"]["reason"]


def _deepspeed_venv(root: Path, version: str) -> Path:
    meta = root / f"lib/python3.11/site-packages/deepspeed-{version}.dist-info/METADATA"
    meta.parent.mkdir(parents=True)
    meta.write_text(f"Metadata-Version: 2.1\nName: deepspeed\nVersion: {version}\n")
    return root


def test_uv_run_s_deepspeed_is_read_from_the_project_venv(tmp_path: Path) -> None:
    """``uv run -- deepspeed`` runs the project's .venv (DeepSpeed 0.14.4 there), not the
    job's $VIRTUAL_ENV (0.19.8): on 2 nodes the node gets 0.14's per-node launcher. A
    stand-in ``uv`` prints the words it would run."""
    project = tmp_path / "proj"
    _deepspeed_venv(project / ".venv", "0.14.4")
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n')
    (project / "src").mkdir()
    job_venv = _deepspeed_venv(tmp_path / "job-venv", "0.19.8")
    uv = tmp_path / "bin" / "uv"
    uv.parent.mkdir()
    uv.write_text('#!/bin/sh\necho "$@"\n')
    uv.chmod(0o755)
    env = {"PATH": f"{uv.parent}:/usr/bin:/bin", "SLURM_NODEID": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "HPCENV_LAUNCH_NODES": "2", "HPCENV_LAUNCH_PER_NODE": "4",
           "VIRTUAL_ENV": str(job_venv), "HOME": str(tmp_path)}  # fmt: skip
    words = ["uv", "run", "--", "deepspeed", "train.py"]
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv.job.launchers", "--", *words],
        env=env, capture_output=True, text=True, cwd=project / "src", timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:6] == ["run", "--", "python", "-u", "-m",
                                       "deepspeed.launcher.launch"]  # fmt: skip
    cmd = command.read(words)
    assert launchers.command_venv(cmd, env, project / "src") == project / ".venv"
    moved = {**env, "UV_PROJECT_ENVIRONMENT": "envs/train"}
    assert launchers.command_venv(cmd, moved, project) == project / "envs/train"
    plain = command.read(["deepspeed", "train.py"])
    assert launchers.command_venv(plain, env, project) == job_venv


# --- sbatch --json: the rendered job ------------------------------------------------------


def test_json_prints_the_rendered_job_with_or_without_submitting(tmp_path: Path) -> None:
    """Without --wait, --json was ignored. A stand-in ``sbatch`` (this machine has no
    SLURM controller; it stands for ``sbatch --parsable`` answering a job id)."""
    shown = _sbatch("brtx", "--nodes", "2", "--json", "--", "python", "train.py")
    assert shown.returncode == 0, shown.stderr
    job = json.loads(shown.stdout)
    assert job["job_id"] is None and job["script"].startswith("#!/bin/bash\n")
    assert "(the profile's build)" in job["venv"]
    assert any(c.startswith("hpcenv preflight on every node, with the command") for c in
               job["checks"])  # fmt: skip
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '4242;cluster'\n")
    fake.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", "brtx", "--submit", "--json", "--", "python",
         "train.py"],
        env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"},
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    assert submitted["job_id"] == "4242" and submitted["script"].startswith("#!/bin/bash\n")
    assert "submitted job 4242" in done.stderr


def test_a_launcher_behind_uv_s_options_without_dashdash_is_one_line() -> None:
    """``uv run --frozen accelerate launch train.py``: which word starts the command is uv's
    parser's to say, so hpcenv did not see the launcher and each of 2 nodes ran accelerate
    as machine 0 of 1, silently; now the fix is asked for (uv takes ``--`` too)."""
    words = ["uv", "run", "--frozen", "accelerate", "launch", "train.py"]
    done = _sbatch("brtx", "--nodes", "2", "--", *words)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("hpcenv: error: uv run --frozen accelerate: ") and line.endswith(
        "end uv's options with '--' before the command: uv run [OPTIONS] -- CMD"
    ), line
    with_dashdash = _sbatch("brtx", "--nodes", "2", "--", *words[:3], "--", *words[3:])
    assert with_dashdash.returncode == 0, with_dashdash.stderr
    assert "accelerate gets --num_machines 2" in with_dashdash.stdout
    assert _sbatch("brtx", "--nodes", "1", "--", *words).returncode == 0


def test_a_newline_in_the_command_never_leaves_the_script_s_comments() -> None:
    """The image named in the command is said in the script's head (``# launch: ...``): a
    newline in it made the rest a shell line before the #SBATCH directives (run by the
    job, and sbatch stops reading directives at the first line that is not a comment)."""
    image = "img.sif\ntouch /tmp/hpcenv-pwned #"
    done = _sbatch("brtx", "--", "apptainer", "exec", "--nv", image, "python", "t.py")
    assert done.returncode == 0, done.stderr
    head = done.stdout.split("\nset -euo pipefail", 1)[0].splitlines()
    assert all(line.startswith("#") or not line.strip() for line in head), head
    assert not any(line.startswith("touch ") for line in done.stdout.splitlines())


def test_a_local_rendezvous_endpoint_on_two_nodes_is_one_line(torch_python: Path) -> None:
    """``--rdzv-endpoint localhost:29400`` (single-node READMEs) wins over the job's
    PET_RDZV_ENDPOINT in torch's own run(), so on 2 nodes each would wait alone, as with
    --standalone; said before the queue, with the fix. One node keeps it."""
    words = ["torchrun", "--rdzv-endpoint=localhost:29400", "--nproc_per_node=8", "train.py"]
    (decided,) = _torch_decides(torch_python, tuple(words))
    assert decided["endpoint"] == "localhost:29400"
    done = _sbatch("brtx", "--nodes", "2", "--", *words)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--rdzv_endpoint localhost:29400 on 2 nodes" in line, line
    assert _sbatch("brtx", "--nodes", "1", "--", *words).returncode == 0


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        (["env", "1BAD=2"], "env 1BAD=2 torchrun: "),  # a name against the shell's rule
        (["env", "-i", "PATH=/usr/bin"], "env -i PATH=/usr/bin torchrun: "),
    ],
)
def test_a_launcher_behind_env_words_hpcenv_does_not_read_is_one_line(
    prefix: list[str], says: str
) -> None:
    """``env`` with an option other than -u, or a NAME that is no shell name (env(1) takes
    both), is run as written: the torchrun behind it was not seen, so on 2 nodes each ran
    as a world of its own, silently."""
    done = _sbatch("brtx", "--nodes", "2", "--", *prefix, "torchrun", "train.py")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"hpcenv: error: {says}"), line
    assert "so a torchrun behind other words on 2 nodes would not be given" in line, line
    assert _sbatch("brtx", "--nodes", "1", "--", *prefix, "torchrun", "t.py").returncode == 0
