"""A lock whose body was edited by hand is refused by ``lock --check``, ``build`` and
``doctor``: the header's body digest covers every line below it.

Before, only the header (inputs digest) was compared: with ``sympy`` removed from the
lock, build, doctor and check all passed while ``torch.compile`` failed in the env.
The lock used is the repository's real ``lockfiles/local-x86_64.txt``.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from hpcenv.build import lockfiles as lock
from support import REPO
from support.buildkit import hpcenv as _cli
from support.buildkit import require_uv

LOCK = REPO / "lockfiles" / f"local-{platform.machine()}.txt"


@pytest.fixture
def edited(tmp_path: Path) -> dict[str, str]:
    if not LOCK.is_file():
        pytest.skip(f"no committed lock for this arch ({LOCK.name})")
    locks = tmp_path / "lockfiles"
    locks.mkdir()
    text = LOCK.read_text()
    # drop the sympy requirement and its hash/comment lines: a hand edit
    body = re.sub(r"(?ms)^sympy==.*?(?=^\S)", "", text)
    assert body != text and "sympy==" not in body
    (locks / LOCK.name).write_text(body)
    return {"HPCENV_LOCKFILES": str(locks), "HPCENV_HOME": str(tmp_path / "home")}


def test_the_committed_lock_is_intact() -> None:
    if LOCK.is_file():
        assert lock.edited(LOCK) is None


def test_lock_check_refuses_a_hand_edited_body(edited: dict[str, str]) -> None:
    done = _cli("lock", "local", "--check", env=edited)
    assert done.returncode == 4, done.stderr
    assert "was edited after 'hpcenv lock' wrote it" in done.stderr


@pytest.mark.parametrize("command", ["build", "doctor"])
def test_build_and_doctor_refuse_a_hand_edited_body(edited: dict[str, str], command: str) -> None:
    done = _cli(command, "local", env=edited)
    assert done.returncode == 2, done.stderr
    assert "was edited after 'hpcenv lock' wrote it" in done.stderr
    assert "Traceback" not in done.stderr
    venvs = Path(edited["HPCENV_HOME"]) / "venvs"
    assert not any(p.name.startswith("local-") for p in venvs.iterdir()) if venvs.exists() else True


def test_hpcenv_lock_regenerates_it(edited: dict[str, str], tmp_path: Path) -> None:
    """The fix the message names: 'hpcenv lock local' writes a whole lock again."""
    require_uv()
    path = Path(edited["HPCENV_LOCKFILES"]) / LOCK.name
    done = _cli("lock", "local", env={**edited, "UV_CACHE_DIR": str(tmp_path / "uv")})
    assert done.returncode == 0, done.stderr
    assert "sympy==" in path.read_text() and lock.edited(path) is None
