"""Name what a failed job died of: its first real failure among the ranks' interleaved
output (not the cascade of aborts and timeouts that follows it), the cause in one line,
the evidence (file:line, rank, node) and the fix, from hpcenv's known causes
(knowledge/failures.toml, each with its source). Give the log files, or a job id: the
logs 'hpcenv sbatch' wrote for it under --log-dir (default: logs, the [job] log_dir
default) and its report. --facts FILE (a node's 'hpcenv facts --json') puts the node's
driver into the fix, with the torch variant hpcenv would install there.

Exit codes: 0 a known cause was named; 1 the failure is not one hpcenv knows (the first
failing line is shown, with its rank and node) or no line failed; 2 bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcenv.commands import print_json, print_text
from hpcenv.models import facts as facts_model
from hpcenv.slurm import failure

NAME = "explain"
HELP = "name what a failed job died of: the cause, the evidence (file:line, rank, node), the fix"
ORDER = 62


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s LOG... | JOBID [--log-dir DIR] [--facts FILE] [--json]"
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_JOBID", help="log files, or one job id")
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=Path("logs"),
        help="where a job id's logs are (default: logs, the profile's [job] log_dir default)",
    )
    parser.add_argument("--facts", type=Path, default=None, help="the node's recorded facts")
    parser.add_argument("--json", action="store_true", help="the explanation as one JSON object")


def run(args: argparse.Namespace) -> int:
    facts = facts_model.load(args.facts) if args.facts else None
    first = Path(args.logs[0])
    if len(args.logs) == 1 and not first.exists():
        logs, report = failure.job_files(args.logs[0], args.log_dir)
        found = failure.explain_job(logs, report, facts=facts)
    else:
        found = failure.explain_files([Path(p) for p in args.logs], facts=facts)
    if args.json:
        print_json(found.to_json())
    else:
        print_text(found.text())
    return 0 if found.known else 1
