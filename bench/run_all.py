"""Run every benchmark in one go and write ``bench/results.json`` and ``bench/RESULTS.md``
(docs/guide.md shows that table). ``nox -s bench`` runs this.

Each figure is a median of several runs with its baseline measured in the same run
(see each script's docstring). Steps: build ``local`` into a private HPCENV_HOME
(warm uv cache), then the quick commands against their baselines (``bench_startup.py``:
``--help``, ``plan``, ``resolve``, ``audit`` of real locks; ``--startup-only`` measures just
these and merges them into results.json), facts, build (``bench_build.py``: the first
build against install + import; ``--build-only`` measures just that and merges it), a
project build
(``bench_project.py``), allreduce,
the local probe suite and the doctor,
the GPU-code reader against cuobjdump and the audit of a CUDA torch venv
(``bench_archs.py``; a 4.5 GB venv and a 470 MB library fetched once into
``~/.cache/hpcenv-tests``), with ``--slurm`` the probe-nccl job on a private local SLURM
(about 1.5 min), with ``--pairs`` the bad-node finder on a private 3-node SLURM (root;
about 1 min a run), and with ``--gate`` the gate of ``hpcenv sbatch -- CMD`` jobs (seconds
from job start to CMD start, with and without it; ``bench_gate.py``, a few minutes), and
with ``--survive`` the hang watchdog's CPU on a job that never hangs (``bench_watchdog.py``)
and the bad-node requeue on a private 4-node SLURM (``bench_requeue.py``; root, ~10 min).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import time_command

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def run_json(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    print(f"bench: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    out = subprocess.run(argv, env=env, cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def median_wall(argv: list[str], env: dict[str, str], runs: int) -> dict[str, Any]:
    print(f"bench: {' '.join(argv[1:])} x{runs}", file=sys.stderr, flush=True)
    return time_command(argv, runs=runs, env=env, warmup=0)


def row(what: str, value: str, baseline: str, target: str, met: bool | None) -> str:
    mark = "n/a" if met is None else ("met" if met else "**missed**")
    return f"| {what} | {value} | {baseline} | {target} | {mark} |"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (facts: 5x this)")
    ap.add_argument("--slurm", action="store_true", help="also time probe-nccl on local SLURM")
    ap.add_argument(
        "--pairs", action="store_true", help="also time the bad-node finder on 3 nodes (root)"
    )
    ap.add_argument(
        "--gate", action="store_true", help="also time the gate of 'sbatch -- CMD' jobs (SLURM)"
    )
    ap.add_argument(
        "--survive",
        action="store_true",
        help="also measure the hang watchdog and the bad-node requeue (4-node SLURM, root)",
    )
    ap.add_argument(
        "--startup-only",
        action="store_true",
        help="only measure the quick commands (bench_startup.py), merged into results.json",
    )
    ap.add_argument(
        "--build-only",
        action="store_true",
        help="only measure the first build against install + import (bench_build.py), "
        "merged into results.json",
    )
    ap.add_argument(
        "--startup-baseline",
        default="main",
        metavar="REV",
        help="the revision the quick commands and the first build are also timed at "
        "(default main; '' for none)",
    )
    ap.add_argument(
        "--render",
        action="store_true",
        help="only rewrite RESULTS.md from results.json (no measuring)",
    )
    ap.add_argument(
        "--profile-init",
        action="store_true",
        help="also time 'hpcenv profile init' on local SLURM with GRES and Lmod",
    )
    return ap


def main() -> int:
    args = _parser().parse_args()
    if args.render:
        results = json.loads((BENCH / "results.json").read_text())
        (BENCH / "RESULTS.md").write_text(render(results))
        update_readme(render(results))
        print((BENCH / "RESULTS.md").read_text())
        return 0
    py = sys.executable
    startup = [py, str(BENCH / "bench_startup.py"), "--runs", str(max(4 * args.runs, 11)),
               "--baseline-rev", args.startup_baseline]  # fmt: skip
    if args.startup_only:
        results = json.loads((BENCH / "results.json").read_text())
        results["startup"] = run_json(startup, dict(os.environ))
        return _write(results)
    build = [py, str(BENCH / "bench_build.py"), "--runs", str(args.runs)]
    build += ["--baseline-rev", args.startup_baseline]
    if args.build_only:
        results = json.loads((BENCH / "results.json").read_text())
        results["build"] = run_json(build, dict(os.environ))
        return _write(results)
    home = Path(tempfile.mkdtemp(prefix="hpcenv-bench-"))
    env = {**os.environ, "HPCENV_HOME": str(home)}
    hpcenv = [py, "-m", "hpcenv"]
    subprocess.run([*hpcenv, "build", "local"], env=env, cwd=REPO, check=True, capture_output=True)
    venv_py = str(home / "venvs" / "local" / "bin" / "python")

    results: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"{platform.python_implementation()} {platform.python_version()}, no GPU",
    }
    results["startup"] = run_json(startup, env)
    results["facts"] = run_json(
        [
            py,
            str(BENCH / "bench_facts.py"),
            "--runs",
            str(5 * args.runs),
            "--torch-python",
            venv_py,
        ],
        env,
    )
    results["build"] = run_json(build, env)
    results["project"] = run_json(
        [py, str(BENCH / "bench_project.py"), "--runs", str(args.runs)], env
    )
    results["audit_handwritten"] = run_json(
        [py, str(BENCH / "bench_audit_requirements.py"), "--runs", str(max(args.runs, 5))], env
    )
    results["project_requirements"] = run_json(
        [py, str(BENCH / "bench_project_requirements.py"), "--runs", str(args.runs)], env
    )
    results["allreduce"] = run_json(
        [
            py,
            str(BENCH / "bench_allreduce.py"),
            "--python",
            venv_py,
            "--runs",
            str(max(args.runs, 5)),
        ],
        env,
    )
    results["probe_suite"] = median_wall([*hpcenv, "probe", "--env", "local"], env, args.runs)
    results["doctor"] = median_wall([*hpcenv, "doctor", "local"], env, args.runs)
    results["archs"] = run_json(  # downloads its artifacts once (tests/support/cuda_artifacts.py)
        [py, str(BENCH / "bench_archs.py"), "--runs", str(max(args.runs, 5))], env
    )
    if args.slurm:
        results["slurm"] = run_json(
            [py, str(BENCH / "bench_slurm.py"), "--runs", str(args.runs)], env
        )
    if args.pairs:
        results["pairs"] = run_json(
            [py, str(BENCH / "bench_pairs.py"), "--python", venv_py, "--runs", str(args.runs)],
            env,
        )
    if args.gate:
        gate = [py, str(BENCH / "bench_gate.py"), "--runs", str(args.runs)]
        results["gate"] = run_json(gate, env)
    if args.profile_init:
        init = [py, str(BENCH / "bench_profile_init.py"), "--runs", str(max(args.runs, 5))]
        results["profile_init"] = run_json(init, env)
    if args.survive:
        results["watchdog"] = run_json(
            [py, str(BENCH / "bench_watchdog.py"), "--runs", str(args.runs)], env
        )
        requeue = [
            py,
            str(BENCH / "bench_requeue.py"),
            "--runs",
            str(args.runs),
            "--venv",
            str(Path(venv_py).parent.parent),
        ]
        results["requeue"] = run_json(requeue, env)
    return _write(results)


def _write(results: dict[str, Any]) -> int:
    (BENCH / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (BENCH / "RESULTS.md").write_text(render(results))
    update_readme(render(results))
    print((BENCH / "RESULTS.md").read_text())
    return 0


def update_readme(table: str) -> None:
    """Put the table between docs/guide.md's bench markers (generated, not edited)."""
    readme = REPO / "docs" / "guide.md"
    text = readme.read_text()
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        readme.write_text(f"{head}{start}\n{table}{end}{rest.split(end, 1)[1]}")


#: bench_startup's pairs: (key, what A is, the goal as a ratio of the medians or None).
_STARTUP = (
    ("help", "`hpcenv --help`", 8.0),
    ("version", "`hpcenv --version`", 8.0),
    ("facts", "`hpcenv facts --json`", None),
    ("plan", "`hpcenv plan local --json`", 2.0),
    ("resolve", "`hpcenv resolve --torch ==2.9.1 --offline --json`", 2.0),
    ("audit_prime-rl", "`hpcenv audit uv.lock --json` (prime-rl's, GH200 facts), warm", 5.0),
    ("audit_prime-rl_vs_facts", "... same", 2.0),
    ("audit_open-instruct", "`hpcenv audit uv.lock --json` (open-instruct's), warm", 5.0),
    ("audit_open-instruct_vs_facts", "... same", 2.0),
)


def _baseline_name(argv: str) -> str:
    if argv.endswith("-c pass"):
        return "`python -c pass`"
    if " facts --json" in argv:
        return "`hpcenv facts --json`"
    return "`uv export --frozen`"


def _startup_rows(r: dict[str, Any]) -> list[str]:
    """``bench_startup.py``: each quick command against its baseline, interleaved."""
    if "startup" not in r:
        return []
    s = r["startup"]
    load = ", ".join(f"{x:.1f}" for x in s.get("load_average", []))
    lines = []
    for key, what, goal in _STARTUP:
        if key not in s:
            continue
        c = s[key]
        a, b, ratio = c["a_wall_s"], c["b_wall_s"], c["ratio_wall"]
        before = ""
        if "before_wall_s" in c:
            before = (
                f"; `{s['baseline_rev'][:10]}` (before this work) "
                f"{c['before_wall_s']['median']:.3f} s, now "
                f"{c['ratio_after_vs_before']['median']:.2f}x of it"
            )
        lines.append(
            row(
                what,
                f"{a['median']:.3f} s (min {a['min']:.3f}, max {a['max']:.3f}; "
                f"CPU {c['a_cpu_s']['median']:.3f} s{before})",
                f"{_baseline_name(c['b'])} {b['median']:.3f} s: {ratio['median']:.2f}x "
                f"(pairs {ratio['min']:.2f}-{ratio['max']:.2f}; CPU "
                f"{c['ratio_cpu']['median']:.2f}x)",
                f"<= {goal:g}x" if goal else "-",
                ratio["median"] <= goal if goal else None,
            )
        )
    if lines:
        lines[0] = lines[0].replace(
            "`hpcenv --help`",
            f"`hpcenv --help` (quick commands measured {s['measured'][:10]}, "
            f"{c['a_wall_s']['runs']} interleaved rounds, load average {load})",
            1,
        )
    return lines


def _first_build_rows(b: dict[str, Any]) -> list[str]:
    """The build against install + import (``bench_build.py``): interleaved rounds, wall
    and CPU, when that run recorded them (older results carry the medians only)."""
    if "spread" not in b:
        return []
    h, base = b["spread"]["build"], b["spread"]["uv_bare_plus_import"]
    pairs = b["ratio_build_vs_uv_bare_plus_import_pairs"]
    load = ", ".join(f"{x:.1f}" for x in b.get("load_average", []))
    ratio, cpu = (
        b["ratio_build_vs_uv_bare_plus_import"],
        b["ratio_cpu_build_vs_uv_bare_plus_import"],
    )
    cpu_pairs = b.get("ratio_cpu")  # per-round CPU ratios (older results: the median only)
    cpu_text = f"CPU {cpu:.2f}x" + (
        f", pairs {cpu_pairs['min']:.2f}-{cpu_pairs['max']:.2f}" if cpu_pairs else ""
    )
    before = b.get("before")
    was = (
        f"; `{before['baseline_rev'][:10]}` (before this work) "
        f"{before['build_s']['median']:.2f} s, {before['ratio_wall']['median']:.2f}x, "
        f"CPU {before['ratio_cpu']['median']:.2f}x"
        if before
        else ""
    )
    return [
        row(
            f"... same, baseline also imports the packages (the build's check; measured "
            f"{b['measured'][:10]}, {len(pairs)} interleaved rounds, load average {load})",
            f"{h['median']:.2f} s (min {h['min']:.2f}, max {h['max']:.2f}; CPU "
            f"{b['cpu_s']['build']['median']:.2f} s{was})",
            f"sync + import {base['median']:.2f} s: {ratio:.2f}x (pairs {pairs[0]:.2f}-"
            f"{pairs[-1]:.2f}; {cpu_text})",
            "<= 1.05x, wall and CPU",
            ratio <= 1.05 and cpu <= 1.05,
        )
    ]


def _project_rows(r: dict[str, Any]) -> list[str]:
    """The ``--project`` build (``bench_project.py``), when it was measured."""
    if "project" not in r:
        return []
    p = r["project"]
    spread = f"(min {p['hpcenv']['min_s']:.2f}, max {p['hpcenv']['max_s']:.2f})"
    when = f", measured {p['measured'][:10]}" if "measured" in p else ""
    return [
        row(
            f"warm-cache `build local --project` (torch, numpy, ray; uv.lock{when})",
            f"{p['hpcenv']['median_s']:.2f} s {spread}",
            f"`uv sync --frozen` {p['uv_sync']['median_s']:.2f} s ({p['ratio_vs_uv_sync']:.2f}x)",
            "-",
            None,
        ),
        row(
            "... same, baseline also imports the packages (the build's check)",
            f"{p['hpcenv']['median_s']:.2f} s",
            f"sync + import {p['uv_sync_plus_import']['median_s']:.2f} s "
            f"({p['ratio_vs_uv_sync_plus_import']:.2f}x)",
            "-",
            None,
        ),
    ]


def _audit_rows(r: dict[str, Any]) -> list[str]:
    """``hpcenv audit`` of a hand-written requirements file (``bench_audit_requirements``)."""
    if "audit_handwritten" not in r:
        return []
    a = r["audit_handwritten"]
    h, u, lock = a["audit_requirements"], a["uv_pip_compile"], a["audit_uv_lock"]
    spread = f"(min {h['min_s']:.2f}, max {h['max_s']:.2f})"
    return [
        row(
            "`hpcenv audit requirements.txt` (hand-written, whisper's; resolution cached), warm",
            f"{h['median_s']:.2f} s {spread}",
            f"`uv pip compile` of it {u['median_s']:.2f} s "
            f"({a['ratio_audit_vs_uv_pip_compile']:.2f}x)",
            "< 2 s",
            h["median_s"] < 2,
        ),
        row(
            "`hpcenv audit uv.lock` (prime-rl's), warm",
            f"{lock['median_s']:.2f} s (min {lock['min_s']:.2f}, max {lock['max_s']:.2f})",
            f"`python -c pass` {a['python']['median_s']:.3f} s",
            "< 2 s",
            lock["median_s"] < 2,
        ),
    ]


def _project_requirements_rows(r: dict[str, Any]) -> list[str]:
    """``build local --project`` of a requirements project (``bench_project_requirements``)."""
    if "project_requirements" not in r:
        return []
    p = r["project_requirements"]
    h = p["hpcenv"]
    return [
        row(
            "warm-cache `build local --project` (whisper's requirements.txt, no lock; "
            f"measured {p.get('measured', '?')[:10]})",
            f"{h['median_s']:.2f} s (min {h['min_s']:.2f}, max {h['max_s']:.2f})",
            f"`uv venv && uv pip install -r` + imports "
            f"{p['uv_pip_install_plus_import']['median_s']:.2f} s "
            f"({p['ratio_vs_uv_pip_install_plus_import']:.2f}x; without imports "
            f"{p['uv_pip_install']['median_s']:.2f} s; a first build, nothing to take over: "
            f"{p['hpcenv_first']['median_s']:.2f} s, "
            f"{p['ratio_first_vs_uv_pip_install_plus_import']:.2f}x)",
            "<= 1.1x",
            p["ratio_vs_uv_pip_install_plus_import"] <= 1.1,
        )
    ]


def render(r: dict[str, Any]) -> str:
    f, b, a = r["facts"], r["build"], r["allreduce"]
    collect = f.get("torch_collect_env", {}).get("median_s")
    ratio = f.get("collect_env_over_facts")
    no_fi = f["facts_json_without_fi_info"]["median_s"]
    lines = [
        f"Measured {r['date']} on {r['machine']} by `nox -s bench` (`bench/run_all.py`); "
        "medians of several runs, baselines in the same run.",
        "",
        "| figure | hpcenv | baseline | target | |",
        "|---|---|---|---|---|",
        *_startup_rows(r),
        row(
            "`hpcenv facts --json` (the `fi_info -l` cache warm)",
            f"{f['facts_json']['median_s']:.3f} s",
            f"collect_env {collect:.2f} s ({ratio:.1f}x slower)" if collect else "-",
            ">= 20x faster than collect_env",
            ratio >= 20 if ratio else None,
        ),
        row(
            "`hpcenv facts --json`, cold (an empty cache: `fi_info -l` runs, ~0.3 s)",
            f"{f['facts_json_cold']['median_s']:.3f} s",
            f"collect_env {collect:.2f} s ({collect / f['facts_json_cold']['median_s']:.1f}x "
            "slower)"
            if collect
            else "-",
            "-",
            None,
        ),
        row(
            "`hpcenv facts --json` without `fi_info` on PATH (libfabric's own start-up, "
            "~0.3 s, left out)",
            f"{f['facts_json_without_fi_info']['median_s']:.3f} s",
            f"collect_env {collect:.2f} s ({collect / no_fi:.1f}x slower)" if collect else "-",
            ">= 20x faster than collect_env",
            collect / no_fi >= 20 if collect else None,
        ),
        row(
            "`hpcenv facts --json` vs Python start",
            f"{f['facts_json']['median_s']:.3f} s",
            f"`python -c pass` {f['bare_python']['median_s']:.3f} s",
            "-",
            None,
        ),
        row(
            "warm-cache build of `local`"
            + (f" (measured {b['measured'][:10]})" if "measured" in b else ""),
            f"{b['hpcenv_build_s']:.2f} s",
            f"`uv venv && uv pip sync` {b['uv_bare_s']:.2f} s ({b['ratio_build_vs_uv_bare']:.2f}x)",
            "< 1.15x",
            b["ratio_build_vs_uv_bare"] < 1.15,
        ),
        *_first_build_rows(b),
        row(
            "warm-cache build vs pip",
            f"{b['hpcenv_build_s']:.2f} s",
            f"`python -m venv && pip install -r` {b['venv_pip_s']:.1f} s "
            f"({b['speedup_vs_venv_pip']:.1f}x faster)",
            ">= 5x faster",
            b["speedup_vs_venv_pip"] >= 5,
        ),
        *_project_rows(r),
        *_project_requirements_rows(r),
        *_audit_rows(r),
        row("no-op rebuild (whole CLI)", f"{b['noop_s']:.2f} s", "-", "< 1 s", b["noop_s"] < 1),
        row(
            "cached wheel (stand-in C extension for flash-attn)",
            f"hit {b['wheel_cache']['hit_s'] * 1000:.1f} ms",
            f"miss (build) {b['wheel_cache']['miss_s']:.2f} s",
            "-",
            None,
        ),
        row(
            "allreduce probe, 2 ranks gloo, 1K..64M",
            f"{a['probe']['wall_s']:.2f} s, busbw {a['probe']['busbw_gbps']:.2f} GB/s",
            f"bare torch.distributed loop {a['bare']['wall_s']:.2f} s "
            f"({a['overhead_wall_pct']:+.1f}%)",
            "< 10% overhead",
            a["overhead_wall_pct"] < 10,
        ),
        row(
            "local probe suite (`hpcenv probe --env local`)",
            f"{r['probe_suite']['median_s']:.1f} s",
            "-",
            "-",
            None,
        ),
        row(
            "`hpcenv doctor` (no-op build + probes)",
            f"{r['doctor']['median_s']:.1f} s",
            "-",
            "-",
            None,
        ),
    ]
    if "archs" in r:
        x = r["archs"]["archs"]
        lines.append(
            row(
                "`hpcenv archs` on torch 2.13.0's `libtorch_cuda.so` (470 MB)",
                f"{x['hpcenv_archs']['median_s']:.2f} s",
                f"`cuobjdump -all --list-elf` {x['cuobjdump_list_elf']['median_s']:.2f} s "
                f"({r['archs']['cuobjdump_over_archs']:.0f}x slower)",
                "not slower than cuobjdump",
                r["archs"]["cuobjdump_over_archs"] >= 1,
            )
        )
    if "archs" in r and "audit" in r["archs"]:
        a2 = r["archs"]["audit"]
        lines.append(
            row(
                "`hpcenv audit VENV`, torch 2.13.0 + CUDA wheels "
                f"({r['archs']['venv_scan']['libraries_read']} libraries read), warm",
                f"{a2['hpcenv_audit']['median_s']:.2f} s",
                f"`python -c pass` {a2['python_start']['median_s']:.3f} s",
                "< 2 s",
                a2["hpcenv_audit"]["median_s"] < 2,
            )
        )
    if "slurm" in r and "probe_nccl_median_s" in r["slurm"]:
        s = r["slurm"]
        lines.append(
            row(
                "probe-nccl job on local SLURM, submit to report",
                f"{s['probe_nccl_median_s']:.1f} s",
                f"trivial job {s['baseline_trivial_job_median_s']:.1f} s",
                "-",
                None,
            )
        )
    if "gate" in r and "variants" in r["gate"]:
        g = r["gate"]
        base = g["variants"]["no gate"]
        for name, v in g["variants"].items():
            if name == "no gate":
                continue
            lines.append(
                row(
                    f"`sbatch -- CMD`, job start to CMD start, {name}",
                    f"{v['median_s']:.1f} s (min {v['min_s']:.1f}, max {v['max_s']:.1f})",
                    f"no gate {base['median_s']:.2f} s "
                    f"(+{g['overhead_over_no_gate_median_s'][name]:.1f} s)",
                    "-",
                    None,
                )
            )
    if "profile_init" in r and "profile_init_facts" in r["profile_init"]:
        pi, base = r["profile_init"]["profile_init_facts"], r["profile_init"]["baseline_reads"]
        srun = r["profile_init"]["profile_init_srun"]
        lines.append(
            row(
                "`hpcenv profile init --facts` on local SLURM with GRES + Lmod (measured "
                f"{r['profile_init'].get('date', r['date'])}; with the srun step "
                f"{srun['median_s']:.2f} s)",
                f"{pi['median_s']:.2f} s (min {pi['min_s']:.2f}, max {pi['max_s']:.2f})",
                f"its SLURM and Lmod reads alone {base['median_s']:.2f} s",
                "< 10 s",
                pi["median_s"] < 10,
            )
        )
    if "pairs" in r and "finder" in r["pairs"]:
        pr = r["pairs"]
        runs = len(pr["excluded"])
        right = sum(x == ["node3"] for x in pr["excluded"])
        busbw = ", ".join(f"{k} {v:.3g}" for k, v in sorted(pr["pair_busbw_gbps"].items()))
        lines.append(
            row(
                "bad-node finder, 3 nodes, node3 at 100 Mbit/s (`probe nccl --pairs`, 8 MiB)",
                f"{pr['finder']['median_s']:.1f} s ({pr['finder']['min_s']:.1f}-"
                f"{pr['finder']['max_s']:.1f}); excluded node3 alone in {right}/{runs} runs; "
                f"busbw GB/s {busbw}",
                f"one full-allocation sweep 1K..8M {pr['full_sweep']['median_s']:.1f} s "
                f"({pr['finder_over_sweep']:.2f}x), which names no node",
                "exclude exactly node3",
                right == runs,
            )
        )
    lines += _survive_rows(r)
    return "\n".join(lines) + "\n"


def _survive_rows(r: dict[str, Any]) -> list[str]:
    """The watchdog's CPU and the requeue's overhead (``--survive``)."""
    lines = []
    variants = r.get("watchdog", {}).get("variants", {})
    idle = variants.get("idle interpreter (baseline)", {}).get("percent_of_one_core", {})
    for name, v in variants.items():
        if name.startswith("idle"):
            continue
        pct = v["percent_of_one_core"]
        lines.append(
            row(
                f"hang watchdog on a job that never hangs, {name}",
                f"{pct['median']:.2f} % of one core ({pct['min']:.2f}-{pct['max']:.2f})",
                f"idle interpreter {idle.get('median', 0.0):.2f} %",
                "< 1 %",
                pct["max"] < 1.0,
            )
        )
    if "requeue" in r and "variants" in r["requeue"]:
        q = r["requeue"]
        total, start = q["variants"]["verdict_to_cmd"], q["variants"]["verdict_to_new_job"]
        base = q["baseline_gate_without_requeue"]
        lines.append(
            row(
                "bad-node requeue, 3 of 4 nodes, node3 capped: verdict to CMD on the new nodes",
                f"{total['median_s']:.1f} s ({total['min_s']:.1f}-{total['max_s']:.1f}); "
                f"verdict to new job {start['median_s']:.2f} s",
                f"gate of a job excluded from the start {base['median_s']:.1f} s",
                "-",
                None,
            )
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
