"""A minimal 2-rank gloo allreduce in the probe protocol (``hpcenv.kit.probe``), used by
the SLURM tests to run torch.distributed across srun's ranks without depending on the
full nccl probe; the real probes/nccl_probe.py is run too."""

from __future__ import annotations

import torch
import torch.distributed as dist

from hpcenv.kit import probe
from hpcenv.kit.status import Status


def body(ctx: probe.Context) -> None:
    probe.export_rank(ctx.rank)
    dist.init_process_group("gloo", init_method="env://")
    try:
        world = dist.get_world_size()
        t = torch.full((4096,), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        wrong = int((t != want).sum())
        ctx.check(
            "allreduce",
            Status.PASS if wrong == 0 else Status.FAIL,
            f"{world} ranks, {wrong} wrong elements",
            remedy="" if wrong == 0 else "an allreduce returned wrong values",
            world=world,
        )
        ctx.details["master"] = f"{ctx.rank.master_addr}:{ctx.rank.master_port}"
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(probe.main("allreduce", body))
