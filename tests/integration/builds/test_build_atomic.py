"""A failed, killed or concurrent build never breaks the working environment.

Real builds of ``local`` (uv, CPU torch from the wheelhouse) through the real CLI in
subprocesses; the kill is a real SIGKILL of the build's process group.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcenv.build import build_lock
from support import REPO
from support.buildkit import hpcenv, require_local_build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An HPCENV_HOME with one complete build of ``local`` (the 'previous environment')."""
    require_local_build()
    root = tmp_path_factory.mktemp("safety")
    if (REPO / "lockfiles").is_dir():
        shutil.copytree(REPO / "lockfiles", root / "lockfiles")
    env = {"HPCENV_HOME": str(root / "home"), "HPCENV_LOCKFILES": str(root / "lockfiles")}
    done = hpcenv("build", "local", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return env


def venvs(env: dict[str, str]) -> Path:
    return Path(env["HPCENV_HOME"]) / "venvs"


def target(env: dict[str, str]) -> str:
    return os.readlink(venvs(env) / "local")


def imports_torch(env: dict[str, str]) -> str:
    out = subprocess.run(
        [
            str(venvs(env) / "local" / "bin" / "python"),
            "-c",
            "import torch; print(torch.__version__)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def reached(stage: str, new_logs: set[Path]) -> bool:
    """The build log shows the build at ``stage``:

    - ``venv``: ``uv venv`` of the new build directory was started;
    - ``sync``: ``uv pip sync`` started and has not finished;
    - ``import-probe``: the new environment's python runs the import check.
    """
    for log in new_logs:
        text = log.read_text()
        if stage == "venv" and " venv " in text:
            return True
        at = text.find("pip sync")
        if stage == "sync" and at >= 0 and "# exit" not in text[at:]:
            return True
        done = text.find("# exit", at) if at >= 0 else -1
        if stage == "import-probe" and done >= 0 and "-m hpcenv.kit.imports" in text[done:]:
            return True
    return False


@pytest.mark.parametrize("stage", ["venv", "sync", "import-probe"])
def test_sigkill_mid_build_leaves_previous_env_and_next_build_succeeds(
    home: dict[str, str], stage: str
) -> None:
    before = target(home)
    existing = {p.name for p in venvs(home).glob("local-*")}  # current and kept previous
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcenv", "build", "local", "--force"],
        env={**os.environ, **home},
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    logs = Path(home["HPCENV_HOME"]) / "logs"
    known = set(logs.glob("*.log"))
    try:
        deadline = time.monotonic() + 120
        new_dir = None
        while time.monotonic() < deadline and proc.poll() is None:
            if reached(stage, set(logs.glob("*.log")) - known):
                fresh = [p for p in venvs(home).glob("local-*") if p.name not in existing]
                if fresh:  # uv venv may not have made the directory yet
                    new_dir = fresh[0]
                    break
            time.sleep(0.01)
        assert new_dir is not None, f"never saw the build reach {stage}"
        os.killpg(proc.pid, signal.SIGKILL)  # uv dies with it (PDEATHSIG, command.run)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert new_dir.exists(), "a killed build leaves its directory (cleaned next time)"
    assert target(home) == before
    assert imports_torch(home) == "2.13.0+cpu"

    again = hpcenv("build", "local", "--force", "--json", env=home)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert new_dir.name in report["leftovers_removed"]
    assert not new_dir.exists()
    assert target(home) != before
    assert imports_torch(home) == "2.13.0+cpu"
    names = sorted(p.name for p in venvs(home).iterdir())
    builds = [n for n in names if n.startswith("local-") and not n.endswith(".lock")]
    assert builds == sorted([before, target(home)])
    assert not [n for n in names if ".tmp-" in n]


def test_second_build_gets_busy_with_the_holder(home: dict[str, str]) -> None:
    before = target(home)
    with build_lock.hold(venvs(home) / "local.lock", timeout=5, what="test holder"):
        busy = hpcenv("build", "local", "--force", "--wait", "1", env=home)
    assert busy.returncode == 6, busy.stderr
    assert f"pid {os.getpid()}" in busy.stderr and "test holder" in busy.stderr
    assert busy.stderr.startswith("hpcenv: error:") and "Traceback" not in busy.stderr
    assert target(home) == before


def test_two_concurrent_builds_one_waits_for_the_other(home: dict[str, str]) -> None:
    """Both forced builds run to completion one after the other, never interleaved."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hpcenv",
                "build",
                "local",
                "--force",
                "--json",
                "--wait",
                "300",
            ],
            env={**os.environ, **home},
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for _ in range(2)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    spans = sorted((r["locked_at"], r["finished_at"]) for r in reports)
    assert spans[0][1] <= spans[1][0], f"builds overlapped: {spans}"
    assert imports_torch(home) == "2.13.0+cpu"


def test_unreachable_index_fails_clearly_and_keeps_env(home: dict[str, str]) -> None:
    before = target(home)
    env = {
        **home,
        "PIP_FIND_LINKS": "",  # no wheelhouse: torch must come from the (dead) index
        "HPCENV_TORCH_INDEX_URL": "http://127.0.0.1:9/whl",
    }
    failed = hpcenv("build", "local", env=env)
    assert failed.returncode == 4, failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcenv: error:"), failed.stderr
    assert "127.0.0.1:9" in failed.stderr or "index" in failed.stderr
    assert target(home) == before
    assert imports_torch(home) == "2.13.0+cpu"


def test_build_log_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Command output captured into a build log never carries a secret's value."""
    from hpcenv.tools import command
    from hpcenv.utils import fsio

    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token_123")
    log_path = tmp_path / "build.log"
    log = fsio.MaskedLog(log_path)  # the build log's writer
    command.run(["sh", "-c", 'echo "token is $HF_TOKEN"'], log=log)  # type: ignore[arg-type]
    log.close()
    text = log_path.read_text()
    assert "hf_not_a_real_token_123" not in text
    assert "token is REDACTED" in text


def test_build_for_another_arch_is_refused(hpcenv_home: Path) -> None:
    import platform as platform_mod

    from hpcenv.build import builder as build
    from hpcenv.models.facts import Facts
    from hpcenv.utils.errors import BadInput
    from support.buildkit import stand_in_plan

    other = "aarch64" if platform_mod.machine() == "x86_64" else "x86_64"
    with pytest.raises(BadInput, match=f"planned for {other}.*hpcenv lock standin --declared"):
        build.build(stand_in_plan("http://127.0.0.1:9", arch=other), Facts(arch=other))
    assert not (hpcenv_home / "venvs").exists()
