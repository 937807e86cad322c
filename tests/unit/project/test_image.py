"""``podman image mount`` in ``hpcenv audit podman:IMAGE`` (``project/image.opened``) is
undone on every way out: an error, an empty answer, Ctrl-C while podman mounts.

The podman here is a stand-in (a script on PATH): it stands in for a podman whose
``image mount`` is interrupted by the user's Ctrl-C after podman has mounted the image
(a moment the real one cannot be made to hit on purpose); it logs each call's argv. The
real podman's mount and unmount are tested in
tests/integration/projects/test_audit_image.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hpcenv.project import image
from hpcenv.utils.errors import BadInput, Interrupted


def _podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_mount: str) -> Path:
    """A stand-in podman on PATH; ``on_mount``: sh run for ``podman image mount``."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    script = bin_dir / "podman"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        f'if [ "$1 $2" = "image mount" ]; then {on_mount}; fi\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_ctrl_c_while_podman_mounts_still_unmounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mounted, then the user's Ctrl-C reaches hpcenv (SIGINT to the parent) before the answer
    log = _podman(tmp_path, monkeypatch, f"echo {tmp_path}; sleep 1; kill -INT $PPID; sleep 5")
    with pytest.raises((Interrupted, KeyboardInterrupt)), image.opened("podman:img"):
        pytest.fail("the audit must not start")
    assert log.read_text().splitlines() == ["image mount -- img", "image unmount -- img"]


def test_a_mount_that_answers_no_directory_is_refused_and_unmounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty answer is not the working directory: nothing outside the image is read."""
    log = _podman(tmp_path, monkeypatch, "echo")
    with pytest.raises(BadInput, match="podman image mount gave no directory"), image.opened(
        "podman:img"
    ):
        pytest.fail("the audit must not start")
    assert log.read_text().splitlines() == ["image mount -- img", "image unmount -- img"]
