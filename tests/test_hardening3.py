"""Hardening, third round (issue 24): cases from a shared login node, each rerun as the
issue wrote it. A planted ``venvs/<profile>`` is never run; a FIFO where hpcenv reads a
file never hangs it; a number past Python's 4,300-digit limit, or a line break in
HPCENV_HOME, ends in one line (exit 2), never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from buildkit import hpcenv
from conftest import REPO, require
from hpcenv.facts import fabric

BIG = "9" * 5000


def _planted(tmp_path: Path) -> dict[str, str]:
    """``venvs/local`` pointing at a venv that is not hpcenv's (another user's, say)."""
    home = tmp_path / "home"
    other = tmp_path / "theirs"
    (other / "bin").mkdir(parents=True)
    os.symlink(sys.executable, other / "bin" / "python")
    (home / "venvs").mkdir(parents=True)
    os.symlink(other, home / "venvs" / "local")
    return {"HPCENV_HOME": str(home)}


@pytest.mark.parametrize(
    "args",
    [
        ["run", "local", "--", "true"],
        ["env", "local"],
        ["probe", "torch", "--env", "local"],
        ["sbatch", "local", "--", "true"],
    ],
    ids=["run", "env", "probe", "sbatch"],
)
def test_a_planted_venv_link_is_never_run(tmp_path: Path, args: list[str]) -> None:
    done = hpcenv(*args, env=_planted(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "venvs/local is not an environment hpcenv built (a symlink to " in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_a_planted_directory_is_refused_by_the_build(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "venvs" / "local" / "bin").mkdir(parents=True)
    done = hpcenv("build", "local", env={"HPCENV_HOME": str(home)}, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not an environment hpcenv built (a directory, owned by" in done.stderr


def test_a_huge_integer_in_a_profile_or_facts_file_is_one_line(tmp_path: Path) -> None:
    prof = tmp_path / "big.toml"
    prof.write_text((REPO / "envs" / "local.toml").read_text() + f"\n[x]\nn = {BIG}\n")
    facts = tmp_path / "facts.json"
    facts.write_text(f'{{"schema": 1, "arch": "x86_64", "cpus": {BIG}}}')
    for args in (["show", str(prof)], ["plan", "local", "--facts", str(facts)]):
        done = hpcenv(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert "a number with thousands of digits" in done.stderr
        assert "Traceback" not in done.stderr


def test_a_fifo_at_the_fi_info_cache_entry_does_not_hang_facts(tmp_path: Path) -> None:
    require("fi_info", shutil.which("fi_info") is not None, "libfabric-bin is not installed")
    env = {**os.environ, "HPCENV_CACHE": str(tmp_path / "cache")}
    assert fabric.providers(env) is not None  # one real run fills the cache entry
    (entry,) = fabric.cache_dir(env).glob("*.json")
    entry.unlink()
    os.mkfifo(entry)
    done = hpcenv("facts", "--json", env={"HPCENV_CACHE": str(tmp_path / "cache")}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout)["network"]["libfabric_providers"], list)


def test_hpcenv_home_with_a_line_break_is_refused_before_anything_is_built(
    tmp_path: Path,
) -> None:
    home = tmp_path / "a\nb"
    done = hpcenv("build", "local", env={"HPCENV_HOME": str(home)}, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "HPCENV_HOME" in done.stderr and "line break" in done.stderr
    assert not home.exists()


OSC52_TOML = "\\u001b]52;c;ZXZpbA==\\u0007"  # an OSC 52 clipboard write, in TOML escapes


@pytest.mark.parametrize("args", [["show"], ["plan", "--declared"]], ids=["show", "plan"])
def test_escape_sequences_from_a_profile_are_printed_visibly(
    tmp_path: Path, args: list[str]
) -> None:
    prof = tmp_path / "esc.toml"
    text = (REPO / "envs" / "local.toml").read_text()
    prof.write_text(text.replace('description = "', f'description = "{OSC52_TOML}', 1))
    done = hpcenv(args[0], str(prof), *args[1:], cwd=tmp_path)
    out = done.stdout + done.stderr
    assert "\x1b" not in out and "\x07" not in out, out
    if args[0] == "show":
        assert "\\x1b]52;c;ZXZpbA==\\x07" in out


def test_an_escape_sequence_in_a_key_name_is_printed_visibly(tmp_path: Path) -> None:
    prof = tmp_path / "esc.toml"
    prof.write_text((REPO / "envs" / "local.toml").read_text() + f'\n["x{OSC52_TOML}"]\nn = 1\n')
    done = hpcenv("show", str(prof), cwd=tmp_path)
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "\\x1b]52" in done.stderr


@pytest.mark.slow
def test_a_build_never_rewrites_the_checkouts_tracked_locks(tmp_path: Path) -> None:
    """Case 13: a build whose inputs differ from the checkout's ``lockfiles/`` (made on
    another node, or with another index URL) compiles its own lock into
    $HPCENV_HOME/locks; the tracked file is left as it was, and a dead run's work
    directory in $TMPDIR is removed by a no-op build."""
    from buildkit import require_local_build

    require_local_build()
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "lockfiles", checkout / "lockfiles")
    tracked = checkout / "lockfiles" / "local-x86_64.txt"
    # a lock made elsewhere: the header says other inputs (the body, hashed, is untouched)
    text = tracked.read_text()
    digest = next(line for line in text.splitlines() if line.startswith("# inputs-digest: "))
    tracked.write_text(text.replace(digest, "# inputs-digest: 0000000000000000"))
    before = tracked.read_bytes()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        "HPCENV_HOME": str(tmp_path / "home"),
        "HPCENV_LOCKFILES": "",
        "TMPDIR": str(tmp),
    }
    first = hpcenv("build", "local", "--json", env=env, cwd=checkout)
    assert first.returncode == 0, first.stderr
    lock = json.loads(first.stdout)["lock"]
    assert tracked.read_bytes() == before
    own = tmp_path / "home" / "locks" / "local-x86_64.txt"
    assert lock["path"] == str(own) and own.is_file(), lock
    assert f"compiled into {own.parent}" in lock["action"], lock
    # a SIGKILLed run's work directory (a pid that is gone), then a build with nothing to do
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    leftover = tmp / f"hpcenv-run-{dead}-abcd"
    leftover.mkdir()
    again = hpcenv("build", "local", "--json", env=env, cwd=checkout)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["noop"] is True
    assert not leftover.exists()
    assert tracked.read_bytes() == before
