"""Run probes in a built environment and report: a table for people, --json for scripts,
--junit FILE for CI. Probes run under the environment's own Python, each with a
timeout; multi-rank probes (nccl) start --ranks local ranks (torchrun-style). Exits 5
when any probe fails or errors; skips (no GPU, not installed) do not fail."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcenv.commands import add_html_option, add_json_option, print_json, seconds
from hpcenv.kit import registry
from hpcenv.models.results import ProbeResult, Status, overall
from hpcenv.profile.schema import Profile
from hpcenv.runner import probes as runner
from hpcenv.runner import suite
from hpcenv.slurm import pairs, srun
from hpcenv.ui import junit, report
from hpcenv.utils.errors import BadInput, ProbeFailed


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="probes to run (default: the profile's probes.run): "
        + "; ".join(f"{p.name}: {p.summary}" for p in registry.PROBES),
    )
    parser.add_argument(
        "--env",
        required=True,
        metavar="PROFILE_OR_VENV",
        help="profile name or .toml (its built venv), or a venv directory / python executable",
    )
    parser.add_argument(
        "--profile", metavar="NAME", help="settings to use with a venv path given to --env"
    )
    parser.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="ranks of multi-rank probes (default: GPUs on this node, else 2; at most one "
        "per CPU and 0.5 GiB of memory unless HPCENV_MAX_RANKS says more)",
    )
    parser.add_argument(
        "--timeout", type=seconds, metavar="S", help="seconds per probe (default: profile's)"
    )
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    parser.add_argument(
        "--results-dir",
        metavar="DIR",
        help="where ranks write their files (default: a new directory under $HPCENV_HOME/results)",
    )
    parser.add_argument(
        "--nccl-sizes", metavar="MIN:MAX", help="allreduce sizes for nccl, e.g. 1K:64M"
    )
    parser.add_argument("--model", metavar="PATH", help="local model for the vllm generation")
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="the bad-node finder, inside an allocation of 2+ nodes: nccl on each node, then "
        "between pairs of nodes in rounds (one rank per node, the largest size); lists the "
        f"nodes to exclude ({pairs.RULE})",
    )
    parser.add_argument(
        "--pair-rounds",
        type=int,
        default=pairs.DEFAULT_ROUNDS,
        metavar="N",
        help=f"rounds of pairs with --pairs (default {pairs.DEFAULT_ROUNDS})",
    )
    add_html_option(parser)
    add_json_option(parser)


def check_args(*, ranks: int | None, junit: str | None, html: str | None = None) -> None:
    """What can be checked before any slow work (a build, the first probe): --ranks
    against this node's cap (local ranks; srun places its own), --junit's path."""
    suite.check_ranks(ranks, srun.launcher_here())
    if junit:
        from hpcenv.ui import junit as junit_xml

        junit_xml.check_path(Path(junit))
    if html:
        from hpcenv.ui import html_report

        html_report.check_path(Path(html))


def write_html(
    html: str | None, data: dict[str, Any], *, title: str, profile: Profile | None
) -> None:
    """``--html FILE``: ``data`` (the ``--json`` report) as one HTML page, the profile's
    expected busbw drawn; a line on stderr. Shared by ``probe``, ``doctor``, ``sbatch``."""
    if not html:
        return
    from hpcenv.commands import report as html_command

    expected = profile.probes.nccl_expect_busbw_gbps if profile else None
    done = html_command.write_html(Path(html), data, title=title, expected=expected)
    report.err_console.print(f"HTML report: {done['html']}", style="dim")


def _started(spec: runner.ProbeSpec) -> None:
    where = f" ({spec.ranks} ranks)" if spec.ranks > 1 else ""
    report.err_console.print(f"probe {spec.name}{where} ...", style="dim")


def _done(r: ProbeResult) -> None:
    report.err_console.print(
        " ", report.status_text(r.status.value), f"{r.name} ({r.seconds:.1f} s)"
    )


def execute(
    target: runner.Target,
    names: tuple[str, ...],
    *,
    ranks: int | None = None,
    timeout: float | None = None,
    results_dir: str | None = None,
    extra: dict[str, list[str]] | None = None,
) -> tuple[list[ProbeResult], Path]:
    """``names`` in ``target`` on this node's launcher (srun inside a SLURM allocation),
    progress on stderr (``ui/progress.py``: the probes done of all, the one running with
    its elapsed time, such as the NCCL sweep). Shared by ``probe`` and ``doctor``."""
    from hpcenv.ui import progress

    with progress.Progress(report.err_console, transient=True) as shown:
        shown.task("probes", len(names))

        def started(spec: runner.ProbeSpec) -> None:
            _started(spec)
            shown.running(spec.name)

        def done(r: ProbeResult) -> None:
            _done(r)
            shown.advance(r.name)

        return suite.execute(
            target,
            names,
            launcher=srun.launcher_here(),
            ranks=ranks,
            timeout=timeout,
            results_dir=results_dir,
            extra=extra,
            on_start=started,
            on_done=done,
        )


def report_json(
    target: runner.Target,
    status: Status,
    result_dir: Path,
    results: Sequence[ProbeResult],
    **extra: Any,
) -> dict[str, Any]:
    """The ``--json`` report (``--pairs`` adds its ``pairs`` and top-level ``exclude``)."""
    return {
        "schema": 1,
        "env": target.name,
        "python": str(target.python),
        "status": status.value,
        "results_dir": str(result_dir),
        "results": [r.serialize() for r in results],
        **extra,
    }


def run_pairs(args: argparse.Namespace, target: runner.Target) -> int:
    """``--pairs``: the bad-node finder over this allocation (``hpcenv.slurm.pairs``)."""
    if tuple(args.names) not in ((), ("nccl",)):
        raise BadInput("--pairs runs the nccl probe between pairs of nodes; name no other probe")
    if args.ranks is not None:
        raise BadInput("--ranks does not apply to --pairs (one rank per node in a pair)")
    launcher = srun.launcher_here()
    if not isinstance(launcher, srun.SrunLauncher):
        raise BadInput(
            "--pairs runs inside a SLURM allocation of 2 or more nodes (sbatch, salloc); "
            "submit it with 'hpcenv sbatch PROFILE nccl --nodes N --pairs'"
        )
    result_dir = suite.result_dir(target, args.results_dir, args.timeout)
    hosts = launcher.layout.hosts
    report.err_console.print(f"bad-node finder over {len(hosts)} nodes ...", style="dim")
    runs = len(hosts) + sum(len(r) for r in pairs.schedule(hosts, args.pair_rounds))
    from hpcenv.ui import progress

    with progress.Progress(report.err_console, transient=True) as shown:
        shown.task("node checks and pair rounds", runs)

        def done(r: ProbeResult) -> None:
            _done(r)
            shown.advance(r.name)

        found = pairs.find(
            target,
            launcher,
            result_dir=result_dir,
            timeout_s=args.timeout,
            sizes=args.nccl_sizes,
            rounds=args.pair_rounds,
            on_done=done,
        )
    results = found.results()
    if args.junit:
        junit.write(Path(args.junit), results, suite_name=f"hpcenv nccl pairs {target.name}")
    extra = {"pairs": found.serialize(), "exclude": found.exclude}
    data = report_json(target, found.status, result_dir, results, **extra)
    write_html(args.html, data, title=f"hpcenv nccl pairs in {target.name}", profile=target.profile)
    if args.json:
        print_json(data)
    else:
        report.print_probe_results(results, title=f"nccl pairs in {target.name}")
        report.print_pairs(found.serialize())
    if found.exclude:
        raise ProbeFailed(
            f"exclude {', '.join(found.exclude)} ({found.exclude_option()}): "
            + "; ".join(f"{v.host}: {v.why}" for v in found.nodes if v.exclude)
        )
    if found.status.failed:
        raise ProbeFailed(
            f"the bad-node finder saw failures but cannot name a node (rank files in "
            f"{result_dir}); {pairs.RULE}"
        )
    return 0


def run(args: argparse.Namespace) -> int:
    check_args(ranks=args.ranks, junit=args.junit, html=args.html)
    target = runner.resolve_target(args.env, args.profile)
    if args.pairs:
        return run_pairs(args, target)
    names = tuple(args.names) or target.default_probes
    extra: dict[str, list[str]] = {}
    if args.nccl_sizes:
        extra["nccl"] = ["--sizes", args.nccl_sizes]
    if args.model:
        extra["vllm"] = ["--model", args.model]
    results, result_dir = execute(
        target,
        names,
        ranks=args.ranks,
        timeout=args.timeout,
        results_dir=args.results_dir,
        extra=extra,
    )
    status = overall(results)
    if args.junit:
        junit.write(Path(args.junit), results, suite_name=f"hpcenv probes {target.name}")
    data = report_json(target, status, result_dir, results)
    write_html(args.html, data, title=f"hpcenv probes in {target.name}", profile=target.profile)
    if args.json:
        print_json(data)
    else:
        report.print_probe_results(results, title=f"probes in {target.name} ({target.python})")
    bad = [r.name for r in results if r.status in (Status.FAIL, Status.ERROR)]
    if bad:
        raise ProbeFailed(
            f"{len(bad)} of {len(results)} probes failed: {', '.join(bad)}; the remedy column "
            f"says what to do (rank files in {result_dir})"
        )
    return 0
