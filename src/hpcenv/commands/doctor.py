"""The main job, in one command: read this node's facts, plan the profile's
environment, build it (a no-op when nothing changed), run the profile's probe suite in
it, and end with one report. Exit code: 0 all passed (skips allowed), 3 no torch build
can run here, 4 the build failed, 5 a probe failed."""

from __future__ import annotations

import argparse
import time
from typing import Any

from hpcenv.commands import add_json_option, print_json

NAME = "doctor"
HELP = "facts -> plan -> build -> probes for a profile (default local), one report"
ORDER = 5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "profile",
        nargs="?",
        default="local",
        metavar="PROFILE",
        help="profile name or .toml path (default: local)",
    )
    parser.add_argument(
        "--ranks", type=int, metavar="N", help="ranks of multi-rank probes (default: GPUs, else 2)"
    )
    parser.add_argument("--junit", metavar="FILE", help="also write the probes as JUnit XML")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hpcenv.build import builder as build
    from hpcenv.commands import probe
    from hpcenv.commands.plan import plan_json
    from hpcenv.decide.plan import make_plan
    from hpcenv.facts import collect as facts
    from hpcenv.models.facts import to_json
    from hpcenv.models.results import Status, overall
    from hpcenv.profile import schema as profile
    from hpcenv.runner import probes as runner
    from hpcenv.ui import junit, report
    from hpcenv.utils import paths
    from hpcenv.utils.errors import ProbeFailed

    probe.check_args(ranks=args.ranks, junit=args.junit)
    start = time.monotonic()
    err = report.err_console
    stages: list[dict[str, Any]] = []

    err.print("1/4 facts", style="bold")
    t0 = time.monotonic()
    node = facts.collect()
    gpus = ", ".join(sorted({g.name for g in node.gpus})) or "no NVIDIA GPU"
    stages.append(
        {
            "stage": "facts",
            "status": "pass",
            "seconds": time.monotonic() - t0,
            "summary": f"{node.hostname}: {node.arch}, {node.cpus} cpus, {gpus}"
            + (f", driver {node.nvidia.driver_version}" if node.nvidia else ""),
        }
    )

    err.print("2/4 plan", style="bold")
    t0 = time.monotonic()
    prof = profile.load(args.profile)
    plan = make_plan(prof, node)  # NoCompatibleBuild (3) when no torch build runs here
    stages.append(
        {
            "stage": "plan",
            "status": "pass",
            "seconds": time.monotonic() - t0,
            "summary": f"torch {plan.torch.version} ({plan.torch.backend}), flash-attn "
            f"{plan.flash_attn.action}"
            + (f", {len(plan.warnings)} warning(s)" if plan.warnings else ""),
        }
    )

    err.print("3/4 build", style="bold")
    built = build.build(plan, node, progress=None if args.json else report.BuildProgress())
    stages.append(
        {
            "stage": "build",
            "status": "pass",
            "seconds": built.seconds,
            "summary": ("unchanged, nothing to do" if built.noop else "built")
            + f": {built.venv} -> {built.target.name}",
        }
    )

    err.print("4/4 probes", style="bold")
    target = runner.Target(name=prof.name, python=paths.venv_python(built.venv), profile=prof)
    results, result_dir = probe.execute(target, tuple(prof.probes.run), ranks=args.ranks)
    status = overall(results)
    if args.junit:
        junit.write(Path(args.junit), results, suite_name=f"hpcenv doctor {prof.name}")
    total = time.monotonic() - start
    if args.json:
        print_json(
            {
                "schema": 1,
                "profile": prof.name,
                "status": status.value,
                "seconds": total,
                "facts": to_json(node),
                "plan": plan_json(plan),
                "stages": stages,
                "results_dir": str(result_dir),
                "probes": [r.serialize() for r in results],
            }
        )
    else:
        report.print_stages(stages, title=f"doctor: {prof.name}")
        report.print_probe_results(results, title=f"probes in {target.name} ({target.python})")
        report.console.print(
            report.styled(status.value.upper(), "bold"),
            f"in {total:.1f} s (build {built.seconds:.1f} s; rank files in {result_dir})",
        )
    bad = [r.name for r in results if r.status in (Status.FAIL, Status.ERROR)]
    if bad:
        raise ProbeFailed(f"{len(bad)} of {len(results)} probes failed: {', '.join(bad)}")
    return 0
