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

from hpcenv.facts import fabric
from support import REPO, require
from support.buildkit import hpcenv

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
    from support.buildkit import require_local_build

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


_DISKS = r"""
import json, os, subprocess, sys
home, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
hpcenv = [sys.executable, "-m", "hpcenv"]
def run(*args):
    done = subprocess.run([*hpcenv, *args], capture_output=True, text=True, timeout=600)
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}
said = {}
if mode == "ro":
    subprocess.run(["mount", "--bind", home, home], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", home], check=True)
else:
    os.makedirs(home, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1600m", "tmpfs", home], check=True)
    said["first"] = run("build", "local", "--json")
    with open(os.path.join(home, "filler"), "wb") as fh:  # the disk fills up
        try:
            while True:
                fh.write(bytes(1 << 20))
        except OSError:
            pass
said["noop"] = run("build", "local", "--json")
said["probe"] = run("probe", "torch", "--env", "local", "--json")
said["force"] = run("build", "local", "--force")
with open(out, "w") as fh:
    json.dump(said, fh)
"""


def _on_disk(tmp_path: Path, home: Path, mode: str) -> dict[str, dict[str, object]]:
    """Run builds and a probe with HPCENV_HOME read-only (``ro``: a bind mount) or on a
    small tmpfs that fills up (``full``), in a private mount namespace (root only)."""
    require(
        "mount-namespace",
        os.geteuid() == 0 and shutil.which("unshare") is not None,
        "needs root and unshare(1) to mount a read-only or a full file system",
    )
    script, out = tmp_path / "disks.py", tmp_path / "said.json"
    script.write_text(_DISKS)
    env = {**os.environ, "HPCENV_HOME": str(home), "HPCENV_LOCKFILES": str(tmp_path / "locks")}
    shutil.copytree(REPO / "lockfiles", tmp_path / "locks", dirs_exist_ok=True)
    import subprocess

    subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--",
         sys.executable, str(script), str(home), mode, str(out)],
        check=True, env=env, cwd=tmp_path, timeout=1500,
    )  # fmt: skip
    said: dict[str, dict[str, object]] = json.loads(out.read_text())
    return said


@pytest.mark.slow
def test_a_read_only_home_still_serves_noop_builds_and_probes(tmp_path: Path) -> None:
    """Case 7: a read-only HPCENV_HOME (a shared software tree) no longer breaks a no-op
    build or a probe; a build that must write says so in one line (exit 2)."""
    from support.buildkit import require_local_build

    require_local_build()
    home = tmp_path / "home"
    env = {"HPCENV_HOME": str(home), "HPCENV_LOCKFILES": str(tmp_path / "locks")}
    shutil.copytree(REPO / "lockfiles", tmp_path / "locks")
    assert hpcenv("build", "local", env=env).returncode == 0
    said = _on_disk(tmp_path, home, "ro")
    assert said["noop"]["rc"] == 0 and json.loads(str(said["noop"]["out"]))["noop"] is True
    assert said["probe"]["rc"] == 0, said["probe"]
    assert "/hpcenv-results-local-" in json.loads(str(said["probe"]["out"]))["results_dir"]
    force = said["force"]
    assert force["rc"] == 2, force
    assert "is on a read-only file system" in str(force["err"]) and "HPCENV_HOME" in str(
        force["err"]
    )
    assert str(force["err"]).count("\n") == 1


@pytest.mark.slow
def test_a_full_disk_is_named_never_a_crash(tmp_path: Path) -> None:
    """Case 8: with HPCENV_HOME's disk full, a no-op build needs no write (exit 0), a
    forced build says "disk full at PATH" with exit 4 (uv's failure is not replaced by the
    report's), and a probe whose rank cannot write its result says the same."""
    from support.buildkit import require_local_build

    require_local_build()
    said = _on_disk(tmp_path, tmp_path / "home", "full")
    assert said["first"]["rc"] == 0, said["first"]
    assert said["noop"]["rc"] == 0 and json.loads(str(said["noop"]["out"]))["noop"] is True
    force = said["force"]
    assert force["rc"] == 4, force
    assert "disk full at " in str(force["err"]) and "MiB free" in str(force["err"])
    probe = said["probe"]
    text = str(probe["out"]) + str(probe["err"])
    assert probe["rc"] != 0 and "disk full at " in text, probe
    assert "crashed" not in text


def test_a_token_inside_a_quoted_profile_value_is_masked(tmp_path: Path) -> None:
    """Case 12: ``hpcenv env`` printed ``export NOTE='value-with-token=hf_... inside'``
    unmasked (the quoted value hid the assignment inside it from the masking)."""
    secret = "hf_QuotedInside1234567"
    prof = tmp_path / "q.toml"
    prof.write_text(
        f'[profile]\npython = "3.11"\n[env.always]\nNOTE = "value-with-token={secret} inside"\n'
    )
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")
    for fmt in ([], ["--json"]):
        done = hpcenv(
            "env", str(prof), "--env", str(venv), *fmt, env={"HPCENV_HOME": str(tmp_path)}
        )
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout and "token=REDACTED" in done.stdout, done.stdout
