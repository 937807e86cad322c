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
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from hpcenv.commands import print_json, print_text
from hpcenv.facts import collect
from hpcenv.profile import schema
from hpcenv.slurm import failure
from hpcenv.ui.progress import ReadProgress
from hpcenv.utils.errors import BadInput

#: The longest path hpcenv takes on the command line (Linux's PATH_MAX).
MAX_ARG = 4096


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


def _width() -> int | None:
    """The terminal's width when stdout is one (the evidence is wrapped to it)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _exists(arg: str, what: str) -> bool:
    """Whether ``arg`` names something; BadInput (exit 2) for a value no path can be."""
    if len(arg) > MAX_ARG or "\0" in arg:
        raise BadInput(f"{what} {arg[:40]!r}... is {len(arg)} characters: neither a path nor a job "
                       "id; give a log file or a job id")  # fmt: skip
    try:
        return Path(arg).exists()
    except OSError as exc:  # a name longer than the file system takes
        raise BadInput(
            f"{what} {arg[:40]!r}...: {exc.strerror}; give a log file or a job id"
        ) from exc


def run(args: argparse.Namespace) -> int:
    if args.log_dir is not None:
        _exists(str(args.log_dir), "--log-dir")
    facts = collect.load(args.facts) if args.facts else None
    prof = schema.load(args.profile) if args.profile else None
    net = prof.platform.nccl_net if prof else "any"
    progress = ReadProgress().start
    if len(args.logs) == 1 and not _exists(args.logs[0], "LOG_OR_JOBID"):
        log_dir = args.log_dir or Path(prof.job.log_dir if prof else "logs")
        logs, report, refused = failure.job_files(args.logs[0], log_dir)
        found = failure.explain_job(logs, report, facts=facts, expect_net=net, progress=progress)
        found = replace(found, notes=(*found.notes, *(f"left out: {why}" for why in refused)))
    else:
        paths = [Path(p) for p in args.logs]
        found = failure.explain_files(paths, facts=facts, expect_net=net, progress=progress)
    if args.json:
        print_json(found.to_json())
    else:
        print_text(found.text(_width()))
    return 0 if found.known else 1
