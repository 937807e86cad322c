"""A minimal 2-rank gloo allreduce in the probe protocol (probes/_common.py), used by the
SLURM tests to run torch.distributed across srun's ranks without depending on the full
nccl probe; the real probes/nccl.py is run too when it is present."""

from __future__ import annotations

import _common
import torch
import torch.distributed as dist


def body(ctx: _common.Context) -> None:
    _common.export_rank(ctx.rank)
    dist.init_process_group("gloo", init_method="env://")
    try:
        world = dist.get_world_size()
        t = torch.full((4096,), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        wrong = int((t != want).sum())
        ctx.check(
            "allreduce",
            _common.PASS if wrong == 0 else _common.FAIL,
            f"{world} ranks, {wrong} wrong elements",
            remedy="" if wrong == 0 else "an allreduce returned wrong values",
            world=world,
        )
        ctx.details["master"] = f"{ctx.rank.master_addr}:{ctx.rank.master_port}"
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(_common.main("allreduce", body))
