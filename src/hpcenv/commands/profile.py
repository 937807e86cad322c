"""Write a cluster profile from the cluster itself, and check one against it.

'init NAME', run on a login node: SLURM's partitions (default, GRES, MaxTime, node
counts), the GPU request syntax sbatch accepts (--test-only, nothing queued), a compute
node's facts (srun -N1 -p P hpcenv facts --json --scratch under a timeout, or --facts FILE
recorded earlier), Lmod's modules (module -t avail: CUDA for the torch build hpcenv
chooses, NCCL, the OFI plugin), node-local scratch (never NFS, Lustre or GPFS), the
network recipe for the node's libfabric providers. Every value written names its source;
what could not be determined is a comment naming the key to set. The profile validates;
'hpcenv doctor NAME' is the next step.

'check NAME': the profile against the cluster today (driver changed, module gone,
partition renamed, GRES changed); exit 2 naming each drift and the line to change, for
cron or CI on the cluster. --json: one object for either (the drifts as data).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcenv.commands import add_json_option, print_json, print_text, seconds
from hpcenv.utils.errors import BadInput


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = sub.add_parser("init", help="write envs/NAME.toml from SLURM, Lmod and a node's facts")
    init.add_argument("name", metavar="NAME")
    init.add_argument("--output", metavar="FILE", help="write here (default: ./envs/NAME.toml)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    check = sub.add_parser("check", help="exit 2 naming each drift of a profile from the cluster")
    check.add_argument("name", metavar="NAME_OR_PATH")
    for p in (init, check):
        p.add_argument("--partition", metavar="P", help="the partition (default: the default)")
        p.add_argument(
            "--facts",
            metavar="FILE",
            help="a compute node's facts recorded with 'hpcenv facts --json --scratch > FILE' "
            "(instead of reading them through srun)",
        )
        p.add_argument(
            "--srun-timeout",
            type=seconds,
            default=120.0,
            metavar="S",
            help="seconds the srun step may take, queueing included (default 120)",
        )
        add_json_option(p)


def _facts(args: argparse.Namespace, partition: str | None, problems: list[str]) -> object:
    from hpcenv.facts.collect import load
    from hpcenv.slurm import survey

    if args.facts:
        return load(args.facts)
    if partition is None:
        return None
    from hpcenv.ui import progress, report

    with progress.Progress(report.err_console, transient=True) as shown:
        shown.task(f"a compute node's facts through srun -p {partition}")
        found, why = survey.compute_facts(partition, timeout=args.srun_timeout)
    if found is None:
        problems.append(why)
    return found


def _init(args: argparse.Namespace) -> int:
    from hpcenv.decide import profile_init
    from hpcenv.models.facts import Facts
    from hpcenv.models.survey_model import Survey
    from hpcenv.slurm import survey
    from hpcenv.ui import progress, report
    from hpcenv.utils import fsio

    with progress.Progress(report.err_console, transient=True) as shown:
        shown.task("SLURM partitions, GPU syntax and Lmod modules")
        seen = survey.survey(partition=args.partition)
    problems = list(seen.problems)
    partition = seen.slurm.surveyed if seen.slurm and seen.slurm.surveyed else None
    facts = _facts(args, partition, problems)
    if not isinstance(facts, Facts):
        said = "; ".join(problems) or "no compute node's facts"
        raise BadInput(
            f"profile init {args.name}: no compute node's facts ({said}); record them on a "
            "compute node with 'hpcenv facts --json --scratch > node.json' and pass "
            "--facts node.json"
        )
    out = Path(args.output) if args.output else Path("envs") / f"{args.name}.toml"
    result = profile_init.draft(
        args.name, facts, Survey(slurm=seen.slurm, modules=seen.modules, problems=tuple(problems)),
        partition=args.partition,
    )  # fmt: skip
    if out.exists() and not args.force:
        raise BadInput(f"{out} exists; pass --force to replace it, or --output FILE")
    fsio.ensure_dir(out.parent)
    fsio.write_text(out, result.text)
    if args.json:
        print_json({
            "schema": 1, "profile": args.name, "path": str(out), "recipe": result.recipe,
            "partition": result.partition, "backend": result.backend,
            "could_not_read": problems, "not_determined": list(result.unknown),
        })  # fmt: skip
        return 0
    lines = [f"wrote {out}: recipe {result.recipe}, partition {result.partition or '-'}, "
             f"torch {result.backend or '-'}"]  # fmt: skip
    lines += [f"  could not read: {p}" for p in problems]
    lines += [f"  not determined: {u}" for u in result.unknown]
    lines.append(f"next: hpcenv show {out} && hpcenv doctor {out}")
    print_text("\n".join(lines) + "\n")
    return 0


def _check(args: argparse.Namespace) -> int:
    from hpcenv.decide import profile_drift
    from hpcenv.facts import lmod
    from hpcenv.models.facts import Facts
    from hpcenv.models.survey_model import Survey
    from hpcenv.profile import schema
    from hpcenv.slurm import survey
    from hpcenv.utils import fsio

    prof = schema.load(args.name)
    assert prof.path is not None
    text = fsio.read_text(prof.path, "profile")
    problems: list[str] = []
    slurm = survey.read_slurm(None, problems, requests=False)
    modules = lmod.available(problems=problems)
    partition = (
        args.partition
        or prof.slurm.partition
        or (slurm.default.name if slurm and slurm.default else None)
    )
    if slurm and partition and slurm.partition(partition) is None:
        partition = None  # a renamed partition is a drift, not a place to srun
    facts = _facts(args, partition, problems)
    result = profile_drift.check(
        prof, text, Survey(slurm=slurm, modules=modules, problems=tuple(problems)),
        facts if isinstance(facts, Facts) else None,
    )  # fmt: skip
    if args.json:
        print_json({
            "schema": 1, "profile": prof.name, "path": str(prof.path),
            "drift": bool(result.drifts),
            "drifts": [{"section": d.section, "key": d.key, "line": d.line,
                        "message": d.message, "text": d.render(str(prof.path))}
                       for d in result.drifts],
            "checked": list(result.checked), "not_checked": list(result.not_checked),
            "could_not_read": problems,
        })  # fmt: skip
        return 2 if result.drifts else 0
    lines = [d.render(str(prof.path)) for d in result.drifts]
    lines += [f"  not checked: {n}" for n in result.not_checked]
    lines += [f"  could not read: {p}" for p in problems]
    if not result.drifts:
        lines.insert(0, f"{prof.path}: no drift ({', '.join(result.checked) or 'nothing'} checked)")
    print_text("\n".join(lines) + "\n")
    return 2 if result.drifts else 0


def run(args: argparse.Namespace) -> int:
    return _init(args) if args.action == "init" else _check(args)
