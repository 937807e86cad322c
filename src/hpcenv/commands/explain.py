"""Name what a failed job died of: its first real failure among the ranks' interleaved
output (not the cascade of aborts and timeouts that follows it), the cause in one line,
the evidence (file:line, rank, node) and the fix, from hpcenv's known causes
(knowledge/failures.toml, each with its source). Give the log files, or job ids: for
hpcenv's own job the logs 'hpcenv sbatch' wrote under --log-dir (default: --profile's
[job] log_dir, else logs) and its report; for any other job (plain sbatch) what SLURM
says of it (scontrol show job, else sacct: state, exit codes, nodes, reason) and the
logs it names (StdOut, StdErr). An array's id (4242) explains every task, grouped by
cause; 4242_7 one task. SLURM's own verdict (OUT_OF_MEMORY, TIMEOUT, NODE_FAIL,
PREEMPTED) is evidence too. A log found by a job id is read only when it is yours
(no link followed, a regular file, writable by nobody else). --profile also gives the
network NCCL must use: NCCL on sockets where the profile expects ofi or ib is then the
lead of a timeout. --facts FILE (a node's 'hpcenv facts --json') puts the node's driver
into the fix, with the torch variant hpcenv would install there.

Exit codes: 0 a known cause was named (for every job given); 1 the failure is not one
hpcenv knows (the first failing line is shown, with its rank and node) or no line
failed; 2 bad input."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from hpcenv.commands import print_json, print_text
from hpcenv.facts import collect
from hpcenv.slurm import failure
from hpcenv.ui.progress import ReadProgress
from hpcenv.utils.errors import BadInput

#: The longest path hpcenv takes on the command line (Linux's PATH_MAX).
MAX_ARG = 4096


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "%(prog)s LOG... | JOBID... [--log-dir DIR] [--profile P] [--facts FILE] [--json]"
    )
    parser.add_argument(
        "logs", nargs="+", metavar="LOG_OR_JOBID",
        help="log files (one job's, read together), or job ids (4242, an array's task 4242_7)",
    )  # fmt: skip
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


def _answers(args: argparse.Namespace) -> list[failure.Answer]:
    """The files given (one job's logs, explained together) and each job id given (a
    task of an array, or every task of it), in the order given."""
    if args.log_dir is not None:
        _exists(str(args.log_dir), "--log-dir")
    facts = collect.load(args.facts) if args.facts else None
    if args.profile:
        from hpcenv.profile import schema  # its parsers only when a profile is given

        prof = schema.load(args.profile)
    else:
        prof = None
    net = prof.platform.nccl_net if prof else "any"
    log_dir = args.log_dir or Path(prof.job.log_dir if prof else "logs")
    progress = ReadProgress().start
    files = [Path(a) for a in args.logs if _exists(a, "LOG_OR_JOBID")]
    ids = [failure.check_job_id(a) for a in args.logs if Path(a) not in files]
    answers = []
    if files:
        found = failure.explain_files(files, facts=facts, expect_net=net, progress=progress)
        answers.append(failure.Answer(what=", ".join(map(str, files)), explanation=found))
    for job_id in ids:
        answers += failure.explain_id(
            job_id, log_dir, facts=facts, expect_net=net, progress=progress
        )
    return answers


def _groups(answers: list[failure.Answer]) -> list[list[failure.Answer]]:
    """The answers grouped by cause (an array's tasks that died of the same), in order."""
    groups: dict[str, list[failure.Answer]] = {}
    for answer in answers:
        found = answer.explanation
        groups.setdefault(found.cause_id or f"unknown: {found.cause}", []).append(answer)
    return list(groups.values())


def _text(answers: list[failure.Answer]) -> str:
    if len(answers) == 1:
        return answers[0].explanation.text(_width())
    parts = []
    for group in _groups(answers):
        jobs = ", ".join(a.what for a in group)
        parts.append(f"== {jobs} ({len(group)} of {len(answers)}):\n"
                     + group[0].explanation.text(_width()))  # fmt: skip
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    answers = _answers(args)
    if args.json:
        if len(answers) == 1:
            print_json(answers[0].to_json())
        else:
            groups = [{"cause_id": g[0].explanation.cause_id, "cause": g[0].explanation.cause,
                       "jobs": [a.what for a in g]} for g in _groups(answers)]  # fmt: skip
            print_json({"jobs": [a.to_json() for a in answers], "groups": groups})
    else:
        print_text(_text(answers))
    return 0 if all(a.explanation.known for a in answers) else 1
