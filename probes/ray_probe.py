"""Ray: start or join a cluster, run one task on every node, check the GPU resources.

With RAY_ADDRESS set (a cluster started by the SLURM job) the probe joins it;
otherwise it starts a small local Ray (2 CPUs, no dashboard, on 127.0.0.1) and
always shuts it down. One task is pinned to each alive node (NodeAffinity), so a
node that joined but cannot run work is named; the cluster's GPU count must equal
what the allocation gave (CUDA_VISIBLE_DEVICES / SLURM_GPUS_ON_NODE per node).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from hpcenv.kit import nvidia_proc, probe, slurm_env
from hpcenv.kit.status import Status


def visible_gpus(env: Mapping[str, str], node_gpus: int) -> int:
    """GPUs one node may use: CUDA_VISIBLE_DEVICES, else SLURM_GPUS_ON_NODE, else all."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return len([d for d in cvd.split(",") if d.strip() and d.strip() != "-1"])
    on_node = slurm_env.read(env).gpus_on_node
    return on_node if on_node is not None else node_gpus


def where() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def body(ctx: probe.Context) -> None:
    """Start/join Ray, one task per alive node, GPU resources vs the allocation."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    address = os.environ.get("RAY_ADDRESS", "")
    ctx.details.update(ray=ray.__version__, address=address or "local (started by the probe)")
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(
            num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
        )
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        remote = ray.remote(num_cpus=0)(where)
        refs = {
            n["NodeID"]: remote.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote()
            for n in nodes
        }
        ran, failed = {}, []
        for node_id, ref in refs.items():
            try:
                ran[node_id] = ray.get(ref, timeout=60)
            except Exception as exc:  # a node that cannot run a task is the finding
                failed.append(f"{node_id[:8]}: {type(exc).__name__}: {exc}")
        resources = ray.cluster_resources()
    finally:
        ray.shutdown()
    hosts = sorted({r["host"] for r in ran.values()})
    ctx.details.update(nodes=len(nodes), task_hosts=hosts, resources=resources)
    ctx.metrics.update(nodes=len(nodes), cpus=resources.get("CPU", 0), gpus=resources.get("GPU", 0))
    if failed or not ran:
        ctx.check(
            "tasks",
            Status.FAIL,
            f"tasks ran on {len(ran)} of {len(nodes)} alive node(s); failed: {failed[:3]}",
            remedy="a Ray worker node cannot run tasks: check its raylet log "
            "(/tmp/ray/session_latest/logs) and that the node has the same venv",
        )
    else:
        ctx.check(
            "tasks",
            Status.PASS,
            f"Ray {ray.__version__}: a task ran on each of {len(nodes)} node(s) "
            f"({', '.join(hosts)})",
        )
    per_node = visible_gpus(os.environ, len(nvidia_proc.gpu_models()))
    expected = per_node * len(nodes)
    have = int(resources.get("GPU", 0))
    if have != expected:
        ctx.check(
            "gpus",
            Status.FAIL,
            f"Ray sees {have} GPU(s), the allocation gives {expected} "
            f"({per_node} per node x {len(nodes)})",
            remedy="start Ray workers with --num-gpus matching the allocation "
            "(SLURM_GPUS_ON_NODE), and keep CUDA_VISIBLE_DEVICES as SLURM set it",
        )
    else:
        ctx.check("gpus", Status.PASS, f"Ray GPU resources {have} match the allocation")


if __name__ == "__main__":
    sys.exit(probe.main("ray", body))
