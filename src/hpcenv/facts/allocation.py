"""The SLURM allocation this process runs in, read from the ``SLURM_*`` variables a job
step sees (through ``hpcenv.kit.slurm_env``, which the probes use too): a fact of the
node, so ``hpcenv facts`` reports it; ``hpcenv.slurm.allocation`` lays ranks out on it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hpcenv.kit import slurm_env
from hpcenv.models import hostlist
from hpcenv.models.facts import SlurmFacts
from hpcenv.utils.errors import BadInput


def from_env(env: Mapping[str, str]) -> SlurmFacts | None:
    """The SLURM allocation this process runs in, or ``None`` outside one."""
    s = slurm_env.read(env)
    if not s.job_id:
        return None
    try:
        hosts = tuple(hostlist.expand(s.nodelist)) if s.nodelist else ()
    except BadInput:
        hosts = ()
    return SlurmFacts(
        job_id=s.job_id,
        nodelist=s.nodelist,
        hosts=hosts,
        nnodes=s.nnodes,
        ntasks=s.ntasks,
        # only an explicit --ntasks-per-node: SLURM_TASKS_PER_NODE is always set ("1(x2)"
        # when no task count was asked for) and would cap ranks below the GPUs
        ntasks_per_node=s.ntasks_per_node,
        procid=s.procid,
        localid=s.localid,
        gpus_on_node=s.gpus_on_node,
        gpus=s.gpus,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        partition=s.partition,
    )


def current(env: Mapping[str, str] | None = None) -> SlurmFacts | None:
    """The allocation this process runs in (``SLURM_JOB_ID`` set), or ``None``."""
    return from_env(os.environ if env is None else env)
