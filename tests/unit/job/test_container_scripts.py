"""The job script of a container or an own-srun command, run end to end by bash.

``hpcenv sbatch local --nodes 2 --no-gate -- CMD`` is rendered (job/render.py) and run by a
real bash with stand-ins on PATH for what a 2-node SLURM allocation and each runtime would
do (this machine has no pyxis, Apptainer nor enroot, and podman's real run on two nodes is
tests/integration/slurm/test_containers_slurm.py). Each stand-in says in its docstring what
it stands in for and records its argv and the environment its program would see (one JSON
line per call in $STANDIN_LOG); the tests read those records.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpcenv.job import render as own
from hpcenv.profile import schema as profile

_COMMON = """\
import json, os, sys
def record(**what):
    with open(os.environ["STANDIN_LOG"], "a") as f:
        f.write(json.dumps({"prog": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                            "node": os.environ.get("SLURM_NODEID"), **what}) + "\\n")
JOB = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "NNODES", "PET_NNODES",
       "PET_RDZV_ENDPOINT", "SLURM_NODEID")
def job_env(env):
    return {k: env[k] for k in JOB if k in env}
"""

STANDINS = {
    "scontrol": '''
"""Stands in for Slurm's scontrol in a 2-node allocation: 'show hostnames' names them."""
print("node1\\nnode2")
''',
    "srun": '''
"""Stands in for Slurm's srun inside a 2-node allocation: runs its program once per node
(SLURM_NODEID 0, 1, one after the other). The program is what follows '--', else the first
word after srun's options (written --opt=value or as flags in these tests)."""
import subprocess
argv = sys.argv[1:]
at = argv.index("--") + 1 if "--" in argv else next(
    i for i, w in enumerate(argv) if not w.startswith("-"))
record(env=job_env(os.environ))
rc = 0
for node in range(int(os.environ["SLURM_JOB_NUM_NODES"])):
    env = {**os.environ, "SLURM_NODEID": str(node), "SLURM_PROCID": str(node)}
    rc = subprocess.run(argv[at:], env=env).returncode or rc
sys.exit(rc)
''',
    "mpirun": '''
"""Stands in for Open MPI's mpirun under Slurm: it starts its program once per node of
the allocation (through srun, as Open MPI's orted would be)."""
import subprocess
record(env=job_env(os.environ))
argv = sys.argv[1:]
at = next(i for i, w in enumerate(argv) if not w.startswith("-") and not w.isdigit())
sys.exit(subprocess.run(["srun", *argv[at:]]).returncode)
''',
    "apptainer": '''
"""Stands in for Apptainer 1.x 'apptainer exec [options] IMAGE CMD': the container's
environment is the host's, none of it with --cleanenv/-e/--containall/-C, then every
APPTAINERENV_NAME as NAME (apptainer.org/docs/user/main/environment_and_metadata.html)."""
args = sys.argv[2:]
clean = any(a in ("--cleanenv", "-e", "--containall", "-C") for a in args)
env = {} if clean else dict(os.environ)
env.update({k[len("APPTAINERENV_"):]: v for k, v in os.environ.items()
            if k.startswith("APPTAINERENV_")})
record(env=job_env(env), clean=clean)
''',
    "podman": '''
"""Stands in for podman 4 'podman run [options] IMAGE CMD': no host variable reaches
inside unless named by -e/--env NAME (the host's value, when set) or NAME=VALUE
(docs.podman.io podman-run). It reads the options these tests use (-e, -v, --name,
--device take a value)."""
args = sys.argv[2:]
takes = {"-e", "--env", "-v", "--volume", "--name", "--device"}
env, opts, i = {}, [], 0
while i < len(args) and args[i].startswith("-"):
    word = args[i]
    value = args[i + 1] if word in takes else None
    if word in ("-e", "--env"):
        name, eq, val = value.partition("=")
        if eq:
            env[name] = val
        elif name in os.environ:
            env[name] = os.environ[name]
    opts.append([word, value])
    i += 2 if word in takes else 1
record(env=job_env(env), options=opts, image=args[i], command=args[i + 1:])
''',
    "enroot": '''
"""Stands in for enroot 'enroot start [options] IMAGE CMD': inside, the variables named by
-e/--env KEY[=VAL] (KEY alone: the host's value) over the image's (enroot doc/cmd/start.md);
-m/--mount, -c/--conf, --rc take a value."""
args = sys.argv[2:]
takes = {"-e", "--env", "-m", "--mount", "-c", "--conf", "--rc"}
env, i = {}, 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in ("-e", "--env"):
        name, eq, val = args[i + 1].partition("=")
        env[name] = val if eq else os.environ.get(name, "")
    i += 2 if args[i] in takes else 1
record(env=job_env(env), image=args[i], command=args[i + 1:])
''',
}


@pytest.fixture
def standins(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STANDINS.items():
        script = bin_dir / name
        script.write_text(f"#!{sys.executable} -I\n{_COMMON}{body}")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (bin_dir / "podman-hpc").symlink_to(bin_dir / "podman")
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, *argv: str) -> list[dict[str, Any]]:
    """The job script of ``argv`` on 2 nodes run by bash; the stand-ins' records."""
    spec = own.CommandJob(argv=argv, nodes=2, preflight=False)
    script = own.render(profile.load("local"), spec, workdir=tmp_path).script
    log = tmp_path / "calls.jsonl"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "STANDIN_LOG": str(log),
        "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2",
    }  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize(
    "argv",
    [
        ("srun", "--overlap", "sh", "-c", "true"),
        ("srun", "--het-job=0", "--ntasks=2", "sh", "-c", "true"),
        ("srun", "--ntasks=4", "--ntasks-per-node=2", "sh", "-c", "true"),
    ],
)
def test_the_user_s_srun_runs_once_from_the_batch_step_as_written(
    tmp_path: Path, standins: Path, argv: tuple[str, ...]
) -> None:
    (call,) = [c for c in _run(tmp_path, standins, *argv) if c["prog"] == "srun"]
    assert call["argv"] == list(argv[1:])  # the user's srun itself, never inside hpcenv's
    assert call["env"]["MASTER_ADDR"] == "node1" and "NODE_RANK" not in call["env"]


def test_mpirun_runs_once_from_the_batch_step(tmp_path: Path, standins: Path) -> None:
    calls = _run(tmp_path, standins, "mpirun", "-np", "2", "sh", "-c", "true")
    assert [c["prog"] for c in calls] == ["mpirun", "srun"]  # mpirun's own srun only
    assert calls[0]["argv"] == ["-np", "2", "sh", "-c", "true"]
    assert calls[0]["env"]["PET_RDZV_ENDPOINT"].startswith("node1:")


def test_apptainer_cleanenv_gets_the_job_s_variables_on_each_node(
    tmp_path: Path, standins: Path
) -> None:
    calls = _run(tmp_path, standins, "apptainer", "exec", "--cleanenv", "img.sif", "py", "t.py")
    inside = [c for c in calls if c["prog"] == "apptainer"]
    assert [c["clean"] for c in inside] == [True, True]
    for node, call in enumerate(inside):
        assert call["env"]["NODE_RANK"] == str(node) and call["env"]["MASTER_ADDR"] == "node1"
        assert call["env"]["WORLD_SIZE"] == "2" and call["env"]["PET_NNODES"] == "2"


@pytest.mark.parametrize("program", ["podman", "podman-hpc"])
def test_podman_run_gets_the_job_s_variables_and_keeps_the_user_s_words(
    tmp_path: Path, standins: Path, program: str
) -> None:
    argv = (program, "run", "--rm", "-it", "--name", "x", "-v", "a:b", "img:1", "py", "t.py")
    inside = [c for c in _run(tmp_path, standins, *argv) if c["prog"] == program]
    assert len(inside) == 2
    for node, call in enumerate(inside):
        assert (call["image"], call["command"]) == ("img:1", ["py", "t.py"])
        assert ["--name", "x"] in call["options"] and ["-v", "a:b"] in call["options"]
        assert call["env"]["NODE_RANK"] == str(node) and call["env"]["MASTER_ADDR"] == "node1"


def test_enroot_start_gets_the_job_s_variables(tmp_path: Path, standins: Path) -> None:
    argv = ("enroot", "start", "--rw", "-m", "a:b", "pytorch", "py", "t.py")
    inside = [c for c in _run(tmp_path, standins, *argv) if c["prog"] == "enroot"]
    assert [(c["image"], c["command"]) for c in inside] == [("pytorch", ["py", "t.py"])] * 2
    assert [c["env"]["NODE_RANK"] for c in inside] == ["0", "1"]
    assert {c["env"]["MASTER_ADDR"] for c in inside} == {"node1"}


def test_srun_apptainer_from_the_batch_step_gets_the_job_s_variables(
    tmp_path: Path, standins: Path
) -> None:
    calls = _run(tmp_path, standins, "srun", "apptainer", "exec", "-e", "img.sif", "py")
    inside = [c for c in calls if c["prog"] == "apptainer"]
    assert len(inside) == 2 and all(c["clean"] for c in inside)
    assert {c["env"]["MASTER_ADDR"] for c in inside} == {"node1"}
    assert all("NODE_RANK" not in c["env"] for c in inside)  # the user's srun places tasks
