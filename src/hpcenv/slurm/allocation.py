"""The SLURM allocation this process runs in: its hosts, and how many ranks go where.

``from_env`` (``hpcenv.facts.allocation``, re-exported) reads the ``SLURM_*`` variables a
job step sees; ``hostnames`` expands
the node list (``scontrol show hostnames`` when installed, ``hostlist.expand``
otherwise); ``layout`` places one rank per GPU (or per task) on each host.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcenv.facts.allocation import current, from_env
from hpcenv.models import hostlist
from hpcenv.models.facts import SlurmFacts
from hpcenv.utils.errors import BadInput, CommandFailed

__all__ = ["Layout", "current", "from_env", "hostnames", "layout"]


def hostnames(nodelist: str, *, env: Mapping[str, str] | None = None) -> list[str]:
    """Expand a compressed node list: ``scontrol show hostnames`` when it is installed
    (SLURM is the authority on its own syntax), ``hostlist.expand`` otherwise."""
    if not nodelist.strip():
        raise BadInput("empty SLURM node list; is SLURM_JOB_NODELIST set?")
    hostlist.check_size(nodelist)
    scontrol = shutil.which("scontrol", path=(env or os.environ).get("PATH"))
    if scontrol is not None:
        from hpcenv.tools import command  # here: reading the facts in a job must stay cheap

        try:
            done = command.run([scontrol, "show", "hostnames", nodelist], env=env, timeout=30)
        except CommandFailed:
            pass  # a login node without a readable slurm.conf: fall back to our expander
        else:
            hosts = done.stdout.split()
            if hosts:
                return hosts
    return hostlist.expand(nodelist)


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How many ranks run where: ``per_node`` ranks on each of ``hosts``."""

    hosts: tuple[str, ...]
    per_node: int
    gpus: bool

    @property
    def ranks(self) -> int:
        return self.per_node * len(self.hosts)

    def host_of(self, rank: int) -> str:
        """Block distribution, as srun places tasks by default."""
        return self.hosts[rank // self.per_node]


def layout(alloc: SlurmFacts, hosts: Sequence[str] | None = None) -> Layout:
    """One rank per GPU (SLURM_GPUS_ON_NODE on every node), else one per task, never
    more ranks per node than the job has tasks per node.

    ``sbatch --ntasks-per-node 1`` on a 4-GPU node gives one task per node: srun
    refuses a step of 4 there, so the job's task count wins over its GPU count.
    """
    names = tuple(hosts if hosts is not None else alloc.hosts)
    if not names:
        raise BadInput(
            f"SLURM job {alloc.job_id}: node list {alloc.nodelist!r} gives no hosts; "
            "run inside 'sbatch' or 'salloc'"
        )
    tasks = []  # what the job's tasks allow per node
    if alloc.ntasks_per_node:
        tasks.append(alloc.ntasks_per_node)
    if alloc.ntasks:  # SLURM_TASKS_PER_NODE "3,2" reads as 3: the total bounds it too
        tasks.append(max(1, alloc.ntasks // len(names)))
    if alloc.gpus_on_node:
        return Layout(hosts=names, per_node=min([alloc.gpus_on_node, *tasks]), gpus=True)
    return Layout(hosts=names, per_node=min(tasks) if tasks else 1, gpus=False)
