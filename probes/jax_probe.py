"""JAX: the devices it sees against the node's GPUs, and a psum across the job's processes.

Each rank imports jax and reports its backend and devices. On a node with NVIDIA GPUs a JAX
that sees none (a CPU-only install, a CUDA plugin that failed to load, a driver too old for
its CUDA) fails with what to install. With more than one rank, the ranks form one JAX
job with ``jax.distributed.initialize`` (the coordinator at MASTER_ADDR:MASTER_PORT, one
process per rank; on a CPU node its collectives go through gloo), and a ``psum`` over
every device of every process must equal the sum of what each contributed: a wrong value
or a hang is the finding. Under SLURM the runner's ranks are srun's tasks, so the layout
tested is the job's own (one process per GPU or per node).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from hpcenv.kit import nvidia_proc, probe
from hpcenv.kit.status import Status


def expected_sum(world: int, local_devices: int) -> float:
    """What the psum returns when process ``r`` puts ``r + 1`` on each of its devices."""
    return float(sum((r + 1) * local_devices for r in range(world)))


def _shard_map(jax: Any) -> Any:
    """``jax.shard_map`` (JAX >= 0.7), else the experimental one it replaced."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map  # type: ignore[import-not-found]

    return shard_map


def psum_across(jax: Any, rank: int) -> tuple[float, int]:
    """(the psum one device got, devices summed over): each process puts ``rank + 1`` on
    each local device; one psum over a mesh of every device of the job."""
    import numpy as np  # type: ignore[import-not-found]  # the target's, not hpcenv's
    from jax.sharding import NamedSharding  # type: ignore[import-not-found]
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    local = np.full((jax.local_device_count(),), float(rank + 1), dtype=np.float32)
    arr = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    summed = jax.jit(
        _shard_map(jax)(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    )(arr)
    return float(np.asarray(summed.addressable_data(0)).reshape(-1)[0]), jax.device_count()


def _import_jax(ctx: probe.Context) -> Any:
    try:
        import jax  # type: ignore[import-not-found]  # the target environment's
    except ImportError as exc:
        ctx.check(
            "jax",
            Status.SKIP,
            f"jax does not import in {sys.prefix}: {exc}",
            remedy="install jax in the environment (jax[cuda12] or jax[cuda13] for NVIDIA "
            "GPUs), or leave 'jax' out of the profile's [probes] run",
        )
        return None
    return jax


def check_devices(ctx: probe.Context, jax: Any, gpus: int) -> bool:
    """The devices JAX sees against the node's GPUs; False when a GPU node runs JAX on CPU."""
    devices = jax.local_devices()
    platform = devices[0].platform if devices else "none"
    ctx.details.update(jax=jax.__version__, backend=jax.default_backend(), platform=platform,
                       local_devices=[str(d) for d in devices])  # fmt: skip
    ctx.facts["jax"] = jax.__version__
    ctx.metrics.update(devices=len(devices))
    if gpus and platform != "gpu":
        ctx.check(
            "devices",
            Status.FAIL,
            f"this node has {gpus} NVIDIA GPU(s) but JAX {jax.__version__} runs on {platform}",
            remedy="install JAX's CUDA plugin for the driver (jax[cuda12] needs driver >= "
            "525.60.13, jax[cuda13] >= 580 and compute capability >= 7.5: 'hpcenv audit' "
            "says which runs here), and check the plugin's import error in stderr",
        )
        return False
    ctx.check("devices", Status.PASS, f"JAX {jax.__version__}: {len(devices)} {platform} device(s)")
    return True


def body(ctx: probe.Context) -> None:
    """Devices vs the node's GPUs; with several ranks, one psum across all of them."""
    jax = _import_jax(ctx)
    if jax is None:
        return
    r = ctx.rank
    gpus = len(nvidia_proc.gpu_models())
    if r.world_size > 1:
        if not gpus:  # CPU collectives across processes go through gloo
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        local_ids = [r.local_rank % gpus] if gpus and r.local_world_size > 1 else None
        jax.distributed.initialize(
            coordinator_address=f"{r.master_addr}:{r.master_port}",
            num_processes=r.world_size,
            process_id=r.rank,
            local_device_ids=local_ids,
        )
    try:
        if not check_devices(ctx, jax, gpus) or r.world_size == 1:
            return
        started = time.monotonic()
        got, devices = psum_across(jax, r.rank)
        want = expected_sum(jax.process_count(), jax.local_device_count())
        ctx.metrics.update(processes=jax.process_count(), psum=got,
                           psum_s=round(time.monotonic() - started, 3))  # fmt: skip
        if got != want:
            ctx.check(
                "psum",
                Status.FAIL,
                f"psum over {devices} device(s) of {jax.process_count()} processes returned "
                f"{got}, expected {want}",
                remedy="do not train on this stack: check the network with the nccl probe and "
                "the node with gpu-health",
            )
        else:
            ctx.check(
                "psum",
                Status.PASS,
                f"psum over {devices} device(s) of {jax.process_count()} processes = {got}",
            )
    finally:
        if r.world_size > 1:
            jax.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(probe.main("jax", body))
