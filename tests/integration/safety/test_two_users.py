"""Two users of one group share one HPCENV_HOME (umask 002): both build.

Before, the environment lock file was created 0644 whatever the umask, so the second
user of the group got "Permission denied" on every build, and nothing said why. Now
everything hpcenv creates takes its mode from the umask (``fsio``).

Real users and a real group are created for the test (root is needed; they are
removed afterwards), each with its own HOME and uv cache; hpcenv runs from a venv both
can read (the test interpreter lives under /root, which they cannot), with real uv and
the CPU torch wheel from the wheelhouse; the profile is ``local``'s torch alone.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import REPO, require
from support.buildkit import require_local_build

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = Path("/usr/bin/python3.11")
NETWORK_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "_PROXY")
PROFILE = """
[profile]
name = "shared"
description = "torch alone, for the two-user test"
python = "3.11"
[torch]
version = "==2.13.0"
[packages]
install = []
"""


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def site() -> Iterator[dict[str, object]]:
    """Two users in one group, a group-shared HPCENV_HOME, and a venv with hpcenv."""
    require(
        "root",
        os.geteuid() == 0 and bool(shutil.which("useradd")) and bool(shutil.which("setpriv")),
        "creating users needs root, useradd and setpriv",
    )
    require("system-python", SYSTEM_PYTHON.exists(), f"{SYSTEM_PYTHON} is missing")
    require_local_build()
    tag = uuid.uuid4().hex[:6]
    group, users = f"hpcg{tag}", [f"hpca{tag}", f"hpcb{tag}"]
    root = Path(tempfile.mkdtemp(prefix="hpcenv-two-users-"))
    root.chmod(0o755)
    made: list[list[str]] = []
    try:
        assert _run(["groupadd", group]).returncode == 0
        made.append(["groupdel", group])
        for user in users:
            home = root / user
            done = _run(
                ["useradd", "-M", "-N", "-g", group, "-d", str(home), "-s", "/bin/sh", user]
            )
            assert done.returncode == 0, done.stderr
            made.append(["userdel", user])
            home.mkdir()
            shutil.chown(home, user, group)
        shared = root / "shared"
        for d in (shared, shared / "envs", shared / "lockfiles"):
            d.mkdir()
            shutil.chown(d, "root", group)
            d.chmod(0o2775)  # group-writable, new entries keep the group
        (shared / "envs" / "shared.toml").write_text(PROFILE)
        venv = root / "hpcenv-venv"
        uv = shutil.which("uv")
        assert uv is not None
        for argv in (
            [uv, "venv", "-q", "--python", str(SYSTEM_PYTHON), str(venv)],
            [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(REPO)],
        ):
            done = _run(argv, env={**os.environ, "UV_LINK_MODE": "copy"})
            assert done.returncode == 0, done.stderr
        yield {"root": root, "shared": shared, "users": users, "group": group, "venv": venv}
    finally:
        for argv in reversed(made):
            _run(argv)
        shutil.rmtree(root, ignore_errors=True)


def _as(
    site: dict[str, object], user: str, *args: str, umask: int = 0o002
) -> subprocess.CompletedProcess[str]:
    root, shared = Path(str(site["root"])), Path(str(site["shared"]))
    home = root / user
    env = {
        "HOME": str(home),
        "PATH": f"{Path(str(shutil.which('uv'))).parent}:/usr/bin:/bin",
        "UV_CACHE_DIR": str(home / "uv-cache"),
        "HPCENV_HOME": str(shared / "home"),
        "HPCENV_ENVS": str(shared / "envs"),
        "HPCENV_LOCKFILES": str(shared / "lockfiles"),
        "PIP_FIND_LINKS": os.environ.get("PIP_FIND_LINKS", "/opt/wheels"),
        # this machine's CA bundle and proxy (what uv needs to reach PyPI), as given
        **{k: v for k, v in os.environ.items() if k.upper().endswith(NETWORK_VARS)},
    }
    python = Path(str(site["venv"])) / "bin" / "python"
    argv = ["setpriv", f"--reuid={user}", f"--regid={site['group']}", "--init-groups"]
    return subprocess.run(
        [*argv, str(python), "-m", "hpcenv", *args],
        env=env,
        cwd=str(home),
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=lambda: os.umask(umask),
    )


def test_two_users_of_a_group_both_build_in_one_home(site: dict[str, object]) -> None:
    a, b = site["users"]  # type: ignore[misc]
    first = _as(site, a, "build", "shared")
    assert first.returncode == 0, first.stderr
    lock = Path(str(site["shared"])) / "home" / "venvs" / "shared.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o644  # read by the group, written by a alone
    second = _as(site, b, "build", "shared")  # unchanged: a no-op, after checking the env
    assert second.returncode == 0, second.stderr
    assert "up to date" in second.stdout
    forced = _as(site, b, "build", "shared", "--force")  # b really builds: a's link switched
    assert forced.returncode == 0, forced.stderr
    again = _as(site, a, "build", "shared", "--force")  # and a again, over b's build
    assert again.returncode == 0, again.stderr
    venv = Path(str(site["shared"])) / "home" / "venvs" / "shared"
    done = _as(site, b, "probe", "imports", "--env", "shared")
    assert done.returncode == 0, done.stderr + done.stdout
    assert venv.is_symlink()


def test_a_private_build_of_another_user_is_named_with_its_owner_and_fix(
    site: dict[str, object],
) -> None:
    """Issue 24, case 9: a group member built with umask 077; the other member's run,
    probe and build got a bare "Permission denied: .../bin/python" (exit 1). Now each is
    one line naming the path, its owner and mode, and the fix (exit 2)."""
    a, b = site["users"]  # type: ignore[misc]
    private = _as(site, a, "build", "shared", "--force", umask=0o077)
    assert private.returncode == 0, private.stderr
    for args in (
        ("run", "shared", "--", "python", "-c", "pass"),
        ("probe", "imports", "--env", "shared"),
        ("build", "shared"),
    ):
        done = _as(site, b, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        err = done.stderr
        assert f"owned by {a}" in err and "umask 002" in err, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (args, err)
    # and a's next build with the group's umask serves both again
    assert _as(site, a, "build", "shared", "--force").returncode == 0
    assert _as(site, b, "run", "shared", "--", "python", "-c", "pass").returncode == 0


# --- the trust model: a group member may use your builds, never change what runs as you --


def _writable_by_others(root: Path) -> list[str]:
    bad = []
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(folder, name))
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                bad.append(os.path.join(folder, name))
    return bad


def _as_shell(site: dict[str, object], user: str, script: str) -> subprocess.CompletedProcess[str]:
    argv = ["setpriv", f"--reuid={user}", f"--regid={site['group']}", "--init-groups"]
    return _run([*argv, "/bin/sh", "-c", script])


def _python_of(site: dict[str, object], user: str, code: str) -> subprocess.CompletedProcess[str]:
    python = str(Path(str(site["venv"])) / "bin" / "python")
    shared = Path(str(site["shared"]))
    argv = ["setpriv", f"--reuid={user}", f"--regid={site['group']}", "--init-groups"]
    env = {"HPCENV_HOME": str(shared / "home"), "PATH": "/usr/bin:/bin"}
    return _run([*argv, python, "-c", code], env=env)


def test_nothing_a_build_writes_is_writable_by_the_group_under_umask_002(
    site: dict[str, object],
) -> None:
    """Builds (every directory, __pycache__ too), the kit copy, the proof record and the
    lock were group-writable under umask 002: a member could plant code that runs as you."""
    a, b = site["users"]  # type: ignore[misc]
    assert _as(site, a, "build", "shared", "--force").returncode == 0
    probe = _as(site, a, "probe", "imports", "--env", "shared")
    assert probe.returncode == 0, probe.stderr + probe.stdout
    home = Path(str(site["shared"])) / "home"
    build = (home / "venvs" / "shared").resolve()
    assert list(build.rglob("__pycache__"))  # the import check compiled bytecode
    kits = list((home / "kit").iterdir())
    record = _record(site, a)
    for root in (build, *kits, record.parent):
        assert _writable_by_others(root) == [], root
        assert not os.lstat(root).st_mode & 0o022, root
    assert stat.S_IMODE((home / "venvs").stat().st_mode) == 0o775  # containers: shared
    pycache = next(build.rglob("torch/__pycache__"))
    planted = _as_shell(site, b, f"echo x > '{pycache}/planted.pyc'")
    assert planted.returncode != 0 and not (pycache / "planted.pyc").exists()
    moved = _as_shell(site, b, f"echo x > /tmp/m-{b} && mv /tmp/m-{b} '{pycache.parent}/x.py'")
    assert moved.returncode != 0  # the rename race into a build: no way in


def _record(site: dict[str, object], user: str) -> Path:
    """``user``'s record of proofs: in their uv cache (``venv_check.proofs_path``)."""
    uid = _run(["id", "-u", user]).stdout.strip()
    return Path(str(site["root"])) / user / "uv-cache" / f"hpcenv-proofs-{uid}" / "record.txt"


def test_a_proof_record_the_group_could_write_proves_nothing(site: dict[str, object]) -> None:
    """A member added an entry to your group-writable record tying their file to the hash
    RECORD promises; the build then took their file as proven. Now such a record is read
    as empty (every file is hashed again)."""
    a, b = site["users"]  # type: ignore[misc]
    assert _as(site, a, "build", "shared", "--force").returncode == 0
    record = _record(site, a)
    code = (
        "import pathlib; from hpcenv.build import venv_check as v; "
        f"print(len(v._load_proofs(pathlib.Path({str(record)!r}))))"
    )
    assert int(_python_of(site, a, code).stdout) > 0
    record.chmod(0o664)  # as an older hpcenv left it under umask 002
    fake = os.lstat(record)
    line = f"{fake.st_dev} 4242 10 {fake.st_mtime_ns} 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU\n"
    assert _as_shell(site, b, f"echo '{line.strip()}' >> '{record}'").returncode == 0
    assert _python_of(site, a, code).stdout.strip() == "0"


def test_a_build_others_could_write_is_rebuilt_and_its_bytecode_not_carried(
    site: dict[str, object],
) -> None:
    """A .pyc planted in a group-writable __pycache__ ran on import, the no-op check said
    "up to date", and the bytecode take-over carried it into the next build."""
    a, b = site["users"]  # type: ignore[misc]
    assert _as(site, a, "build", "shared", "--force").returncode == 0
    home = Path(str(site["shared"])) / "home"
    build = (home / "venvs" / "shared").resolve()
    _run(["chmod", "-R", "g+w", str(build)])  # a build of an older hpcenv under umask 002
    pycache = next(build.rglob("torch/__pycache__"))
    pyc = next(pycache.glob("version.*.pyc"))
    swap = f"cp '{pyc}' /tmp/p-{b} && rm -f '{pyc}' && mv /tmp/p-{b} '{pyc}'"
    assert _as_shell(site, b, swap).returncode == 0  # b's file now, as b could plant it
    again = _as(site, a, "build", "shared")
    assert again.returncode == 0, again.stderr
    assert "up to date" not in again.stdout
    report = json.loads(max((home / "logs").glob("build-*.json"), key=os.path.getmtime).read_text())
    assert any(
        "could run someone else's code" in d and "writable by others" in d
        for d in report["damaged"]
    ), report["damaged"]
    new = (home / "venvs" / "shared").resolve()
    assert new != build
    owners = {p.stat().st_uid for p in new.rglob("*.pyc")}
    assert owners == {os.lstat(new).st_uid}  # nothing of b's carried over
    assert _writable_by_others(new) == []


def test_a_kit_copy_someone_appended_to_is_made_again(site: dict[str, object]) -> None:
    a, b = site["users"]  # type: ignore[misc]
    assert _as(site, a, "build", "shared").returncode == 0  # a no-op after the others
    assert _as(site, a, "probe", "imports", "--env", "shared").returncode == 0
    home = Path(str(site["shared"])) / "home"
    uid = _run(["id", "-u", a]).stdout.strip()
    kit = next(p for p in (home / "kit").iterdir() if str(p.stat().st_uid) == uid)
    _run(["chmod", "-R", "g+w", str(kit)])  # a copy of an older hpcenv under umask 002
    init = kit / "hpcenv" / "kit" / "__init__.py"
    append = f"echo 'raise SystemExit(\"planted by {b}\")' >> '{init}'"
    assert _as_shell(site, b, append).returncode == 0
    done = _as(site, a, "probe", "imports", "--env", "shared")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "planted" not in init.read_text() and _writable_by_others(kit) == []


def test_each_member_keeps_the_parsed_knowledge_in_their_own_cache(
    site: dict[str, object],
) -> None:
    """The parsed knowledge tables depend on the data files alone: each member keeps them
    in their own ``~/.cache/hpcenv`` (0755 under umask 002: theirs alone, so believed), not
    in the shared home, where only the member who made the directory could use them."""
    shared_cache = Path(str(site["shared"])) / "home" / "cache" / "knowledge"
    for user in site["users"]:  # type: ignore[attr-defined]
        done = _as(site, user, "plan", "shared", "--json")
        assert done.returncode == 0, done.stderr
        own = Path(str(site["root"])) / user / ".cache" / "hpcenv" / "knowledge"
        (entry,) = own.glob("*.marshal")
        uid = int(_run(["id", "-u", user]).stdout)
        assert entry.stat().st_uid == uid and own.stat().st_uid == uid
        assert stat.S_IMODE(entry.stat().st_mode) == 0o644
        for d in (own, own.parent, own.parent.parent):
            assert stat.S_IMODE(d.stat().st_mode) == 0o755, d
    assert not shared_cache.exists()
