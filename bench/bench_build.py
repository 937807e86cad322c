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
with min/max in ``spread`` and the round-by-round ratio of the build to install + import.
Wall seconds and the CPU seconds of the children (user + system). Usage:
``python bench/bench_build.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

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


def hpcenv_build(tmp: Path, *, fresh: bool, force: bool) -> float:
    home = tmp / "home"
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "HPCENV_HOME": str(home), "HPCENV_LOCKFILES": str(tmp / "lockfiles")}
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pip-runs", type=int, default=1)
    args = parser.parse_args()
    if not LOCK.is_file():
        sys.exit(f"{LOCK} missing: run 'hpcenv lock local' first")
    with tempfile.TemporaryDirectory(prefix="bench-build-") as t:
        tmp = Path(t)
        shutil.copytree(REPO / "lockfiles", tmp / "lockfiles")
        hpcenv_build(tmp, fresh=True, force=True)  # warm-up: uv cache and bytecode
        uv_bare(tmp, probe=False)
        build_s: list[float] = []
        bare_s: list[float] = []
        bare_probe_s: list[float] = []
        cpu: dict[str, list[float]] = {"build": [], "uv_bare_plus_import": []}
        for _ in range(args.runs):  # interleaved rounds
            before = children_cpu()
            build_s.append(hpcenv_build(tmp, fresh=True, force=True))
            middle = children_cpu()
            bare_probe_s.append(uv_bare(tmp, probe=True))
            cpu["build"].append(middle - before)
            cpu["uv_bare_plus_import"].append(children_cpu() - middle)
            bare_s.append(uv_bare(tmp, probe=False))
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
            name: {"min": min(v), "median": med(v), "max": max(v)}
            for name, v in (
                ("build", build_s),
                ("uv_bare", bare_s),
                ("uv_bare_plus_import", bare_probe_s),
            )
        },
        "ratio_build_vs_uv_bare_plus_import_pairs": sorted(
            a / b for a, b in zip(build_s, bare_probe_s, strict=True)
        ),
        "cpu_s": {
            name: {"min": min(v), "median": med(v), "max": max(v)} for name, v in cpu.items()
        },
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
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
