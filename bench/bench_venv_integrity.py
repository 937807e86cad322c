"""What issue 24's stronger environment checks cost, against the checks they replace, in
one run (interleaved; min/median/max). Prints JSON.

- ``noop_check``: the no-op's check of a built ``local`` environment, in-process: the
  file list compared (``venv_check.tree_changes``) plus the version check, against the
  former RECORD presence/size walk (``venv_check.damage(records=True)``), interleaved;
- ``noop_cli``: ``hpcenv build local`` when nothing changed, the whole process (goal
  < 1 s);
- ``link``: a fresh venv filled from uv's warm cache with the lock of ``local``:
  ``--link-mode hardlink`` then ``venv_check.protect`` (what builds do where the
  filesystem has no reflinks) against plain ``hardlink`` (uv's fallback before) and
  ``--link-mode copy`` (nothing shared, every byte written), interleaved;
- ``verify``: every installed file against its RECORD sha256 (the new ``verify``
  step of a real build).

Usage: ``python bench/bench_venv_integrity.py [--runs N]`` (needs the CPU torch wheel).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import summarize

REPO = Path(__file__).resolve().parents[1]


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hpcenv-bench-integrity-"))
    env = {**os.environ, "HPCENV_HOME": str(work / "home"), "HPCENV_LOCKFILES": str(work / "locks")}
    shutil.copytree(REPO / "lockfiles", work / "locks")
    hpcenv = [sys.executable, "-m", "hpcenv"]
    subprocess.run([*hpcenv, "build", "local"], env=env, check=True, capture_output=True)
    os.environ.update(env)
    from hpcenv.build import venv_check
    from hpcenv.tools import uv

    venv = (work / "home" / "venvs" / "local").resolve()
    old, new = [], []
    for _ in range(args.runs * 2):
        old.append(_timed(lambda: venv_check.damage(venv, {}, records=True)))
        new.append(
            _timed(
                lambda: (venv_check.tree_changes(venv), venv_check.damage(venv, {}, records=False))
            )
        )
    cli = [
        _timed(
            lambda: subprocess.run(
                [*hpcenv, "build", "local"], env=env, check=True, capture_output=True
            )
        )
        for _ in range(args.runs)
    ]
    lock = work / "locks" / "local-x86_64.txt"
    wheels = os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()
    links = [a for w in wheels for a in ("--find-links", w)]
    modes: dict[str, list[float]] = {"hardlink": [], "hardlink+protect": [], "copy": []}
    python = str(work / "v" / "bin" / "python")
    for _ in range(args.runs):
        for mode, samples in modes.items():
            shutil.rmtree(work / "v", ignore_errors=True)
            subprocess.run(
                [*uv.uv_argv(), "venv", "-q", "--python", "3.11", str(work / "v")], check=True
            )
            link = mode.split("+")[0]
            argv = [
                *uv.uv_argv(),
                "pip",
                "sync",
                "-q",
                str(lock),
                "--python",
                python,
                "--link-mode",
                link,
                *links,
            ]
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            if mode.endswith("+protect"):
                venv_check.protect(work / "v")
            samples.append(time.perf_counter() - start)
    verify = [_timed(lambda: venv_check.prove(venv)) for _ in range(args.runs)]
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    out = {
        "venv_files": len(venv_check.tree(venv)),
        "venv_bytes": size,
        "noop_check_new": summarize(new),
        "noop_check_old": summarize(old),
        "noop_cli": summarize(cli),
        "link_copy": summarize(modes["copy"]),
        "link_hardlink": summarize(modes["hardlink"]),
        "link_hardlink_protect": summarize(modes["hardlink+protect"]),
        "verify": summarize(verify),
    }
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
