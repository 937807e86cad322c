"""Headless Chromium (Debian's ``chromium``) opening a page hpcenv wrote: the DOM it rendered,
its console lines, and a screenshot beside the page (the HTML report's tests)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from support import require

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1200, 1800


def browser() -> str:
    require("chromium", CHROMIUM is not None, "apt-get install chromium (.ci/run installs it)")
    assert CHROMIUM
    return CHROMIUM


def _chromium(page: Path, profile: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` with its console logged to stderr (``INFO:CONSOLE``)."""
    argv = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
            "--v=0", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
            *mode, page.as_uri()]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def console_of(page: Path, scratch: Path) -> list[str]:
    """What Chromium's console said while it rendered ``page`` (one run, no screenshot)."""
    done = _chromium(page, scratch / "chromium-profile", "--dump-dom")
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def open_page(page: Path, scratch: Path) -> tuple[str, list[str]]:
    """The DOM Chromium rendered and its console lines; the screenshot is ``page``.png."""
    shot = page.with_suffix(".png")
    profile = scratch / "chromium-profile"
    done = _chromium(page, profile, f"--screenshot={shot}")
    assert shot.is_file(), done.stderr
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (WIDTH, HEIGHT)
    dumped = _chromium(page, profile, "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr
    console = [line for line in (done.stderr + dumped.stderr).splitlines() if ":CONSOLE" in line]
    return dumped.stdout, console
