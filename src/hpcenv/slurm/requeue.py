"""The bad-node gate that heals: ``hpcenv sbatch --gate pairs --requeue-bad N -- CMD``.

The job script runs the bad-node finder (``hpcenv probe nccl --pairs --json``,
``hpcenv.slurm.pairs``) before the command. When it fails, the script hands its JSON
report to ``python -I -m hpcenv.slurm.requeue``, which:

- says in the job log which nodes the finder named and its evidence (each one's pairs
  and their busbw, the rule it broke);
- when it named none (a failure it cannot pin on a node), exits ``NO_NODE`` (0): the
  gate fails as any other, and the chain ends;
- when requeues are left (``HPCENV_REQUEUE`` counts them over the chain, at most N):
  cancels the queued next link, resubmits this same link (the script, with
  ``HPCENV_CHAIN_LINK`` unchanged) with the nodes added to ``--exclude``, and exits
  ``REQUEUED``. The exclusion is carried in ``HPCENV_EXCLUDE``, which the job passes on
  to every later link (``sbatch --exclude="$HPCENV_EXCLUDE"``), so no later link of the
  chain lands on them; the new job queues its own next link;
- when N requeues are used, exits ``USED_UP``: the link ends naming the nodes, and the
  chain ends.

Either way it writes the outcome (a JSON file beside the logs) that ``hpcenv sbatch
--wait`` reads to exit ``BadNodes`` (11) instead of the command's code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcenv.tools import command
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadNodes, CommandFailed
from hpcenv.utils.output import print_text

#: Exit codes of this helper, for the job script.
NO_NODE, REQUEUED, USED_UP = 0, BadNodes.exit_code, 12


def _say(text: str) -> None:
    print_text(f"hpcenv requeue: {text}\n")


def bad_nodes(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(host, evidence) of each node the finder's report excludes."""
    found = report.get("pairs")
    nodes = (found.get("nodes") if isinstance(found, dict) else None) or ()
    named = [str(h) for h in report.get("exclude") or ()]
    why = {str(v.get("host")): str(v.get("why")) for v in nodes if isinstance(v, dict)}
    return [(h, why.get(h, "named by the bad-node finder")) for h in named]


def merged(current: str, new: Sequence[str]) -> str:
    """``current`` (a SLURM host list, maybe empty) with ``new`` hosts added once."""
    have = [h for h in current.split(",") if h]
    return ",".join([*have, *(h for h in new if h not in have)])


def job_env(environ: Mapping[str, str], **values: str) -> dict[str, str]:
    """This job's environment without its SLURM_* variables (SLURM_CONF kept), with
    ``values``: what a job submitted from inside a job must start from."""
    env = {k: v for k, v in environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    return {**env, **values}


def resubmit(script: str, exclude: str, env: Mapping[str, str]) -> str:
    """``sbatch --parsable --exclude=... SCRIPT``: the new job id."""
    done = command.run(
        ["sbatch", "--parsable", f"--exclude={exclude}", script], env=env, timeout=120, check=False
    )
    job = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job.isdigit():
        raise RuntimeError(f"sbatch refused the requeue: {done.stderr.strip()[-300:]}")
    return job


def run(args: argparse.Namespace) -> int:
    verdict_at = time.time()
    try:
        report = json.loads(args.report.read_text())
    except (OSError, ValueError) as exc:
        _say(f"no report from the bad-node finder ({exc}); no node to exclude")
        return NO_NODE
    bad = bad_nodes(report) if isinstance(report, dict) else []
    if not bad:
        _say("the bad-node finder failed without naming a node; nothing to exclude")
        return NO_NODE
    for host, why in bad:
        _say(f"bad node {host}: {why}")
    exclude = merged(args.exclude, [h for h, _ in bad])
    outcome: dict[str, Any] = {
        "ended_by": "requeue",
        "exit_code": REQUEUED,
        "bad_nodes": [h for h, _ in bad],
        "evidence": dict(bad),
        "exclude": exclude,
        "verdict_at": verdict_at,
        "link": args.link,
    }
    if args.attempt >= args.max:
        _say(
            f"--requeue-bad {args.max} used up ({args.attempt} requeue(s) in this chain): "
            f"the link ends; exclude them yourself: --exclude={exclude}"
        )
        return _written(
            args.outcome, {**outcome, "ended_by": "bad-nodes", "new_job": None}, USED_UP
        )
    if args.cancel:
        command.run(["scancel", args.cancel], timeout=60, check=False)
        _say(f"the queued next link (job {args.cancel}) cancelled: the new job queues its own")
    env = job_env(
        os.environ,
        HPCENV_CHAIN_LINK=str(args.link),
        HPCENV_EXCLUDE=exclude,
        HPCENV_REQUEUE=str(args.attempt + 1),
        HPCENV_REQUEUE_VERDICT=f"{verdict_at:.3f}",
    )
    try:
        job = resubmit(args.script, exclude, env)
    except (OSError, RuntimeError, CommandFailed) as exc:
        _say(f"could not resubmit the link: {exc}; exclude them yourself: --exclude={exclude}")
        return _written(
            args.outcome, {**outcome, "ended_by": "bad-nodes", "new_job": None}, USED_UP
        )
    _say(
        f"link {args.link} resubmitted as job {job} with --exclude={exclude} "
        f"(requeue {args.attempt + 1} of at most {args.max}); this job ends with exit {REQUEUED}"
    )
    return _written(args.outcome, {**outcome, "new_job": job}, REQUEUED)


def _written(path: Path | None, outcome: Mapping[str, Any], code: int) -> int:
    if path is not None:
        fsio.write_text(path, json.dumps(outcome) + "\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcenv.slurm.requeue")
    parser.add_argument("--report", type=Path, required=True, help="the finder's JSON report")
    parser.add_argument("--script", required=True, help="the job script to resubmit")
    parser.add_argument("--link", type=int, required=True)
    parser.add_argument("--attempt", type=int, default=0, help="requeues so far in the chain")
    parser.add_argument("--max", type=int, required=True, help="--requeue-bad N")
    parser.add_argument("--exclude", default="", help="the hosts excluded so far")
    parser.add_argument("--cancel", default="", help="the queued next link's job id")
    parser.add_argument("--outcome", type=Path, default=None, help="JSON file for --wait")
    return run(parser.parse_args(argv))


__all__ = ["NO_NODE", "REQUEUED", "USED_UP", "bad_nodes", "job_env", "merged"]

if __name__ == "__main__":
    sys.exit(main())
