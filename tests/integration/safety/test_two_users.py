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
    assert stat.S_IMODE(lock.stat().st_mode) == 0o664  # was 0644 whatever the umask
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
