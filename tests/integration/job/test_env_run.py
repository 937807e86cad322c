"""``hpcenv env`` and ``hpcenv run``: one environment, printed or applied.

The printed lines, sourced by a real bash, must give exactly what ``run`` gives the
command (with and without modules); values survive any shell quoting; secrets are
never printed; ``run`` is the command (exec): same PID, its exit code, its signals.
A venv here is a bare ``python -m venv`` (what activation needs); a profile's modules
are stood in for by an exported bash function ``module`` (sites export theirs the same
way, ``BASH_FUNC_module%%``) that records its calls and puts a directory on PATH, as a
real module does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import main, split_command
from hpcenv.job import environment
from hpcenv.profile import schema as profile
from hpcenv.utils import redact
from support import REPO, require

HPCENV = [sys.executable, "-m", "hpcenv"]
TOKEN = "hf_envSECRET77"
#: bash's own variables, which differ between any two shells
SHELL_OWN = {"_", "SHLVL", "PWD", "OLDPWD"}
#: a stand-in for an environment module system's ``module`` function
MODULE_FUNC = (
    '() {  printf "%s " "$@" >> "$MODULE_LOG"; echo >> "$MODULE_LOG";'
    '  export PATH="/opt/mod/$2/bin:$PATH" LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$2"; }'
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def _profile(tmp_path: Path, extra: str = "", modules: tuple[str, ...] = ()) -> Path:
    mods = json.dumps(list(modules))
    text = f"""
[profile]
python = "3.11"
[modules]
load = {mods}
[env.always]
GREETING = "it's \\"here\\" $HOME `id`; rm -rf ~"
NCCL_SOCKET_IFNAME = "hsn"
HF_TOKEN = "{TOKEN}"
PIP_INDEX_URL = "https://bob:pw999@pypi.example/simple"
[env.multi_node]
NCCL_NET = "AWS Libfabric"
[job]
scratch = "{tmp_path / "scratch dir"}"
{extra}
"""
    (tmp_path / "scratch dir").mkdir(exist_ok=True)
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


#: The caller's own secrets (the profile's literal ones are never used: ``check_secrets``).
CALLERS = {
    "HF_TOKEN": "hf_callers_own_value_1234",
    "PIP_INDEX_URL": "https://carol:pw777@pypi.example/simple",
}


def _base_env(tmp_path: Path, *, secrets: bool = True, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "HPCENV_HOME": str(tmp_path / "hpcenv-home"),
        "PYTHONPATH": str(REPO / "src"),
        **(CALLERS if secrets else {}),
        **extra,
    }


def _env0(out: bytes) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in out.decode().split("\0") if item]
    return {k: v for k, v in pairs if k not in SHELL_OWN and not k.startswith("BASH_FUNC_")}


def _sourced(prof: Path, venv: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    printed = subprocess.run(
        [*HPCENV, "env", str(prof), "--env", str(venv), *args],
        env=env,
        capture_output=True,
        check=True,
    ).stdout.decode()
    done = subprocess.run(
        ["bash", "-c", 'eval "$1" && exec env -0', "bash", printed],
        env=env,
        capture_output=True,
        check=True,
    )
    return _env0(done.stdout)


def _run(prof: Path, venv: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    done = subprocess.run(
        [*HPCENV, "run", str(prof), "--env", str(venv), *args, "--", "env", "-0"],
        env=env,
        capture_output=True,
        check=True,
    )
    return _env0(done.stdout)


@pytest.mark.parametrize("nodes", ["1", "2"])
def test_env_sourced_in_bash_is_what_run_gives_the_command(
    tmp_path: Path, venv: Path, nodes: str
) -> None:
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _profile(tmp_path)
    env = _base_env(tmp_path, HF_TOKEN="from-caller", PIP_INDEX_URL="https://me:x@mirror/simple")
    sourced = _sourced(prof, venv, env, "--nodes", nodes)
    ran = _run(prof, venv, env, "--nodes", nodes)
    assert sourced == ran
    assert ran["VIRTUAL_ENV"] == str(venv)
    assert ran["PATH"] == f"{venv / 'bin'}:/usr/bin:/bin"
    assert ran["GREETING"] == 'it\'s "here" $HOME `id`; rm -rf ~'
    assert ran["HF_TOKEN"] == "from-caller"  # secrets come from the caller
    assert ran["PIP_INDEX_URL"] == "https://me:x@mirror/simple"
    assert ran["TMPDIR"] == str(tmp_path / "scratch dir" / f"hpcenv-{os.getuid()}")
    assert Path(ran["TMPDIR"]).is_dir()
    assert ("NCCL_NET" in ran) == (nodes == "2")  # multi-node variables only on > 1 node
    assert ran["HPCENV_HOME"] == env["HPCENV_HOME"]


def test_inside_a_slurm_job_nodes_and_tmpdir_come_from_the_job(tmp_path: Path, venv: Path) -> None:
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _profile(tmp_path)
    env = _base_env(
        tmp_path, HF_TOKEN="t", PIP_INDEX_URL="u", SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES="3"
    )
    sourced, ran = _sourced(prof, venv, env), _run(prof, venv, env)
    assert sourced == ran
    assert ran["NCCL_NET"] == "AWS Libfabric"  # 3 nodes
    assert ran["TMPDIR"] == str(tmp_path / "scratch dir" / "4242")


def test_with_modules_the_same_and_the_venv_first_on_path(tmp_path: Path, venv: Path) -> None:
    """Modules load first (``module load`` lines; ``run`` goes through bash for them),
    so the venv's bin stays ahead of what a module puts on PATH."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _profile(tmp_path, modules=("cuda/12.6", "my mod; rm -rf ~"))
    log = tmp_path / "modules.log"
    env = _base_env(
        tmp_path,
        HF_TOKEN="x1",
        PIP_INDEX_URL="u",
        MODULE_LOG=str(log),
        **{"BASH_FUNC_module%%": MODULE_FUNC},
    )
    sourced = _sourced(prof, venv, env)
    assert log.read_text() == "load cuda/12.6 \nload my mod; rm -rf ~ \n"
    ran = _run(prof, venv, env)
    assert sourced == ran
    assert ran["LOADEDMODULES"] == "cuda/12.6:my mod; rm -rf ~"
    assert ran["PATH"].split(":")[:3] == [
        str(venv / "bin"),
        "/opt/mod/my mod; rm -rf ~/bin",
        "/opt/mod/cuda/12.6/bin",
    ]


def test_modules_where_there_is_no_module_command_is_one_line(tmp_path: Path, venv: Path) -> None:
    """``hpcenv run isambard`` on a machine without Lmod/Environment Modules: one line
    naming the profile and the fix, exit 2 (bad input for this machine), not bash's
    "module: command not found" and 127 (which means CMD was not found)."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _profile(tmp_path, modules=("cuda/12.6",))
    env = _base_env(tmp_path, HF_TOKEN="x1", PIP_INDEX_URL="u")
    done = subprocess.run(
        [*HPCENV, "run", str(prof), "--env", str(venv), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "command not found" not in done.stderr
    assert done.stderr.startswith("hpcenv: error: profile p loads modules (cuda/12.6)")


def test_secrets_are_never_printed(tmp_path: Path, venv: Path) -> None:
    prof = _profile(tmp_path)
    env = _base_env(tmp_path, secrets=False)
    callers = _base_env(tmp_path)
    for fmt in ([], ["--json"]):
        out = subprocess.run(
            [*HPCENV, "env", str(prof), "--env", str(venv), *fmt],
            env=callers,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert TOKEN not in out and "pw999" not in out
        assert "hf_callers_own_value_1234" not in out and "pw777" not in out
    data = json.loads(out)
    assert data["from_caller"] == ["HF_TOKEN", "PIP_INDEX_URL"]
    assert "HF_TOKEN" not in data["set"]
    # Issue 24, case 11: the profile gives HF_TOKEN a value of its own. env could not print
    # it, run passed it: they disagreed. One rule now: without the caller's value both
    # refuse, naming the variable and the fix; with it, both use the caller's.
    for args in (["env", str(prof), "--env", str(venv)], ["run", str(prof), "--env",
                 str(venv), "--", "true"]):  # fmt: skip
        done = subprocess.run([*HPCENV, *args], env=env, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert "HF_TOKEN: profile" in done.stderr and "export HF_TOKEN" in done.stderr
        assert TOKEN not in done.stderr + done.stdout and done.stderr.count("\n") == 1
    mine = callers
    printed = subprocess.run(
        [*HPCENV, "env", str(prof), "--env", str(venv)], env=mine, capture_output=True, text=True
    ).stdout
    shell = subprocess.run(
        ["bash", "-c", 'eval "$1"; echo "$HF_TOKEN"', "bash", printed],
        env=mine,
        capture_output=True,
        text=True,
    )
    assert shell.stdout.strip().endswith("hf_callers_own_value_1234")
    assert _run(prof, venv, mine)["HF_TOKEN"] == "hf_callers_own_value_1234"


def test_run_is_the_command_its_pid_exit_code_and_signals(tmp_path: Path, venv: Path) -> None:
    prof = _profile(tmp_path)
    env = _base_env(tmp_path, HF_TOKEN="x")
    script = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (os.write(1, b'usr1\\n'), os._exit(42)))\n"
        "print(os.getpid(), sys.prefix, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [*HPCENV, "run", str(prof), "--env", str(venv), "--", "python", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pid, prefix = proc.stdout.readline().split()
        assert int(pid) == proc.pid  # exec: no hpcenv process left in between
        assert prefix == str(venv)  # 'python' is the venv's
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(30) == 42
        assert proc.stdout.read() == "usr1\n"
    finally:
        proc.kill()
    # SIGTERM to the command once it runs (before the exec, hpcenv's own handler exits 143:
    # a slow start under load made a fixed sleep send it there)
    term = subprocess.Popen(
        [*HPCENV, "run", str(prof), "--env", str(venv), "--", "sh", "-c",
         "echo ready; exec sleep 60"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert term.stdout is not None and term.stdout.readline() == "ready\n"
        term.send_signal(signal.SIGTERM)
        assert term.wait(30) == -signal.SIGTERM
    finally:
        term.kill()
    for code in (0, 3, 77):
        done = subprocess.run(
            [*HPCENV, "run", str(prof), "--env", str(venv), "--", "sh", "-c", f"exit {code}"],
            env=env,
        )
        assert done.returncode == code


def test_run_errors_are_one_line_with_their_code(tmp_path: Path, venv: Path) -> None:
    prof = _profile(tmp_path)
    env = _base_env(tmp_path, HF_TOKEN="x")
    (tmp_path / "data.txt").write_text("not a program")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*HPCENV, "run", str(prof), *args], env=env, capture_output=True, text=True
        )

    cases = [
        (run("--env", str(venv)), 2, "give the command after '--'"),
        (run("--env", str(venv), "--", "no-such-program-x"), 127, "command not found"),
        (run("--env", str(venv), "--", str(tmp_path / "data.txt")), 126, "not executable"),
        (run("--env", str(tmp_path), "--", "true"), 2, "no bin/python"),
        (run("--", "true"), 2, "is not built"),
        (run("--env", str(venv), "--nodes", "0", "--", "true"), 2, "--nodes 0"),
    ]
    for done, code, words in cases:
        assert done.returncode == code, done.stderr
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_only_commands_that_take_one_accept_a_double_dash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert split_command(["run", "p", "--", "a", "--", "b"]) == (["run", "p"], ["a", "--", "b"])
    assert split_command(["facts"]) == (["facts"], None)
    with pytest.raises(SystemExit) as info:
        main(["facts", "--", "x"])
    assert info.value.code == 2
    assert "takes no command after '--'" in capsys.readouterr().err


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes, without surrogate pairs; DEL escaped)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.dictionaries(
        st.from_regex(r"HPCT_[A-Z0-9_]{0,8}", fullmatch=True).filter(
            lambda k: not redact.is_secret(k)
        ),
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30
        ).filter(lambda v: not redact.URL_USERINFO.search(v)),
        max_size=6,
    ),
    modules=st.lists(st.text(min_size=1, max_size=12).filter(lambda m: "\0" not in m), max_size=3),
)
def test_any_value_survives_the_shell(values: dict[str, str], modules: list[str]) -> None:
    """Whatever a profile holds (quotes, $, backticks, newlines), the shell lines give it
    back exactly, and ``apply`` agrees with them."""
    prof = profile.parse(
        "[profile]\nname = 'h'\n[env.always]\n"
        + "".join(f"{k} = {_toml(v)}\n" for k, v in values.items())
        + f"[modules]\nload = [{', '.join(_toml(m) for m in modules)}]\n",
        "h.toml",
    )
    job = environment.for_profile(prof, nodes=1, venv=Path("/v e n v/x'y"), environ={})
    base = {"PATH": "/usr/bin:/bin", "PYTHONHOME": "/elsewhere"}  # activation removes it
    done = subprocess.run(
        ["bash", "-c", 'module() { :; }; eval "$1" && exec env -0', "bash",
         "\n".join(environment.shell_lines(job))],
        env=base, capture_output=True, check=True,
    )  # fmt: skip
    got = _env0(done.stdout)
    assert got == environment.apply(job, base)
    assert "PYTHONHOME" not in got
    assert {k: got[k] for k in values} == values
