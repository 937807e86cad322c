"""A probe whose rank 1 dies at start while rank 0 waits forever, as a broken node
would leave a collective: the SLURM tests check the job ends with rank 1 named."""

from __future__ import annotations

import sys
import time

from hpcenv.kit import probe


def body(ctx: probe.Context) -> None:
    if ctx.rank.rank == 1:
        print("rank 1: simulated node failure", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(3600)  # waits for a peer that never comes


if __name__ == "__main__":
    raise SystemExit(probe.main("die", body))
