"""Build speed of the ``local`` profile against baselines, in one run; prints JSON.

- ``hpcenv``: ``hpcenv build local --force`` into a fresh HPCENV_HOME with a warm uv
  cache (the norm: the CPU torch wheel and PyPI packages already unpacked once);
- ``uv_bare``: ``uv venv && uv pip sync lockfiles/local-x86_64.txt`` with the same
  find-links (what the build does minus planning, probing, switching, reporting);
- ``uv_bare_plus_import``: the same plus importing torch, numpy and ray once, which
  is the check the build adds (it is most of the difference);
- ``venv_pip``: ``python -m venv && pip install -r <same lock>`` (PIP_FIND_LINKS);
  slow, so ``--pip-runs`` (default 1) runs;
- ``noop``: ``hpcenv build local`` when nothing changed (whole CLI process);
- ``wheel_cache``: a gcc-built stand-in C extension through
  ``flashattn_build.build_cached_wheel``: miss (build) vs hit.

``hpcenv``, ``uv_bare`` and ``uv_bare_plus_import`` run interleaved, one of each per round
(``--runs`` rounds, default 3), so a machine whose speed drifts moves all three; medians,
with min/max in ``spread`` and the round-by-round ratio of the build to install + import
(``ratio_wall``, ``ratio_cpu``: min/median/max). Wall seconds and the CPU seconds of the
children (user + system). hpcenv's bytecode is compiled first and nothing runs under
PYTHONDONTWRITEBYTECODE, as an installed package and a user's Python have it: the build's
import check writes the bytecode of what it imports, and the baseline's import does too.
With ``--baseline-rev REV`` (``""`` for none) the build also runs from that revision's
``src`` (``git archive``, ``PYTHONPATH``) in the same rounds: ``before``. Usage:
``python bench/bench_build.py [--runs N] [--baseline-rev REV]``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from _timing import export_rev

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "lockfiles" / "local-x86_64.txt"
WHEELHOUSE = "/opt/wheels"


def timed(argv: list[str], **kw: object) -> float:
    start = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]
    return time.monotonic() - start


def children_cpu() -> float:
    """User + system seconds of every finished child so far (``os.times``)."""
    t = os.times()
    return t.children_user + t.children_system


def uv() -> str:
    found = shutil.which("uv")
    if not found:
        sys.exit("uv not found")
    return found


def hpcenv_build(tmp: Path, *, fresh: bool, force: bool, src: Path | None = None) -> float:
    """``src``: run hpcenv from that source tree (a baseline revision's)."""
    home = tmp / "home"
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "HPCENV_HOME": str(home), "HPCENV_LOCKFILES": str(tmp / "lockfiles")}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    argv = [sys.executable, "-m", "hpcenv", "build", "local"] + (["--force"] if force else [])
    return timed(argv, env=env, cwd=REPO)


def uv_bare(tmp: Path, *, probe: bool) -> float:
    venv = tmp / "bare"
    shutil.rmtree(venv, ignore_errors=True)
    start = time.monotonic()
    subprocess.run([uv(), "venv", "-q", "--python", "3.11", str(venv)], check=True)
    subprocess.run(
        [
            uv(),
            "pip",
            "sync",
            "-q",
            str(LOCK),
            "--python",
            str(venv / "bin" / "python"),
            "--find-links",
            WHEELHOUSE,
        ],
        check=True,
    )
    if probe:
        subprocess.run([str(venv / "bin" / "python"), "-c", "import torch, numpy, ray"], check=True)
    return time.monotonic() - start


def venv_pip(tmp: Path) -> float:
    venv = tmp / "pipvenv"
    shutil.rmtree(venv, ignore_errors=True)
    python = shutil.which("python3.11") or sys.executable
    start = time.monotonic()
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-r", str(LOCK)],
        check=True,
        env={**os.environ, "PIP_FIND_LINKS": WHEELHOUSE},
    )
    return time.monotonic() - start


def wheel_cache(tmp: Path) -> dict[str, float]:
    from hpcenv.build import flashattn as flashattn_build
    from hpcenv.tools import uv as uvmod

    os.environ["HPCENV_CACHE"] = str(tmp / "cache")
    src = tmp / "standin-ext"
    (src / "standin_ext").mkdir(parents=True, exist_ok=True)
    (src / "standin_ext" / "__init__.py").write_text("from ._core import answer\n")
    (src / "core.c").write_text(
        "#include <Python.h>\n"
        "static PyObject *answer(PyObject *s, PyObject *a) { return PyLong_FromLong(42); }\n"
        'static PyMethodDef m[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL}};\n'
        'static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, m};\n'
        "PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&d); }\n"
    )
    (src / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        'setup(name="standin-ext", version="1.0", packages=["standin_ext"],\n'
        '      ext_modules=[Extension("standin_ext._core", ["core.c"])])\n'
    )
    venv = tmp / "extvenv"
    uvmod.venv(venv, "3.11")
    key = {"torch": "2.13.0+cpu", "python_tag": "cp311", "arch": "x86_64", "cuda_archs": "90"}

    def build(out: Path) -> None:
        uvmod.build_wheel(str(src), out, python=venv / "bin" / "python")

    miss = flashattn_build.build_cached_wheel("standin-ext", "1.0", key, build)
    hit = flashattn_build.build_cached_wheel("standin-ext", "1.0", key, build)
    assert not miss.hit and hit.hit
    return {
        "miss_s": round(miss.seconds, 3),
        "hit_s": round(hit.seconds, 4),
        "speedup": round(miss.seconds / max(hit.seconds, 1e-6), 1),
    }


def spread(samples: list[float]) -> dict[str, float]:
    med = statistics.median(samples)
    return {"min": min(samples), "median": med, "max": max(samples), "runs": len(samples)}


def rounds(tmp: Path, runs: int, before: Path | None) -> dict[str, list[float]]:
    """``runs`` interleaved rounds: wall and CPU seconds of each side, by name."""
    out: dict[str, list[float]] = {}

    def one(name: str, fn: Callable[[], float]) -> None:
        cpu = children_cpu()
        out.setdefault(name, []).append(fn())
        out.setdefault(f"{name}_cpu", []).append(children_cpu() - cpu)

    for _ in range(runs):
        one("build", lambda: hpcenv_build(tmp, fresh=True, force=True))
        one("uv_bare_plus_import", lambda: uv_bare(tmp, probe=True))
        one("uv_bare", lambda: uv_bare(tmp, probe=False))
        if before is not None:
            one("before", partial(hpcenv_build, tmp, fresh=True, force=True, src=before))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pip-runs", type=int, default=1)
    parser.add_argument("--baseline-rev", default="")
    args = parser.parse_args()
    if not LOCK.is_file():
        sys.exit(f"{LOCK} missing: run 'hpcenv lock local' first")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # both sides write bytecode
    compileall.compile_dir(str(REPO / "src" / "hpcenv"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as t:
        tmp = Path(t)
        before: Path | None = None
        if args.baseline_rev:
            before = export_rev(args.baseline_rev, tmp / "before")
            compileall.compile_dir(str(before), quiet=1)
        shutil.copytree(REPO / "lockfiles", tmp / "lockfiles")
        hpcenv_build(tmp, fresh=True, force=True)  # warm-up: uv cache, proofs, bytecode
        uv_bare(tmp, probe=False)
        got = rounds(tmp, args.runs, before)
        build_s, bare_s, bare_probe_s = got["build"], got["uv_bare"], got["uv_bare_plus_import"]
        cpu = {"build": got["build_cpu"], "uv_bare_plus_import": got["uv_bare_plus_import_cpu"]}
        hpcenv_build(tmp, fresh=False, force=False)
        noop_s = [hpcenv_build(tmp, fresh=False, force=False) for _ in range(max(args.runs, 5))]
        pip_s = [venv_pip(tmp) for _ in range(args.pip_runs)]
        cache = wheel_cache(tmp)
    med = statistics.median
    result = {
        "runs": args.runs,
        "pip_runs": args.pip_runs,
        "cpus": os.cpu_count(),
        "hpcenv_build_s": round(med(build_s), 3),
        "uv_bare_s": round(med(bare_s), 3),
        "uv_bare_plus_import_s": round(med(bare_probe_s), 3),
        "venv_pip_s": round(med(pip_s), 3),
        "noop_s": round(med(noop_s), 3),
        "ratio_build_vs_uv_bare": round(med(build_s) / med(bare_s), 2),
        "ratio_build_vs_uv_bare_plus_import": round(med(build_s) / med(bare_probe_s), 2),
        "speedup_vs_venv_pip": round(med(pip_s) / med(build_s), 1),
        "wheel_cache": cache,
        "spread": {
            name: spread(v)
            for name, v in (
                ("build", build_s),
                ("uv_bare", bare_s),
                ("uv_bare_plus_import", bare_probe_s),
            )
        },
        "ratio_build_vs_uv_bare_plus_import_pairs": sorted(
            a / b for a, b in zip(build_s, bare_probe_s, strict=True)
        ),
        "ratio_wall": spread([a / b for a, b in zip(build_s, bare_probe_s, strict=True)]),
        "ratio_cpu": spread(
            [a / b for a, b in zip(cpu["build"], cpu["uv_bare_plus_import"], strict=True)]
        ),
        "cpu_s": {name: spread(v) for name, v in cpu.items()},
        "ratio_cpu_build_vs_uv_bare_plus_import": round(
            med(cpu["build"]) / med(cpu["uv_bare_plus_import"]), 2
        ),
        "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()),
        "samples": {
            "build": build_s,
            "uv_bare": bare_s,
            "uv_bare_plus_import": bare_probe_s,
            "venv_pip": pip_s,
            "noop": noop_s,
        },
    }
    if before is not None:
        b_wall, b_cpu = got["before"], got["before_cpu"]
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", args.baseline_rev],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        result["before"] = {
            "baseline_rev": rev,
            "build_s": spread(b_wall),
            "cpu_s": spread(b_cpu),
            "ratio_wall": spread([a / b for a, b in zip(b_wall, bare_probe_s, strict=True)]),
            "ratio_cpu": spread(
                [a / b for a, b in zip(b_cpu, cpu["uv_bare_plus_import"], strict=True)]
            ),
            "ratio_after_vs_before": spread([a / b for a, b in zip(build_s, b_wall, strict=True)]),
        }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
