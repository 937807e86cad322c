"""The SLURM steps of a job script, handed the job as data by ``hpcenv.job.render``.

- ``on_nodes_lines``: ``on_nodes CMD...`` runs CMD once per node (one ``srun`` task each;
  on a one-node job, here);
- ``launch_lines``: the command's own step: per node, per task, or on the head node of a
  Ray cluster over the allocation;
- ``chain_lines``: ``--chain N``: the next link queued now with ``sbatch --dependency``,
  cancelled with ``scancel`` when this one ends the chain.

The lines hold no user text: the command is the bash array ``cmd``, made by the job.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from hpcenv.slurm import survive
from hpcenv.utils.output import shell_quote


class ChainedJob(survive.CommandJob, Protocol):
    """What ``chain_lines`` reads of the job (``hpcenv.job.render.CommandJob``)."""

    @property
    def chain(self) -> int: ...
    @property
    def dependency(self) -> str: ...


def on_nodes_lines() -> list[str]:
    """``on_nodes``: one task per node through srun; here alone on a one-node job."""
    return [
        "on_nodes() {  # one task per node through srun; here alone on a one-node job",
        '  if [ "$nodes" -gt 1 ]; then',
        '    srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --overlap '
        '--kill-on-bad-exit=1 -- "$@"',
        "  else",
        '    "$@"',
        "  fi",
        "}",
    ]


#: On each node, before the command: NODE_RANK is the node's (SLURM_NODEID); a fixed
#: script, the command's words are its arguments ("$@"), never part of it.
_NODE_RANK = 'bash -c \'export NODE_RANK="$SLURM_NODEID"; exec "$@"\' hpcenv-node'


def launch_lines(
    launch: str, log_dir: Path, *, from_batch: bool = False, also_export: str = ""
) -> list[str]:
    """The command's step, backgrounded (``$!`` is its process group): ``task``: srun over
    every task; ``node``: one task per node; ``ray``: a Ray cluster over the allocation
    (``python -m hpcenv.slurm.ray_cluster``) running CMD on its head node. ``from_batch``:
    the command is the user's own srun/mpirun, which spreads itself: run once from the batch
    step, never nested in a step holding the nodes. ``also_export``: assignments exported
    beside NODE_RANK on each node (a container runtime's prefixed copy of it)."""
    if from_batch:
        return ['"${cmd[@]}" &']
    rank = _NODE_RANK
    if also_export:
        rank = rank.replace(
            'NODE_RANK="$SLURM_NODEID";', f'NODE_RANK="$SLURM_NODEID" {also_export};'
        )
    if launch == "task":
        return [f'srun --kill-on-bad-exit=1 -- {rank} "${{cmd[@]}}" &']
    if launch == "node":
        return [
            'srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --kill-on-bad-exit=1 '
            f'-- {rank} "${{cmd[@]}}" &'
        ]
    ray_logs = shell_quote(str(log_dir))
    return [
        'ray_hosts=$(IFS=,; echo "${hosts[*]}")',
        f'{shell_quote(sys.executable)} -I -m hpcenv.slurm.ray_cluster --hosts "$ray_hosts" '
        f'--python "$VIRTUAL_ENV/bin/python" --log-dir {ray_logs}/"ray-$SLURM_JOB_ID" '
        '--inherit-output -- "${cmd[@]}" &',
    ]


def chain_lines(spec: ChainedJob) -> list[str]:
    """``HPCENV_CHAIN_LINK`` of ``spec.chain``, ``end_chain`` (``scancel`` of the queued
    next link), and with a chain the next link queued at once (``sbatch
    --dependency=afterany:<this job>`` or ``singleton``, this script again)."""
    n = spec.chain
    lines = [
        "",
        f"# --- chain: link $HPCENV_CHAIN_LINK of at most {n}",
        "link=${HPCENV_CHAIN_LINK:-1}",
        'case $link in ""|*[!0-9]*) echo "hpcenv: HPCENV_CHAIN_LINK=$link is not a link '
        'number" >&2; exit 2 ;; esac',
        f"export HPCENV_CHAIN_LINK=$link HPCENV_CHAIN_MAX={n}",
        *survive.exclude_lines(spec),
        "next=",
        "end_chain() {  # cancel the queued next link, saying why",
        '  if [ -n "$next" ]; then',
        '    scancel "$next" || true',
        '    echo "hpcenv: $1: link $((link + 1)) (job $next) cancelled; the chain ends here"',
        "    next=",
        "  fi",
        "}",
    ]
    if n == 1:
        return lines
    dependency = "singleton" if spec.dependency == "singleton" else 'afterany:"$this_job"'
    return [
        *lines,
        "# the next link is queued now and starts when this job ends, however it ends; it",
        "# gets this job's environment without its SLURM_* variables",
        f'if [ "$link" -lt {n} ]; then',
        "  this_job=$SLURM_JOB_ID",
        "  if next=$(",
        '    for v in $(compgen -e); do case $v in SLURM_CONF) ;; SLURM_*) unset "$v" ;; esac; '
        "done",
        f"    HPCENV_CHAIN_LINK=$((link + 1)) sbatch --parsable {survive.EXCLUDE_ARG}"
        f'--dependency={dependency} "$0"'
        if spec.requeue_bad
        else f"    HPCENV_CHAIN_LINK=$((link + 1)) sbatch --parsable "
        f'--dependency={dependency} "$0"',
        "  ); then",
        "    next=${next%%;*}",
        f'    echo "hpcenv: chain link $link of {n}; link $((link + 1)) queued as job $next"',
        "  else",
        '    echo "hpcenv: warning: could not queue link $((link + 1)); the chain ends with '
        'this link" >&2',
        "    next=",
        "  fi",
        "else",
        f'  echo "hpcenv: chain link $link of {n}: the last"',
        "fi",
    ]


__all__ = ["chain_lines", "launch_lines", "on_nodes_lines"]
