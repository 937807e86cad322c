"""The ``SLURM_*`` variables a process inside a job step sees, read in one place.

hpcenv reads them through ``hpcenv.slurm.allocation``; probes read them here to map
``srun``'s tasks to ranks (``SLURM_PROCID``...), since they cannot import the rest
of hpcenv inside the target environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: A count, possibly typed or repeated: "4", "4(x2)", "2,1", "a100:4".
_COUNT = re.compile(r"^(?:[\w-]+:)*(\d+)")


def count(value: str | None) -> int | None:
    """The first count in a SLURM value ("4(x2)" -> 4), or None."""
    m = _COUNT.match(value or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True, kw_only=True)
class SlurmEnv:
    """What the variables say; every field None when its variable is unset."""

    job_id: str | None = None
    nodelist: str | None = None
    nnodes: int | None = None
    ntasks: int | None = None
    #: only an explicit --ntasks-per-node (SLURM_NTASKS_PER_NODE)
    ntasks_per_node: int | None = None
    #: the first number of SLURM_TASKS_PER_NODE, always set in a job ("1(x2)" when no
    #: task count was asked for): this layout's tasks per node, not a cap on GPUs
    tasks_per_node: int | None = None
    procid: int | None = None
    localid: int | None = None
    gpus_on_node: int | None = None
    cpus_on_node: int | None = None
    #: only an explicit --cpus-per-task (SLURM_CPUS_PER_TASK)
    cpus_per_task: int | None = None
    #: SLURM_GPUS_PER_NODE / SLURM_GPUS / SLURM_JOB_GPUS as given ("gpu:4", "0,1")
    gpus: str | None = None
    step_gpus: str | None = None
    job_gpus: str | None = None
    partition: str | None = None

    @property
    def in_job(self) -> bool:
        return bool(self.job_id)


def read(env: Mapping[str, str]) -> SlurmEnv:
    def text(*names: str) -> str | None:
        return next((env[n] for n in names if env.get(n)), None)

    def num(*names: str) -> int | None:
        return next((c for n in names if (c := count(env.get(n))) is not None), None)

    return SlurmEnv(
        job_id=text("SLURM_JOB_ID", "SLURM_JOBID"),
        nodelist=text("SLURM_JOB_NODELIST", "SLURM_NODELIST"),
        nnodes=num("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
        ntasks=num("SLURM_NTASKS"),
        ntasks_per_node=num("SLURM_NTASKS_PER_NODE"),
        tasks_per_node=num("SLURM_TASKS_PER_NODE"),
        procid=num("SLURM_PROCID"),
        localid=num("SLURM_LOCALID"),
        gpus_on_node=num("SLURM_GPUS_ON_NODE"),
        cpus_on_node=num("SLURM_CPUS_ON_NODE"),
        cpus_per_task=num("SLURM_CPUS_PER_TASK"),
        gpus=text("SLURM_GPUS_PER_NODE", "SLURM_GPUS", "SLURM_JOB_GPUS"),
        step_gpus=text("SLURM_STEP_GPUS"),
        job_gpus=text("SLURM_JOB_GPUS"),
        partition=text("SLURM_JOB_PARTITION"),
    )
