"""No file is written through a symlink hpcenv did not make, nor writable by others.

A group member who can write a shared ``HPCENV_HOME`` (or a log directory) plants a
symlink where hpcenv is about to write, pointing at a victim's file. Every write of
hpcenv goes through ``hpcenv.utils.fsio``; each test below plants the symlink at one real
file hpcenv writes, through the code path that writes it, and checks that the victim
keeps its content and its mode.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpcenv.build import build_lock, builder
from hpcenv.job import targets
from hpcenv.models.results import RankResult, Status, gather
from hpcenv.profile import schema as profile
from hpcenv.slurm import sbatch
from hpcenv.tools import command
from hpcenv.ui import junit
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput
from support import REPO

VICTIM_TEXT = "# the victim's .bashrc\nexport PS1='$ '\n"


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Path]:
    """A file of someone else's that must come out untouched (content and mode)."""
    path = tmp_path / "victim" / ".bashrc"
    path.parent.mkdir()
    path.write_text(VICTIM_TEXT)
    path.chmod(0o600)
    yield path
    assert path.read_text() == VICTIM_TEXT, "the victim's file was written through a symlink"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the victim's file changed mode"


def _plant(link: Path, victim: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)


def test_env_lock_is_not_truncated_through_a_symlink(
    hpcenv_home: Path, victim: Path, tmp_path: Path
) -> None:
    """The issue's data loss: ``venvs/local.lock -> ~victim/.bashrc`` emptied the victim's
    file when the victim built. Now the build is refused before anything is touched."""
    _plant(hpcenv_home / "venvs" / "local.lock", victim)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "build", "local"],
        env={**os.environ, "HPCENV_HOME": str(hpcenv_home)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "is a symlink" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_env_lock_directly(tmp_path: Path, victim: Path) -> None:
    link = tmp_path / "venvs" / "x.lock"
    _plant(link, victim)
    with pytest.raises(BadInput, match="is a symlink"), build_lock.hold(link, timeout=0):
        pass


def test_sbatch_submit_script_replaces_a_planted_symlink(tmp_path: Path, victim: Path) -> None:
    """``sbatch --submit`` wrote the script through a symlinked path and made its target
    0755; now the symlink itself is replaced by the new script."""
    prof = profile.load(str(REPO / "envs" / "brtx.toml"))
    job = targets.render(prof, "imports", workdir=tmp_path, output_dir=tmp_path / "out")
    script = job.log_dir / f"{job.name}.sbatch"
    _plant(script, victim)
    written = sbatch.write(job)
    assert written == script and not script.is_symlink()
    assert script.read_text() == job.script
    assert os.access(script, os.X_OK)


def _writes() -> dict[str, Callable[[Path], object]]:
    result = gather("imports", [RankResult(rank=0, host="h", status=Status.PASS, summary="ok")])
    return {
        "report json (build report, marker)": lambda p: fsio.write_json(p, {"a": 1}),
        "lockfile / script text": lambda p: fsio.write_text(p, "x==1\n"),
        "junit xml": lambda p: junit.write(p, [result]),
        "fix .pth in a venv": lambda p: fsio.write_bytes(p, b"import x\n"),
    }


@pytest.mark.parametrize("what", list(_writes()))
def test_atomic_writes_replace_a_planted_symlink(tmp_path: Path, victim: Path, what: str) -> None:
    target = tmp_path / "shared" / "out.file"
    _plant(target, victim)
    _writes()[what](target)
    assert target.is_file() and not target.is_symlink()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_rank_output_is_never_written_through_a_symlink(
    tmp_path: Path, victim: Path, stream: str
) -> None:
    """A rank's stdout/stderr files (opened in place, not renamed) refuse a symlink."""
    link = tmp_path / "results" / f"nccl.rank0.{stream}"
    _plant(link, victim)
    with pytest.raises(BadInput, match="is a symlink"):
        command.spawn(["echo", "clobber"], **{stream: link})  # type: ignore[arg-type]


def test_build_log_is_never_written_through_a_symlink(tmp_path: Path, victim: Path) -> None:
    link = tmp_path / "logs" / "build-x.log"
    _plant(link, victim)
    with pytest.raises(BadInput):
        fsio.MaskedLog(link)


def test_a_directory_reached_through_another_users_symlink_is_refused(
    tmp_path: Path, victim: Path
) -> None:
    """``$HPCENV_HOME/logs -> ~victim/`` planted by another user: nothing is written into
    the victim's directory, and the message names the link and its owner."""
    if os.getuid() != 0:
        pytest.skip("needs root to give the planted symlink another owner (lchown)")
    logs = tmp_path / "home" / "logs"
    logs.parent.mkdir()
    logs.symlink_to(victim.parent, target_is_directory=True)
    os.lchown(logs, 4242, 4242)
    with pytest.raises(BadInput, match=r"symlink owned by uid 4242, not by you"):
        fsio.write_json(logs / "build.json", {"a": 1})
    assert sorted(p.name for p in victim.parent.iterdir()) == [".bashrc"]


def test_only_a_shared_homes_containers_are_group_writable(tmp_path: Path) -> None:
    """The env lock was created 0644 whatever the umask: the rest of a group got
    'Permission denied'; then everything hpcenv made followed the umask, and under umask
    002 a member could change what runs as you. Now what hpcenv writes is never writable
    by the group or others; only the containers (``venvs/``) keep the umask's group write,
    and the lock is taken read-only by the others (``flock`` needs no write access)."""
    old = os.umask(0o002)
    try:
        with build_lock.hold(tmp_path / "venvs" / "p.lock", timeout=0):
            pass
        fsio.write_text(tmp_path / "logs" / "a.txt", "x")
        fsio.write_text(tmp_path / "logs" / "job.sbatch", "x", executable=True)
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "venvs" / "p.lock") == 0o644
    assert mode(tmp_path / "venvs") == 0o775
    assert mode(tmp_path / "logs" / "a.txt") == 0o644
    assert mode(tmp_path / "logs" / "job.sbatch") == 0o755


def test_a_stale_temp_file_of_a_killed_writer_is_removed(tmp_path: Path) -> None:
    """A writer SIGKILLed between its temp file and the rename leaves ``.name.hpcenv-tmp-
    <pid>-*``; the next write into that directory removes it (its pid is gone)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    stale = tmp_path / f".out.json{fsio.TMP_MARK}{proc.pid}-abcd"
    stale.write_text("half")
    fsio.write_json(tmp_path / "out.json", {})
    assert not stale.exists()


def test_env_lock_another_user_made_read_only_is_still_usable(
    request: pytest.FixtureRequest,
) -> None:
    """A lock file an older hpcenv left 0644 and owned by another user: flock needs no
    write access, so the build still serialises (without the holder note)."""
    if os.getuid() != 0:
        pytest.skip("needs root to hand the lock file to another user")
    shared = Path(tempfile.mkdtemp(prefix="hpcenv-test-shared-"))  # not under pytest's 0700
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    lock = shared / "venvs" / "p.lock"
    lock.parent.mkdir()
    lock.write_text("")
    os.chown(lock, 4242, 4242)
    lock.chmod(0o644)
    # root ignores modes; drop to an unprivileged uid in a child to see the real check
    code = (  # everything imported before dropping root (the interpreter lives in /root)
        "import os, fcntl, json, socket, time; from pathlib import Path;"
        "from hpcenv.build import build_lock; from hpcenv.utils import fsio;"
        "os.setgid(4243); os.setuid(4243);"
        f"cm = build_lock.hold(Path({str(lock)!r}), timeout=0); cm.__enter__(); print('locked')"
    )
    lock.parent.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        timeout=60,
    )
    assert done.stdout.strip() == "locked", done.stderr


def test_a_kit_copy_planted_as_another_users_symlink_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$HPCENV_HOME/kit/<hash> -> ~mallory/kit`` planted by another user: the probes
    would import its ``hpcenv/kit`` (code of theirs run as you); hpcenv refuses it,
    naming the link and its owner, and never returns the planted directory."""
    if os.getuid() != 0:
        pytest.skip("needs root to give the planted symlink another owner (lchown)")
    from hpcenv.utils import paths

    monkeypatch.setenv("HPCENV_HOME", str(tmp_path / "seed"))
    name = paths.kit_path().name
    planted = tmp_path / "mallory-kit"
    shutil.copytree(tmp_path / "seed" / "kit" / name, planted)
    home = tmp_path / "home"
    (home / "kit").mkdir(parents=True)
    link = home / "kit" / name
    link.symlink_to(planted, target_is_directory=True)
    os.lchown(link, 4242, 4242)
    monkeypatch.setenv("HPCENV_HOME", str(home))
    with pytest.raises(BadInput, match=r"kit/[0-9a-f]+-\d+ is a symlink owned by uid 4242"):
        paths.kit_path()


@pytest.mark.parametrize("rm", [True, False], ids=["rm", "no-rm"])
def test_an_old_builds_removal_takes_a_deep_tree_and_never_what_a_symlink_points_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rm: bool
) -> None:
    """A superseded build's removal (``rm -rf`` beside the new build's last steps, or in
    hpcenv itself where there is no ``rm``; issue 21): every file and directory below the
    root goes, at every depth; a symlink planted in the tree, to a directory or a file
    outside it, is removed as a link and its target keeps its files."""
    if not rm:
        monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    root = tmp_path / "local-x-20260101T000000"
    deep = root / "lib" / "python3.11" / "site-packages" / "torch" / "include" / "ATen" / "x"
    deep.mkdir(parents=True)
    for level in (root, root / "lib", deep.parents[2], deep.parents[0], deep):
        for n in range(20):
            (level / f"f{n}.h").write_text("x")
    (deep / "to-dir").symlink_to(victim)
    (root / "lib" / "to-dir").symlink_to(victim)
    (deep.parents[1] / "to-file").symlink_to(victim / "keep.txt")
    (deep / "deeper" / "still" / "more").mkdir(parents=True)
    (deep / "deeper" / "still" / "more" / "f.h").write_text("x")
    remover = builder._start_removal([root])
    assert (remover is not None) is rm
    assert builder._finish_removal(remover, [root]) == [root.name]
    assert not root.exists()
    assert (victim / "keep.txt").read_text() == "mine\n"
    link = tmp_path / "link-to-victim"
    link.symlink_to(victim)
    builder._finish_removal(None, [link])  # a symlink root is left alone, as rmtree does
    assert link.is_symlink() and (victim / "keep.txt").is_file()
