"""The launch form (``hpcenv.job.containers``): the user's own srun/mpirun, and containers.

The forms in ``knowledge/containers.toml`` are checked against each runtime's own option
text: pyxis's ``args.c``, Apptainer's ``action_flags.go`` and enroot's ``start.md``
(recorded under tests/data/containers, origin and commit in its README: neither installs
here), and podman's live ``podman run --help`` (Debian's podman). The job script's lines
are run by bash where they compute something (the podman command with hpcenv's options,
Apptainer's prefixed variables).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import main
from hpcenv.job import command, containers
from hpcenv.job import render as own
from hpcenv.profile import schema as profile
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import shell_quote
from support import REPO, require

DATA = REPO / "tests" / "data" / "containers"


def _form(*words: str) -> containers.Form:
    return containers.read(command.read(words))


# --- the forms against the runtimes' own text -------------------------------------------


def _apptainer_flags() -> dict[str, bool]:
    """Apptainer's action flags: ``--name``/``-X`` -> takes a value (not a bool)."""
    text = (DATA / "apptainer-action_flags.go").read_text()
    out: dict[str, bool] = {}
    for block in re.findall(r"cmdline\.Flag\{(.*?)\n\}", text, re.S):
        name = re.search(r'\bName:\s+"([^"]+)"', block)
        if not name:
            continue
        default = re.search(r"\bDefaultValue:\s+([^,\n]+)", block)
        takes = not (default and default.group(1).strip() in ("false", "true"))
        out["--" + name.group(1)] = takes
        if short := re.search(r'\bShortHand:\s+"([^"]+)"', block):
            out["-" + short.group(1)] = takes
    return out


def test_apptainer_s_form_is_its_own_flags() -> None:
    flags = _apptainer_flags()
    rt = containers.runtimes()["apptainer"]
    for option in rt.value_options:
        assert flags.get(option) is True, f"{option}: not a value option of apptainer exec"
    # and every one of them: a value option missing is taken for the image (--cwd /work)
    assert {o for o, takes in flags.items() if takes} <= rt.value_options
    for option in (*rt.gpu_flags, *rt.clean_flags):
        assert flags.get(option) is False, f"{option}: not a flag of apptainer exec"
    assert flags.get(rt.bind_flag) is True
    text = (DATA / "apptainer-action_flags.go").read_text()
    # --bind is also read from APPTAINER_BIND (EnvKeys BIND, appended: EnvAppendValue)
    assert re.search(r'Name:\s+"bind",.*?EnvKeys:\s+\[\]string\{"BIND"', text, re.S)


def test_pyxis_s_form_is_its_own_spank_options() -> None:
    text = (DATA / "pyxis-args.c").read_text()
    options = dict(re.findall(r'\{\s*"(container-[a-z-]+)",\s*(NULL|"[^"]*"),', text))
    rt = containers.runtimes()["pyxis"]
    for option in (rt.image_option, rt.bind_option, rt.env_option):
        assert options.get(option.removeprefix("--"), "NULL") != "NULL", option
    for variable in (rt.env_variable, rt.bind_variable):  # read when the option is not given
        assert f'get_env_var(sp, "{variable}"' in text, variable
    assert "existing values in the image take precedence" in text  # why hpcenv names them


def test_enroot_s_form_is_its_own_usage() -> None:
    usage = (DATA / "enroot-start.md").read_text()
    assert "Usage: enroot start [options] [--] NAME|IMAGE [COMMAND] [ARG...]" in usage
    takes = set()
    for short, long, arg in re.findall(r"^\s+(-\w), (--[\w-]+)( [A-Z]\S*)?", usage, re.M):
        if arg:
            takes |= {short, long}
    takes |= {m for m in re.findall(r"^\s+(--[\w-]+) [A-Z]", usage, re.M)}
    rt = containers.runtimes()["enroot"]
    assert rt.value_options == takes
    assert rt.env_flag in takes and rt.bind_flag in takes


def test_podman_s_form_is_its_own_help() -> None:
    podman = shutil.which("podman")
    require("podman", podman is not None, "apt-get install podman")
    assert podman is not None
    help_text = subprocess.run(
        [podman, "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    takes, flags = set(), set()
    for short, long, arg in re.findall(r"^\s+(?:(-\w), )?(--[\w-]+)( \S+)?\s", help_text, re.M):
        (takes if arg else flags).update(o for o in (short, long) if o)
    rt = containers.runtimes()["podman"]
    # --gpus: podman 5 (Debian 12 has 4.3); --net: --network's alias, hidden from --help
    newer = {"--gpus", "--net"}
    assert rt.value_options - newer <= takes, sorted(rt.value_options - newer - takes)
    # and every one of them: a value option missing is taken for the image (--cidfile F)
    assert takes <= rt.value_options, sorted(takes - rt.value_options)
    assert rt.env_flag in takes and rt.bind_flag in takes and "--device" in takes
    assert "--rootfs" in flags  # a flag: the image word is then a directory


# --- reading a command ---------------------------------------------------------------------


def test_the_issue_s_commands_are_read_as_their_launch_form() -> None:
    megatron = _form("srun", "--mpi=pmix", "--container-image=nvcr.io#nvidia/nemo:24.05",
                     "--container-mounts=/data:/data", "bash", "-c",
                     "python run_recipe.py")  # fmt: skip
    assert (megatron.launcher, megatron.runtime, megatron.image) == (
        "srun", "pyxis", "nvcr.io#nvidia/nemo:24.05",
    )  # fmt: skip
    assert megatron.gpus and megatron.user_binds and megatron.from_batch

    rapids = _form("apptainer", "exec", "--nv", "--bind", "/scratch:/scratch", "rapids.sif",
                   "python", "train.py")  # fmt: skip
    assert (rapids.launcher, rapids.runtime, rapids.image, rapids.gpus) == (
        "", "apptainer", "rapids.sif", True,
    )  # fmt: skip
    assert rapids.insert_at == 2 and rapids.user_binds and not rapids.clean_env

    clean = _form("singularity", "exec", "--cleanenv", "-B", "/a", "img.sif", "python")
    assert (clean.program, clean.image, clean.clean_env, clean.gpus) == (
        "singularity", "img.sif", True, False,
    )  # fmt: skip
    cdi = _form("podman", "run", "--rm", "--device", "nvidia.com/gpu=all", "-e", "X", "-v",
                "/a:/a", "docker.io/pytorch/pytorch:2.5", "python", "t.py")  # fmt: skip
    assert (cdi.image, cdi.gpus) == ("docker.io/pytorch/pytorch:2.5", True)
    assert _form("podman", "run", "--device=nvidia.com/gpu=0", "img").gpus
    assert not _form("podman", "run", "--device", "/dev/fuse", "img").gpus
    assert not _form("podman", "run", "-m", "4g", "img").user_binds  # podman's -m: memory
    assert _form("enroot", "start", "-m", "/a:/a", "img").user_binds  # enroot's: a mount
    assert _form("podman", "run", "--rm", "--rootfs", "/r", "python").image == "/r"
    assert _form("podman-hpc", "run", "--gpu", "img").gpus
    assert _form("podman", "run", "--cidfile", "/tmp/cid", "--pod", "p", "img", "py").image == "img"
    assert _form("apptainer", "exec", "--cwd", "/work", "img.sif", "python").image == "img.sif"
    enroot = _form("enroot", "start", "--env", "A", "--mount", "/a:/a", "img.sqsh", "python")
    assert (enroot.image, enroot.gpus, enroot.insert_at) == ("img.sqsh", True, 2)

    mpi = _form("mpirun", "-np", "8", "singularity", "exec", "--nv", "img.sif", "python")
    assert (mpi.launcher, mpi.runtime, mpi.image) == ("mpirun", "apptainer", "img.sif")
    assert _form("env", "A=1", "srun", "python", "t.py").launcher == "srun"
    assert _form("/usr/bin/mpiexec", "-n", "2", "python").launcher == "mpiexec"
    bare = _form("python", "train.py", "--srun")
    assert bare == containers.Form() and not bare.describe()
    assert _form("srun", "hostname").runtime == ""  # srun without --container-image
    own_env = _form("srun", "--container-image", "img", "--container-env=NCCL_DEBUG", "python")
    assert own_env.user_env_option and own_env.image == "img"
    (said,) = containers.warnings(own_env, 0)
    assert "pyxis then ignores PYXIS_CONTAINER_ENV" in said


def test_own_launchers_refuse_the_other_launch_forms() -> None:
    with pytest.raises(BadInput, match="--per-task with srun"):
        containers.check(_form("srun", "python"), "task")
    with pytest.raises(BadInput, match="--ray with mpirun"):
        containers.check(_form("mpirun", "python"), "ray")
    with pytest.raises(BadInput, match="--ray with a podman command"):
        containers.check(_form("podman", "run", "img", "python"), "ray")
    containers.check(_form("apptainer", "exec", "img", "python"), "task")


# --- the job script ------------------------------------------------------------------------


def _script(name: str, *argv: str, nodes: int = 2) -> str:
    spec = own.CommandJob(argv=argv, nodes=nodes)
    return own.render(profile.load(name), spec, workdir=Path("/tmp/project")).script


def _lines_from(script: str, start: str, end: str) -> str:
    lines = script.splitlines()
    a = next(i for i, x in enumerate(lines) if x.startswith(start))
    b = next(i for i, x in enumerate(lines) if i > a and x.startswith(end))
    return "\n".join(lines[a:b])


def test_the_user_s_srun_runs_once_from_the_batch_step(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's recipe line: never inside hpcenv's per-node srun step."""
    argv = ["srun", "--mpi=pmix", "--container-image=nvcr.io#nvidia/nemo:24.05", "bash", "-c",
            "python run_recipe.py"]  # fmt: skip
    assert main(["sbatch", "isambard", "--nodes", "2", "--", *argv]) == 0
    out, err = capsys.readouterr()
    assert subprocess.run(["bash", "-n"], input=out, text=True).returncode == 0
    lines = out.splitlines()
    assert '"${cmd[@]}" &' in lines  # from the batch shell
    assert not any(x.startswith("srun ") and '"${cmd[@]}"' in x for x in lines)  # never nested
    assert lines[2].startswith("# once from the batch step (your srun spreads it)")
    assert any(x.startswith("# launch: your srun runs once from the batch step") for x in lines)
    # after the gate (pyxis in srun; preflight), not a venv gate
    gate = lines.index(next(x for x in lines if x.startswith('gate "pyxis in srun')))
    assert gate < lines.index('"${cmd[@]}" &')
    assert not any('test -x "$VIRTUAL_ENV/bin/python"' in x for x in lines)
    # pyxis takes the job's variables over the image's by name; NODE_RANK is not set here
    env = next(x for x in lines if x.startswith("export PYXIS_CONTAINER_ENV="))
    assert "MASTER_ADDR" in env and "NCCL_NET" in env and "FI_PROVIDER" in env
    assert "NODE_RANK" not in env
    assert "your srun runs once from the batch step" in err


def test_an_apptainer_job_needs_no_venv_and_gets_the_job_s_variables() -> None:
    script = _script("isambard", "apptainer", "exec", "--nv", "--cleanenv", "img.sif", "python",
                     "train.py")  # fmt: skip
    assert 'test -x "$VIRTUAL_ENV/bin/python"' not in script
    assert "gate 'apptainer on '\"$nodes\"' node(s)' on_nodes bash -c" in script
    assert "gate 'image img.sif on '\"$nodes\"' node(s)' on_nodes test -e img.sif" in script
    assert 'APPTAINERENV_NODE_RANK="$SLURM_NODEID"' in script  # per node, with --cleanenv
    # what bash makes of the container's lines: every variable, prefixed, with its value
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f"set -eu\n{part}\nenv"],
        env={"PATH": os.environ["PATH"], "MASTER_ADDR": "node1", "NCCL_NET": "AWS Libfabric",
             "LD_LIBRARY_PATH": ""},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert env["APPTAINERENV_MASTER_ADDR"] == env["SINGULARITYENV_MASTER_ADDR"] == "node1"
    assert env["APPTAINERENV_NCCL_NET"] == "AWS Libfabric"
    assert "APPTAINERENV_WORLD_SIZE" not in env  # unset on the host: not invented
    assert "APPTAINER_BIND" not in env  # no network library on this LD_LIBRARY_PATH


def test_the_host_s_network_libraries_are_bound(tmp_path: Path) -> None:
    """isambard's cxi recipe needs the OFI plugin: the directories the modules put on
    LD_LIBRARY_PATH holding libfabric or an NCCL net plugin are bound at the same paths."""
    fabric, plugin, other = tmp_path / "libfabric", tmp_path / "ofi", tmp_path / "other"
    for d, lib in ((fabric, "libfabric.so.1"), (plugin, "libnccl-net-ofi.so"), (other, "x.so")):
        d.mkdir()
        (d / lib).write_bytes(b"")
    path = f"{fabric}:{plugin}:{other}"
    script = _script("isambard", "apptainer", "exec", "--nv", "img.sif", "python")
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f"set -eu\n{part}\necho \"$APPTAINER_BIND\""],
        env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": path, "APPTAINER_BIND": "/site"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"/site,{fabric}:{fabric}:ro,{plugin}:{plugin}:ro"  # read-only
    podman = _script("isambard", "podman", "run", "--device", "nvidia.com/gpu=all", "img", "py")
    part = _lines_from(podman, "# --- the container", "# --- gate")
    cmd = "cmd=(podman run --device nvidia.com/gpu=all img py)"
    done = subprocess.run(
        ["bash", "-c", f'set -eu\n{cmd}\n{part}\nprintf "%s\\n" "${{cmd[@]}}"'],
        env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": path},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    words = done.stdout.splitlines()
    assert words[:2] == ["podman", "run"] and words[-4:] == ["--device", "nvidia.com/gpu=all",
                                                             "img", "py"]  # fmt: skip
    assert ["-v", f"{fabric}:{fabric}:ro", "-v", f"{plugin}:{plugin}:ro"] == words[-8:-4]
    at = words.index("NCCL_NET")
    assert words[at - 1 : at + 1] == ["-e", "NCCL_NET"]


def test_the_gate_asks_what_passing_gpus_in_needs_of_the_node() -> None:
    """On a GPU profile: the driver's libcuda for --nv, a CDI spec for podman's
    nvidia.com/gpu device, nvidia-container-cli for pyxis; run here (no NVIDIA driver, no
    CDI spec) each stops the job. A CPU profile gets none."""
    commands = {
        "apptainer": ("apptainer", "exec", "--nv", "img.sif", "python"),
        "podman": ("podman", "run", "--device", "nvidia.com/gpu=all", "img", "python"),
        "pyxis": ("srun", "--container-image=img", "python"),
    }
    for name, argv in commands.items():
        check = shell_quote(containers.runtimes()[name].gpu_gate)
        line = next(x for x in _script("isambard", *argv).splitlines() if x.endswith(check))
        assert line.startswith("gate ") and " on_nodes bash -c " in line, line
        snippet = shlex.split(line.split(" on_nodes bash -c ", 1)[1])[0]
        if Path("/proc/driver/nvidia").exists():  # a GPU machine: the check may pass
            continue
        assert subprocess.run(["bash", "-c", snippet], capture_output=True).returncode != 0
        assert check not in _script("local", *argv)


def test_podman_gets_the_job_s_variables_by_name_after_run() -> None:
    script = _script("local", "OMP_NUM_THREADS=1", "podman", "run", "--rm", "--rootfs", "/r",
                     "python", "w.py")  # fmt: skip
    cmd = next(x for x in script.splitlines() if x.startswith("cmd=(env "))
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f'set -eu\n{cmd}\n{part}\nprintf "%s\\n" "${{cmd[@]}}"'],
        env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    words = done.stdout.splitlines()
    assert words[:4] == ["env", "OMP_NUM_THREADS=1", "podman", "run"]
    assert words[4:8] == ["-e", "MASTER_ADDR", "-e", "MASTER_PORT"]
    assert words[-5:] == ["--rm", "--rootfs", "/r", "python", "w.py"]
    assert "NODE_RANK" in words  # set on each node before podman starts


def test_a_container_without_gpus_on_a_gpu_profile_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sbatch", "isambard", "--", "apptainer", "exec", "img.sif", "python"]) == 0
    err = capsys.readouterr().err
    assert "warning: apptainer without --nv or --nvccli: the container sees none of the " in err
    assert main(["sbatch", "isambard", "--", "apptainer", "exec", "--nv", "img.sif", "py"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_an_own_srun_with_per_task_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sbatch", "local", "--per-task", "--", "srun", "python", "t.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--per-task with srun" in err, err


def _runtime_word(word: str) -> bool:
    """A word that would start another runtime's form (or pyxis's) before ours."""
    programs = {p for rt in containers.runtimes().values() for p in rt.programs}
    return word in programs or word.startswith("--container-image")


_WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(_WORD.filter(lambda w: not _runtime_word(w)), max_size=3),
    options=st.lists(st.sampled_from(["--rm", "-e", "X", "-v", "/a:/b", "--rootfs", "-it"]),
                     max_size=4),
    after=st.lists(_WORD, max_size=4),
    runtime=st.sampled_from([("podman", "run"), ("enroot", "start")]),
)  # fmt: skip
def test_hpcenv_s_options_go_right_after_the_subcommand_and_nothing_else_moves(
    before: list[str], options: list[str], after: list[str], runtime: tuple[str, str]
) -> None:
    """Whatever precedes the runtime (a launcher, VAR=value) and follows it: what bash
    builds is the user's words with hpcenv's block after ``run``/``start``, in one piece."""
    argv = ["srun", *before, *runtime, *options, "img", *after]
    if command.read(argv).program != 0 or "--" in before:
        return  # srun's own '--' and odd forms are srun's to read
    script = _script("local", *argv)
    cmd = next(x for x in script.splitlines() if x.startswith("cmd=("))
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f'set -eu\n{cmd}\n{part}\nprintf "%s\\0" "${{cmd[@]}}"'],
        env={"PATH": os.environ["PATH"]}, capture_output=True, check=True,
    )  # fmt: skip
    words = [w.decode() for w in done.stdout.split(b"\0")[:-1]]
    at = argv.index(runtime[1], argv.index(runtime[0])) + 1
    rt = containers.runtimes()[runtime[0]]
    names = containers.passed_names([], containers.read(command.read(argv)))
    block = [w for n in names for w in (rt.env_flag, n)]
    assert words == [*argv[:at], *block, *argv[at:]]


# --- review of issue 46 ----------------------------------------------------------------------


@pytest.mark.parametrize("runtime", ["apptainer", "podman", "enroot", "pyxis"])
def test_a_variable_name_that_is_shell_code_is_refused_not_rendered(
    runtime: str, tmp_path: Path
) -> None:
    """Every name the container's lines insert is checked (``environment.check_names``):
    Apptainer's loop writes the names as bare words, so an unchecked one is code."""
    form = containers.Form(runtime=runtime, program=runtime, image="img", insert_at=2)
    bad = f"}}$(touch {tmp_path}/X)${{"
    with pytest.raises(BadInput, match="not a valid name"):
        lines = [
            *containers.env_lines(form, ["MASTER_ADDR", bad], network=False),
            *containers.insert_lines(form, ["MASTER_ADDR", bad]),
        ]
        subprocess.run(["bash", "-c", "cmd=(podman run img)\n" + "\n".join(lines)], check=False)
    assert not (tmp_path / "X").exists()


def test_pyxis_is_read_from_srun_s_options_only_not_the_program_s() -> None:
    """``--container-image`` after srun's program is the program's argument: read as
    pyxis, the job would gate on pyxis and drop the venv's gate."""
    assert _form("srun", "python", "train.py", "--container-image=x").runtime == ""
    assert _form("srun", "--overlap", "python", "t.py", "--container-image", "x").runtime == ""
    assert _form("srun", "-n", "2", "--container-image", "img", "python").image == "img"
    assert _form("srun", "-N2", "--container-image=img", "--", "python").image == "img"


def test_a_network_library_directory_others_can_write_is_not_bound_and_said(
    tmp_path: Path,
) -> None:
    """A directory on LD_LIBRARY_PATH anyone can write (a libfabric.so dropped in /tmp),
    a relative one (bound from wherever the job runs) or one with a comma (two binds in
    APPTAINER_BIND) is not bound into the container; the job log says which and why."""
    good, open_, comma = tmp_path / "good", tmp_path / "open", tmp_path / "a,b"
    for d in (good, open_, comma, tmp_path / "rel"):
        d.mkdir()
        (d / "libfabric.so.1").write_bytes(b"")
    open_.chmod(0o1777)
    path = f"{good}:{open_}:rel:{comma}"
    script = _script("isambard", "apptainer", "exec", "--nv", "img.sif", "python")
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f"set -eu\n{part}\necho \"${{APPTAINER_BIND:-}}\""],
        env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": path}, cwd=tmp_path,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"{good}:{good}:ro"
    said = done.stderr.splitlines()
    assert len(said) == 3, said
    assert f"{open_} on LD_LIBRARY_PATH: writable by others; not bound" in said[0]
    assert "rel on LD_LIBRARY_PATH: not an absolute path" in said[1]
    assert f"{comma} on LD_LIBRARY_PATH: has a comma" in said[2]


def test_the_names_passed_inside_are_those_the_script_exports() -> None:
    """``containers.RENDEZVOUS`` repeats what job/render.py exports (rendezvous, chain): a
    variable added there and not here would not reach inside a container."""
    script = _script("local", "podman", "run", "img", "python")
    exported = set()
    for line in script.splitlines():
        if line.startswith("export ") and not line.startswith(("export HPCENV_JOB_START",
                                                               "export HPCENV_HOME",
                                                               "export VIRTUAL_ENV",
                                                               "export PATH")):  # fmt: skip
            exported |= set(re.findall(r"\b([A-Z][A-Z0-9_]*)=", line))
    assert exported == set(containers.RENDEZVOUS) - {"NODE_RANK"}  # NODE_RANK: per node
    assert 'export NODE_RANK="$SLURM_NODEID"' in script


@pytest.mark.parametrize(
    "argv",
    [
        ("apptainer", "exec", "img.sif\ntouch {x} #", "python"),
        ("srun", "--container-image=img\ntouch {x} #", "python"),
    ],
)
def test_an_image_word_with_a_newline_stays_one_comment_line(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """The header's '# launch: ...' line names the image: a newline in that word of the
    user's command would end the comment and start a line of shell code."""
    x = tmp_path / "X"
    script = _script("local", *(w.format(x=x) for w in argv), nodes=1)
    header = script.split("\nset -euo pipefail\n", 1)[0]
    subprocess.run(["bash", "-c", header], cwd=tmp_path, capture_output=True, timeout=30)
    assert not x.exists()
    assert not [line for line in header.splitlines() if line and not line.startswith("#")]


def test_podman_hpc_s_gpu_flag_is_gated_on_what_it_binds_not_on_cdi() -> None:
    """podman-hpc's --gpu (NERSC's modules.d/gpu.yaml) copies the host's libcuda and binds
    /dev/nvidia*: no CDI spec is involved, so asking for one would stop every GPU job at
    a site without it. podman's --device nvidia.com/gpu=all is CDI's."""
    cdi = shell_quote(containers.runtimes()["podman"].gpu_gate)
    hpc = _script("isambard", "podman-hpc", "run", "--gpu", "img", "python")
    assert cdi not in hpc
    (line,) = [x for x in hpc.splitlines() if x.startswith("gate ") and "/dev/nvidiactl" in x]
    snippet = shlex.split(line.split(" on_nodes bash -c ", 1)[1])[0]
    if not Path("/dev/nvidiactl").exists():  # no GPU here: the check stops the job
        assert subprocess.run(["bash", "-c", snippet], capture_output=True).returncode != 0
    with_cdi = _script("isambard", "podman-hpc", "run", "--device=nvidia.com/gpu=all", "img", "p")
    assert cdi in with_cdi and "/dev/nvidiactl" not in with_cdi


def test_apptainer_s_nvccli_is_gated_on_nvidia_container_cli() -> None:
    """--nvccli: 'use nvidia-container-cli for GPU setup' (action_flags.go): that program on
    every node, not only libcuda (what --nv binds)."""
    assert "nvidia-container-cli for GPU setup" in (DATA / "apptainer-action_flags.go").read_text()
    script = _script("isambard", "apptainer", "exec", "--nvccli", "img.sif", "python")
    assert "command -v nvidia-container-cli" in script
    assert shell_quote(containers.runtimes()["apptainer"].gpu_gate) not in script


def test_a_runtime_s_global_options_before_its_subcommand_are_read() -> None:
    """'podman --root /local/storage run ...' (podman's store on node-local disk, as on
    clusters whose home is NFS): still podman, hpcenv's options after 'run'."""
    form = _form("podman", "--root", "/tmp/s", "--log-level=warn", "run", "--rm", "img", "py")
    assert (form.runtime, form.image, form.insert_at) == ("podman", "img", 5)
    quiet = _form("mpirun", "-np", "2", "apptainer", "-q", "exec", "--nv", "i.sif", "python")
    assert (quiet.runtime, quiet.image, quiet.gpus, quiet.insert_at) == (
        "apptainer", "i.sif", True, 6,
    )  # fmt: skip
    assert _form("podman", "--version").runtime == ""
    assert _form("python", "t.py", "--podman", "run").runtime == ""


def test_singularity_ce_gets_the_host_s_network_libraries_too(tmp_path: Path) -> None:
    """SingularityCE reads SINGULARITY_BIND, not APPTAINER_BIND; Apptainer reads
    SINGULARITY_* only where its APPTAINER_* twin is unset (Apptainer's 'Singularity
    Compatibility'): both are set, each appended to its own value."""
    fabric = tmp_path / "libfabric"
    fabric.mkdir()
    (fabric / "libfabric.so.1").write_bytes(b"")
    script = _script("isambard", "singularity", "exec", "--nv", "img.sif", "python")
    part = _lines_from(script, "# --- the container", "# --- gate")
    done = subprocess.run(
        ["bash", "-c", f'set -eu\n{part}\necho "$APPTAINER_BIND|$SINGULARITY_BIND"'],
        env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": str(fabric),
             "SINGULARITY_BIND": "/site"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"{fabric}:{fabric}:ro|/site,{fabric}:{fabric}:ro"


def test_a_container_with_a_network_of_its_own_on_several_nodes_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """podman's default network (a bridge, or slirp4netns/pasta rootless) and enroot's or
    Apptainer's --net give each container a network namespace of its own: the first
    node's rendezvous port is inside its container, so the ranks on other nodes never
    reach it. Said before the queue on more than one node; --network host is the fix."""
    assert _form("podman", "run", "img", "python").own_network
    for host in (("--network", "host"), ("--net=host",), ("--network=host",)):
        assert not _form("podman", "run", *host, "img", "python").own_network, host
    assert _form("enroot", "start", "--net", "img", "python").own_network
    assert _form("apptainer", "exec", "-n", "img.sif", "python").own_network
    assert not _form("apptainer", "exec", "img.sif", "python").own_network
    assert main(["sbatch", "local", "--nodes", "2", "--", "podman", "run", "img", "py"]) == 0
    err = capsys.readouterr().err
    assert "warning: podman gives the container a network of its own" in err
    assert "add --network host" in err
    assert main(["sbatch", "local", "--nodes", "1", "--", "podman", "run", "img", "py"]) == 0
    assert "network of its own" not in capsys.readouterr().err
