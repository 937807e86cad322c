"""The main job, in one command: read this node's facts, plan the profile's
environment, build it (a no-op when nothing changed), run the profile's probe suite in
it, and end with one report. Exit code: 0 all passed (skips allowed), 3 no torch build
can run here, 4 the build failed, 5 a probe failed."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcenv.commands import add_html_option, add_json_option, print_json

if TYPE_CHECKING:  # imported where used: every command's module loads with the CLI
    from hpcenv.build.builder import BuildResult
    from hpcenv.models.facts import Facts
    from hpcenv.models.plan import Plan
    from hpcenv.profile.schema import Profile


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
    add_html_option(parser)
    add_json_option(parser)


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage of the doctor's chain: what it did, how long, its status."""

    stage: str
    seconds: float
    summary: str
    status: str = "pass"

    def serialize(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "status": self.status,
            "seconds": self.seconds,
            "summary": self.summary,
        }


def facts_stage() -> tuple[Facts, Stage]:
    """This node's facts."""
    from hpcenv.facts import collect as facts

    t0 = time.monotonic()
    node = facts.collect()
    gpus = ", ".join(sorted({g.name for g in node.gpus})) or "no NVIDIA GPU"
    driver = f", driver {node.nvidia.driver_version}" if node.nvidia else ""
    summary = f"{node.hostname}: {node.arch}, {node.cpus} cpus, {gpus}{driver}"
    return node, Stage(stage="facts", seconds=time.monotonic() - t0, summary=summary)


def plan_stage(name: str, node: Facts) -> tuple[Profile, Plan, Stage]:
    """The profile's plan on this node (NoCompatibleBuild, exit 3, when no torch runs)."""
    from hpcenv.decide.plan import make_plan
    from hpcenv.profile import schema as profile

    t0 = time.monotonic()
    prof = profile.load(name)
    plan = make_plan(prof, node)
    warned = f", {len(plan.warnings)} warning(s)" if plan.warnings else ""
    summary = (
        f"torch {plan.torch.version} ({plan.torch.backend}), flash-attn "
        f"{plan.flash_attn.action}{warned}"
    )
    return prof, plan, Stage(stage="plan", seconds=time.monotonic() - t0, summary=summary)


def build_stage(plan: Plan, node: Facts, *, show: bool) -> tuple[BuildResult, Stage]:
    """The environment built (a no-op when nothing changed)."""
    from hpcenv.build import builder
    from hpcenv.ui import report

    built = builder.build(plan, node, progress=report.BuildProgress() if show else None)
    what = "unchanged, nothing to do" if built.noop else "built"
    summary = f"{what}: {built.venv} -> {built.target.name}"
    return built, Stage(stage="build", seconds=built.seconds, summary=summary)


def run(args: argparse.Namespace) -> int:
    from hpcenv.commands import probe
    from hpcenv.models.facts import to_json
    from hpcenv.models.results import Status, overall
    from hpcenv.runner import probes as runner
    from hpcenv.ui import junit, report
    from hpcenv.utils import paths
    from hpcenv.utils.errors import ProbeFailed

    probe.check_args(ranks=args.ranks, junit=args.junit, html=args.html)
    start = time.monotonic()
    err = report.err_console
    err.print("1/4 facts", style="bold")
    node, facts_done = facts_stage()
    err.print("2/4 plan", style="bold")
    prof, plan, plan_done = plan_stage(args.profile, node)
    err.print("3/4 build", style="bold")
    built, build_done = build_stage(plan, node, show=not args.json)
    stages = (facts_done, plan_done, build_done)
    err.print("4/4 probes", style="bold")
    target = runner.Target(name=prof.name, python=paths.venv_python(built.venv), profile=prof)
    results, result_dir = probe.execute(target, tuple(prof.probes.run), ranks=args.ranks)
    status = overall(results)
    if args.junit:
        junit.write(Path(args.junit), results, suite_name=f"hpcenv doctor {prof.name}")
    total = time.monotonic() - start
    data = {
        "schema": 1,
        "profile": prof.name,
        "status": status.value,
        "seconds": total,
        "facts": to_json(node),
        "plan": plan.serialize(),
        "stages": [s.serialize() for s in stages],
        "results_dir": str(result_dir),
        "probes": [r.serialize() for r in results],
    }
    probe.write_html(args.html, data, title=f"hpcenv doctor: {prof.name}", profile=prof)
    if args.json:
        print_json(data)
    else:
        report.print_stages([s.serialize() for s in stages], title=f"doctor: {prof.name}")
        report.print_probe_results(results, title=f"probes in {target.name} ({target.python})")
        report.console.print(
            report.styled(status.value.upper(), "bold"),
            f"in {total:.1f} s (build {built.seconds:.1f} s; rank files in {result_dir})",
        )
    bad = [r.name for r in results if r.status in (Status.FAIL, Status.ERROR)]
    if bad:
        raise ProbeFailed(f"{len(bad)} of {len(results)} probes failed: {', '.join(bad)}")
    return 0
