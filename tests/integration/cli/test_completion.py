"""``hpcenv completion bash|zsh|fish`` in the real shells: the script is sourced, ``complete -p``
names its function, and completing a command line (COMP_WORDS through the function bash
calls, ``complete -C`` in fish) gives commands, actions, options, choices, profile names
(./envs, $HPCENV_ENVS, the shipped ones, environments built under $HPCENV_HOME) and probe
names. The shell runs with an empty PATH: no keystroke starts Python or anything else."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import require

#: What a bash user's TAB sees: one "WORDS -> REPLY" line per call of the function.
DRIVER = """
source "$1"
complete -p hpcenv
t() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=(); _hpcenv
      printf '%s -> %s\\n' "$*" "${COMPREPLY[*]}"; }
t hpcenv do
t hpcenv doctor ''
t hpcenv doctor --ra
t hpcenv probe --env ''
t hpcenv probe --env mine n
t hpcenv profile ''
t hpcenv profile check o
t hpcenv sbatch mine b
t hpcenv completion ''
t hpcenv report --html ''
t hpcenv run mine -- ls
"""


def _script(shell: str, cwd: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "hpcenv", "completion", shell], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    path = cwd / f"hpcenv.{shell}"
    path.write_text(done.stdout)
    return path


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A working directory with envs/mine.toml, $HPCENV_ENVS with other.toml, and a built
    environment 'built' (hpcenv's link) beside a build directory that is not a name."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "mine.toml").write_text("")
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "other.toml").write_text("")
    venvs = tmp_path / "home" / "venvs"
    (venvs / "built-20260101T000000Z").mkdir(parents=True)
    (venvs / "built").symlink_to("built-20260101T000000Z")
    (tmp_path / "report.json").write_text("{}")
    env = {"PATH": str(tmp_path / "empty-bin"), "HPCENV_HOME": str(tmp_path / "home"),
           "HPCENV_ENVS": str(tmp_path / "more"), "HOME": str(tmp_path)}  # fmt: skip
    return tmp_path, env


def test_bash_completes_commands_options_profiles_and_probes(
    site: tuple[Path, dict[str, str]],
) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    cwd, env = site
    script = _script("bash", cwd)
    done = subprocess.run([bash, "--norc", "-c", DRIVER, "driver", str(script)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "complete -F _hpcenv hpcenv"
    seen = dict(line.split(" -> ", 1) for line in lines[1:])
    profiles = set(seen["hpcenv doctor "].split())
    assert {"mine", "other", "built", "isambard", "supercloud", "brtx", "local"} <= profiles
    assert not any(p.startswith("built-") for p in profiles)  # a build, not a name
    assert seen["hpcenv do"] == "doctor"
    assert seen["hpcenv doctor --ra"] == "--ranks"
    assert set(seen["hpcenv probe --env "].split()) == profiles
    assert seen["hpcenv probe --env mine n"] == "nccl"
    assert seen["hpcenv profile "] == "init check"
    assert seen["hpcenv profile check o"] == "other"
    assert seen["hpcenv sbatch mine b"] == "build"
    assert seen["hpcenv completion "] == "bash zsh fish"
    assert "report.json" in seen["hpcenv report --html "].split()  # a file
    assert seen["hpcenv run mine -- ls"] == ""  # your command: bash's own completion


def test_zsh_loads_it_through_bashcompinit(site: tuple[Path, dict[str, str]]) -> None:
    zsh = shutil.which("zsh")
    require("zsh", zsh is not None, "apt-get install zsh (.ci/run installs it)")
    assert zsh is not None
    cwd, env = site
    script = _script("zsh", cwd)
    done = subprocess.run([zsh, "-f", "-c", f"source {script} && print -r -- $_comps[hpcenv]"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout.strip() == "_bash_complete -F _hpcenv", done.stderr


def test_fish_completes_profiles_and_actions(site: tuple[Path, dict[str, str]]) -> None:
    fish = shutil.which("fish")
    require("fish", fish is not None, "apt-get install fish (.ci/run installs it)")
    assert fish is not None
    cwd, env = site
    script = _script("fish", cwd)
    env = {**env, "PATH": "/usr/bin:/bin"}  # fish's own functions call basename
    said = {}
    for line in ("hpcenv doc", "hpcenv probe --env ", "hpcenv profile ", "hpcenv completion "):
        argv = [fish, "--no-config", "-c", f"source {script}; complete -C '{line}'"]
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        said[line] = {w.split("\t")[0] for w in done.stdout.splitlines()}
    assert said["hpcenv doc"] == {"doctor"}
    assert {"mine", "other", "built", "isambard"} <= said["hpcenv probe --env "]
    assert said["hpcenv profile "] == {"init", "check"}
    assert said["hpcenv completion "] == {"bash", "zsh", "fish"}
