"""Where people wait: each quick command against its baseline, interleaved in one run; prints JSON.

Pairs (A against B, run A B A B ... so that a machine whose speed drifts moves both):

- ``help``: ``hpcenv --help`` against ``python -c pass`` (goal: within 8x);
- ``version``: ``hpcenv --version`` against ``python -c pass``;
- ``facts``: ``hpcenv facts --json`` against ``python -c pass`` (for scale);
- ``plan``: ``hpcenv plan local --json`` against ``hpcenv facts --json`` (goal: within 2x);
- ``resolve``: ``hpcenv resolve --torch ==2.9.1 --offline --json`` against facts (2x);
- ``audit_<lock>``: ``hpcenv audit uv.lock --facts F --json`` of real locks
  (tests/data/projects: prime-rl, open-instruct; GH200 facts) against ``uv export --frozen``
  in that project (goal: within 5x), and against facts (the 2x goal).

Every figure is a whole process, wall and CPU (user + system of the child, from
``wait4``), min/median/max over ``--runs`` rounds after one warm-up round (which fills
the knowledge and lock caches, as any second run finds them). Ratios: of the medians,
and min/median/max of the round-by-round ratio. hpcenv's bytecode is compiled first
(``compileall``), as an installed package has it. With ``--baseline-rev REV`` (default
``main``; ``""`` for none) each hpcenv command also runs from that revision's ``src``
(``git archive``, ``PYTHONPATH``; same interpreter and dependencies) in the same rounds:
``before_wall_s`` and ``ratio_after_vs_before``. Usage:
``python bench/bench_startup.py [--runs N] [--baseline-rev REV] [--only PREFIX]
[--fresh-home]`` (``--only audit``: the audit pairs alone; ``--fresh-home``: every run in a
new, empty ``HPCENV_HOME``, as a first command in a new home, whose knowledge and lock
caches are the user's own, ``$XDG_CACHE_HOME/hpcenv``).
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
from datetime import datetime, timezone
from pathlib import Path

from _timing import export_rev

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
GH200 = DATA / "facts" / "gh200-isambard.json"
LOCKS = ("prime-rl", "open-instruct")


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of ``argv``; exits the bench when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode not in (0, 3):  # audit: 3 is "cannot run here", a verdict
        sys.exit(f"{argv}: exit {proc.returncode}: {err[-2000:].decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def spread(samples: list[float]) -> dict[str, float]:
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "max": max(samples),
        "runs": len(samples),
    }


def cases(py: str, uv: str) -> dict[str, tuple[list[str], list[str], Path]]:
    """name -> (A, B, working directory of both)."""
    hpcenv = [py, "-m", "hpcenv"]
    bare = [py, "-c", "pass"]
    facts = [*hpcenv, "facts", "--json"]
    out: dict[str, tuple[list[str], list[str], Path]] = {
        "help": ([*hpcenv, "--help"], bare, REPO),
        "version": ([*hpcenv, "--version"], bare, REPO),
        "facts": (facts, bare, REPO),
        "plan": ([*hpcenv, "plan", "local", "--json"], facts, REPO),
        "resolve": ([*hpcenv, "resolve", "--torch", "==2.9.1", "--offline", "--json"], facts, REPO),
    }
    for name in LOCKS:
        project = DATA / "projects" / name
        audit = [*hpcenv, "audit", str(project / "uv.lock"), "--facts", str(GH200), "--json"]
        out[f"audit_{name}"] = (audit, [uv, "export", "--frozen", "--quiet"], project)
        out[f"audit_{name}_vs_facts"] = (audit, facts, project)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--baseline-rev", default="main")
    ap.add_argument(
        "--only", default="", metavar="PREFIX", help="only the pairs whose name starts so"
    )
    ap.add_argument("--fresh-home", action="store_true", help="each run in a new HPCENV_HOME")
    args = ap.parse_args()
    uv = shutil.which("uv")
    if not uv:
        sys.exit("uv not found")
    compileall.compile_dir(str(REPO / "src" / "hpcenv"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        env = {**os.environ, "HPCENV_HOME": str(Path(tmp) / "home")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        before_env = None
        if args.baseline_rev:
            before_src = export_rev(args.baseline_rev, Path(tmp) / "before")
            compileall.compile_dir(str(before_src), quiet=1)
            before_env = {**env, "PYTHONPATH": str(before_src)}
        todo = {k: v for k, v in cases(sys.executable, uv).items() if k.startswith(args.only)}
        sides = (("a", 0, env), ("b", 1, env))
        if before_env:
            sides += (("before", 0, before_env),)
        raw: dict[str, dict[str, list[float]]] = {name: {} for name in todo}
        homes = iter(range(10**6))
        for warm in (True, *([False] * args.runs)):  # warm-up: caches filled, page cache
            for name, (a, b, cwd) in todo.items():
                for side, which, side_env in sides:
                    if side == "before" and name.endswith("_vs_facts"):
                        continue  # the same command as audit_<lock>'s
                    run_env = side_env
                    if args.fresh_home:
                        run_env = {**side_env, "HPCENV_HOME": f"{tmp}/home-{next(homes)}"}
                    wall, cpu = run_once((a, b)[which], run_env, cwd)
                    if not warm:
                        raw[name].setdefault(f"{side}_wall", []).append(wall)
                        raw[name].setdefault(f"{side}_cpu", []).append(cpu)
    out: dict[str, object] = {}
    for name, (a, b, _) in todo.items():
        r = raw[name]
        out[name] = {
            "a": " ".join(Path(a[0]).name if i == 0 else x for i, x in enumerate(a)),
            "b": " ".join(Path(b[0]).name if i == 0 else x for i, x in enumerate(b)),
            "a_wall_s": spread(r["a_wall"]),
            "b_wall_s": spread(r["b_wall"]),
            "a_cpu_s": spread(r["a_cpu"]),
            "b_cpu_s": spread(r["b_cpu"]),
            "ratio_wall": spread([x / y for x, y in zip(r["a_wall"], r["b_wall"], strict=True)]),
            "ratio_cpu": spread([x / y for x, y in zip(r["a_cpu"], r["b_cpu"], strict=True)]),
        }
        if "before_wall" in r:
            out[name] |= {  # type: ignore[operator]
                "before_wall_s": spread(r["before_wall"]),
                "before_cpu_s": spread(r["before_cpu"]),
                "ratio_after_vs_before": spread(
                    [x / y for x, y in zip(r["a_wall"], r["before_wall"], strict=True)]
                ),
            }
    out["baseline_rev"] = args.baseline_rev
    out["fresh_home"] = args.fresh_home
    out["measured"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out["load_average"] = list(os.getloadavg())
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
