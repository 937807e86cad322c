"""CMD word for word (issue 24, case 3): a secret's value inside the user's command is
never written into the job script, and never masked into the word REDACTED either: it
becomes a reference to the variable the job inherits, so the job runs exactly CMD."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcenv.job import command
from hpcenv.job.render import command_lines
from hpcenv.kit.masking import MASK
from hpcenv.utils.errors import BadInput

KEY = "wandb-abcdef123456"
ENV = {"WANDB_API_KEY": KEY, "PATH": "/usr/bin:/bin"}


def _run_words(lines: list[str], env: dict[str, str]) -> list[str]:
    """What bash makes of the rendered lines: the words of ``cmd``."""
    script = "\n".join([*lines, 'printf "%s\\0" "${cmd[@]}"'])
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_the_secret_is_a_reference_and_the_command_runs_word_for_word() -> None:
    argv = ["python", "train.py", "--wandb-key", KEY, "--tag", f'run={KEY}$1 `x` "q"']
    lines = command_lines(command.read(argv), ENV)
    text = "\n".join(lines)
    assert KEY not in text and MASK not in text
    assert '"${WANDB_API_KEY}"' in text
    assert _run_words(lines, ENV) == argv


def test_the_script_stops_when_the_job_lacks_the_variable() -> None:
    lines = command_lines(command.read(["python", "t.py", KEY]), ENV)
    done = subprocess.run(["bash", "-c", "\n".join(lines)], env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode != 0
    assert "the command uses WANDB_API_KEY; export it before sbatch" in done.stderr


@pytest.mark.parametrize("word", ["https://user:pw12345@hub.example/x", "HF_TOKEN=hf_abcdefgh"])
def test_a_secret_hpcenv_cannot_refer_to_is_refused(word: str) -> None:
    with pytest.raises(BadInput, match="word 3 of the command holds a secret"):
        command_lines(command.read(["python", "t.py", word]), ENV)


@pytest.mark.parametrize("name", ["HF_TOKEN$(touch x)", "1_TOKEN", "A-TOKEN"])
def test_a_variable_whose_name_the_shell_cannot_refer_to_is_no_reference(name: str) -> None:
    """A variable of the environment named against the shell's rule ([A-Za-z_][A-Za-z0-9_]*;
    env(1) takes any name) was written as ``"${HF_TOKEN$(touch x)}"``: bash's "bad
    substitution" in the job. Its value is refused like any secret hpcenv cannot refer to."""
    env = {name: KEY, "PATH": "/usr/bin:/bin"}
    with pytest.raises(BadInput, match="word 3 of the command holds a secret"):
        command_lines(command.read(["python", "t.py", KEY]), env)


def test_the_sbatch_command_keeps_cmd_as_given(tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", "local", "--", "python", "train.py",
         "--wandb-key", KEY],
        env={**ENV, "HOME": "/tmp"}, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'cmd=(python train.py --wandb-key "${WANDB_API_KEY}")' in done.stdout
    assert MASK not in done.stdout and KEY not in done.stdout


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"),
                        max_size=12), min_size=1, max_size=5))  # fmt: skip
def test_any_words_with_the_secret_inside_run_as_given(words: list[str]) -> None:
    argv = ["prog", *(w + KEY if i % 2 else w for i, w in enumerate(words))]
    assert _run_words(command_lines(command.read(argv), ENV), ENV) == argv
