"""Name what a failed job died of: its first real failure among the ranks' interleaved
output (not the cascade of aborts and timeouts that follows it), the cause in one line,
the evidence (file:line, rank, node) and the fix, from hpcenv's known causes
(knowledge/failures.toml, each with its source). Give the log files, or a job id: the
logs 'hpcenv sbatch' wrote for it under --log-dir (default: --profile's [job] log_dir,
else logs) and its report. --profile also gives the network NCCL must use: NCCL on
sockets where the profile expects ofi or ib is then the lead of a timeout. --facts FILE
(a node's 'hpcenv facts --json') puts the node's driver into the fix, with the torch
variant hpcenv would install there.

Exit codes: 0 a known cause was named; 1 the failure is not one hpcenv knows (the first
failing line is shown, with its rank and node) or no line failed; 2 bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcenv.commands import print_json, print_text
from hpcenv.facts import collect
from hpcenv.profile import schema
from hpcenv.slurm import failure


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s LOG... | JOBID [--log-dir DIR] [--profile P] [--facts FILE] [--json]"
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_JOBID", help="log files, or one job id")
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="where a job id's logs are (default: --profile's [job] log_dir, else logs)",
    )
    parser.add_argument(
        "--profile",
        default=None,
        help="the job's profile: its [job] log_dir, and its [platform] nccl_net (NCCL on "
        "sockets where it expects ofi or ib is then the lead of a timeout)",
    )
    parser.add_argument("--facts", type=Path, default=None, help="the node's recorded facts")
    parser.add_argument("--json", action="store_true", help="the explanation as one JSON object")


def run(args: argparse.Namespace) -> int:
    facts = collect.load(args.facts) if args.facts else None
    prof = schema.load(args.profile) if args.profile else None
    net = prof.platform.nccl_net if prof else "any"
    first = Path(args.logs[0])
    if len(args.logs) == 1 and not first.exists():
        log_dir = args.log_dir or Path(prof.job.log_dir if prof else "logs")
        logs, report = failure.job_files(args.logs[0], log_dir)
        found = failure.explain_job(logs, report, facts=facts, expect_net=net)
    else:
        paths = [Path(p) for p in args.logs]
        found = failure.explain_files(paths, facts=facts, expect_net=net)
    if args.json:
        print_json(found.to_json())
    else:
        print_text(found.text())
    return 0 if found.known else 1
