"""What ``jax.distributed.initialize()`` reads of a SLURM job (``jax_slurm.toml``): the
variables, the arguments each fills, the coordinator's port, and the task layouts its
one-GPU-per-task default can drive. ``job/jax_job.py`` decides with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from hpcenv.knowledge import tables

FILE = "jax_slurm.toml"


@dataclass(frozen=True, kw_only=True)
class Variable:
    """One variable SlurmCluster reads: the argument it fills and how."""

    name: str
    fills: str
    how: str


@dataclass(frozen=True, kw_only=True)
class JaxSlurm:
    """The file, read."""

    call: str  # jax.distributed.initialize
    present: str  # SLURM_JOB_ID: SlurmCluster is asked when it is set
    before: tuple[str, ...]  # variables of cluster kinds asked before SLURM (mpirun's)
    deactivate: str  # cluster_detection_method's value that asks no cluster
    arguments: tuple[str, ...]  # what a cluster fills when the call leaves it None
    argument_env: tuple[tuple[str, str], ...]  # argument -> variable read before the cluster
    imports: tuple[str, ...]  # top-level imports marking a JAX program
    variables: tuple[Variable, ...]
    port_base: int
    port_span: int
    device_ids_env: str  # JAX_LOCAL_DEVICE_IDS
    device_ids_env_since: tuple[int, ...]  # the first jax reading it
    binds_each_task: tuple[str, ...]  # sbatch options giving each task its own GPU
    sources: tuple[str, ...]

    def port(self, job_id: int) -> int:
        """The coordinator's port for ``job_id`` (slurm_cluster.py's rule)."""
        return self.port_base + job_id % self.port_span


@cache
def get() -> JaxSlurm:
    """The file's one table."""
    data = tables.read(FILE)
    det, slurm, layout = data["detection"], data["slurm"], data["layout"]
    since = tuple(int(p) for p in str(layout["device_ids_env_since"]).split("."))
    return JaxSlurm(
        call=str(det["call"]),
        present=str(det["present"]),
        before=tuple(str(v) for v in det["before"]),
        deactivate=str(det["deactivate"]),
        arguments=tuple(str(a) for a in det["arguments"]),
        argument_env=tuple((str(k), str(v)) for k, v in det["argument_env"].items()),
        imports=tuple(str(m) for m in det["imports"]),
        variables=tuple(
            Variable(name=str(v["name"]), fills=str(v["fills"]), how=str(v["how"]))
            for v in data["variable"]
        ),
        port_base=int(slurm["port_base"]),
        port_span=int(slurm["port_span"]),
        device_ids_env=str(layout["device_ids_env"]),
        device_ids_env_since=since,
        binds_each_task=tuple(str(o) for o in layout["binds_each_task"]),
        sources=(str(det["source"]), str(slurm["source"]), str(layout["source"])),
    )


__all__ = ["FILE", "JaxSlurm", "Variable", "get"]
