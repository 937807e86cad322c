"""Allreduce sweep with torch.distributed: every element checked, algbw and busbw reported.

NCCL on GPUs, gloo on CPU, through the same code. Like nccl-tests' all_reduce_perf:
sizes double from --min-bytes to --max-bytes, each timed after warmup, algbw =
bytes / time (GB = 1e9), busbw = algbw * 2(n-1)/n, and ``#wrong`` counts elements
that differ from the exact expected sum (a non-zero count fails: silent corruption
is worse than slowness: NVIDIA/nccl issue 2001). Also flags the GH200 + NCCL >=
2.27.3 + aws-ofi-nccl LL128 corruption risk and its workaround.

Test hook: ``HPCENV_PROBE_CORRUPT=rank:index`` changes one element on that rank
after the checked allreduce, to show that the check catches it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
import time
from typing import Any

from hpcenv.kit import nccl, netplugin, probe, versions
from hpcenv.kit.status import Status

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
CPU_MAX_BYTES = 64 * MIB
#: NCCL releases from which LL128 over the NIC-C2C path corrupts allreduce on GH200 +
#: Slingshot + aws-ofi-nccl (NVIDIA/nccl issue 2001, fix PR 2053).
GH200_LL128_FIRST_BAD = (2, 27, 3)
WORKAROUND = "export NCCL_PROTO=^LL128 (or NCCL_LL128_C2C=0)"


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Doubling sizes from min to max inclusive (max added if not a doubling of min)."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"bad size range {min_bytes}..{max_bytes}")
    out = []
    s = min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= 2
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def parse_size(text: str) -> int:
    """'1K', '64M', '1G', '4096' -> bytes (binary units, like nccl-tests -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 1K, 64M, 1G")
    return int(m.group(1)) * {"": 1, "K": KIB, "M": MIB, "G": GIB}[m.group(2).upper()]


def bus_factor(world: int) -> float:
    """nccl-tests' allreduce bus bandwidth factor 2(n-1)/n."""
    return 2.0 * (world - 1) / world if world > 0 else 0.0


def bandwidths(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9), as nccl-tests computes them."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(world)


def ll128_protected(env: dict[str, str] | os._Environ[str]) -> bool:
    """True when NCCL_PROTO excludes LL128 or NCCL_LL128_C2C=0 (the workaround is set)."""
    proto = env.get("NCCL_PROTO", "")
    if proto:
        items = [p.strip().lower() for p in proto.lstrip("^").split(",")]
        excluded = proto.startswith("^") and "ll128" in items
        allowed_without = not proto.startswith("^") and "ll128" not in items
        if excluded or allowed_without:
            return True
    return env.get("NCCL_LL128_C2C", "") == "0"


def gh200_risk(
    *,
    arch: str,
    capabilities: list[str],
    nccl_version: str | None,
    plugin: str | None,
    env: dict[str, str] | os._Environ[str],
) -> str | None:
    """Why this node is exposed to the GH200 LL128 corruption, or None when it is not."""
    v = versions.key(nccl_version or "")
    if arch != "aarch64" or "9.0" not in capabilities or not v:
        return None
    if v < GH200_LL128_FIRST_BAD or not plugin or ll128_protected(env):
        return None
    return (
        f"GH200 (sm 9.0, aarch64) with NCCL {nccl_version} >= 2.27.3 and the OFI plugin "
        f"{plugin}: LL128 over the NIC-C2C path gives wrong allreduce results "
        "(NVIDIA/nccl issue 2001)"
    )


def corrupt_target(rank: int) -> int | None:
    """The element index the test hook corrupts on this rank, if any."""
    spec = os.environ.get("HPCENV_PROBE_CORRUPT", "")
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if not m or int(m.group(1)) != rank:
        return None
    return int(m.group(2))


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-bytes", type=parse_size, help="smallest size (default 1K)")
    p.add_argument("--max-bytes", type=parse_size, help="largest size (1G GPU, 64M CPU)")
    p.add_argument("--sizes", help="MIN:MAX, e.g. 1K:64M (same as the two options)")
    p.add_argument(
        "--largest-only",
        action="store_true",
        help="time the largest size alone (the bad-node finder's pairs: busbw, not a sweep)",
    )
    p.add_argument("--iters", type=int, default=5, help="timed iterations per size")
    p.add_argument(
        "--warmup", type=int, default=2, help="untimed iterations per size (the first is checked)"
    )


def size_range(ctx: probe.Context, *, gpu: bool) -> tuple[int, int]:
    """The smallest and largest message: --sizes, --min/--max-bytes, the profile's, or
    1 KiB to 1 GiB (capped on CPU ranks)."""
    a = ctx.args
    lo = a.min_bytes or int(ctx.config.get("nccl_min_bytes") or KIB)
    hi = a.max_bytes or int(ctx.config.get("nccl_max_bytes") or GIB)
    if a.sizes:
        lo_s, _, hi_s = a.sizes.partition(":")
        lo, hi = parse_size(lo_s), parse_size(hi_s or lo_s)
    if not gpu and hi > CPU_MAX_BYTES and not (a.max_bytes or a.sizes):
        hi = CPU_MAX_BYTES
    hi = max(hi, lo)
    return (hi if a.largest_only else lo), hi


def check_gh200(ctx: probe.Context, torch: Any, *, gpu: bool, nccl_version: str | None) -> str:
    """The GH200 LL128 hazard: a failure across nodes, a warning on one; the hazard or ""."""
    caps = []
    if gpu:
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            caps.append(f"{major}.{minor}")
    risk = gh200_risk(
        arch=platform.machine(),
        capabilities=caps,
        nccl_version=nccl_version,
        plugin=netplugin.find_net_plugin(os.environ),
        env=os.environ,
    )
    multi_node = ctx.rank.local_world_size < ctx.rank.world_size
    if risk and multi_node:
        ctx.check("gh200-ll128", Status.FAIL, risk, remedy=WORKAROUND)
    elif risk:
        ctx.details["warnings"] = [f"{risk}; matters once jobs span nodes: {WORKAROUND}"]
    return risk or ""


def body(ctx: probe.Context) -> None:
    """Allreduce sweep checking every element (nccl-tests #wrong), with algbw/busbw."""
    torch = probe.import_torch(ctx)
    if torch is None:
        return
    import torch.distributed as dist

    probe.export_rank(ctx.rank)
    gpu = torch.cuda.is_available()
    backend = "nccl" if gpu else "gloo"
    a = ctx.args
    lo, hi = size_range(ctx, gpu=gpu)
    if gpu:
        device = torch.device("cuda", ctx.rank.local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    nccl_version = nccl.torch_nccl_version(torch) if gpu else None
    ctx.details.update(backend=backend, device=str(device), nccl_version=nccl_version)

    risk = check_gh200(ctx, torch, gpu=gpu, nccl_version=nccl_version)

    world = ctx.rank.world_size
    dist.init_process_group(
        backend=backend, init_method="env://", timeout=datetime.timedelta(seconds=120)
    )
    try:
        rows = sweep(
            ctx,
            torch=torch,
            dist=dist,
            device=device,
            byte_sizes=sizes(lo, hi),
            world=world,
            iters=a.iters,
            warmup=a.warmup,
        )
    finally:
        dist.destroy_process_group()

    wrong_total = sum(r["wrong"] for r in rows)
    ctx.details["sizes"] = rows
    peak = max(rows, key=lambda r: r["busbw_gbps"])
    ctx.metrics.update(
        world_size=world,
        sizes=len(rows),
        wrong=wrong_total,
        max_bytes=rows[-1]["bytes"],
        busbw_gbps_at_max=rows[-1]["busbw_gbps"],
        algbw_gbps_at_max=rows[-1]["algbw_gbps"],
        peak_busbw_gbps=peak["busbw_gbps"],
        sweep_seconds=round(sum(r["sweep_s"] for r in rows), 3),
    )
    span = f"{_fmt(rows[0]['bytes'])}..{_fmt(rows[-1]['bytes'])}"
    if wrong_total:
        bad = [r for r in rows if r["wrong"]]
        where = ", ".join(f"{_fmt(r['bytes'])}: {r['wrong']}" for r in bad[:5])
        ctx.check(
            "values",
            Status.FAIL,
            f"#wrong {wrong_total} element(s) across ranks ({where}); {backend}, {world} ranks",
            remedy="allreduce returned wrong values: do not train on this stack; "
            + (WORKAROUND + " on GH200 + OFI, " if risk else "")
            + "check the node with gpu-health and rerun; report the node to the admins",
        )
    else:
        warn = f"; warning: {ctx.details['warnings'][0]}" if ctx.details.get("warnings") else ""
        ctx.check(
            "values",
            Status.PASS,
            f"{backend} allreduce {span} x {world} ranks, every element correct, "
            f"busbw {rows[-1]['busbw_gbps']:.2f} GB/s at {_fmt(rows[-1]['bytes'])}{warn}",
        )


def _fmt(n: int) -> str:
    for unit, size in (("G", GIB), ("M", MIB), ("K", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def sweep(
    ctx: probe.Context,
    *,
    torch: Any,
    dist: Any,
    device: Any,
    byte_sizes: list[int],
    world: int,
    iters: int,
    warmup: int,
) -> list[dict[str, Any]]:
    """Check then time each size, like nccl-tests: the first warmup iteration runs on
    fresh values and is checked element by element, so checking costs no extra
    collective; per-rank wrong counts are summed over ranks once, at the end."""
    rank = ctx.rank.rank
    corrupt = corrupt_target(rank)
    rows = []
    mine_counts = []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    # rank r holds (r+1) + (i mod 13): the sum over ranks, n(i mod 13) + n(n+1)/2, is
    # exact in float32. Pattern and expected sums are made once and sliced per size.
    base_sum = world * (world + 1) / 2
    largest = max(1, max(byte_sizes) // 4)
    tile = torch.arange(13, dtype=torch.float32, device=device)
    pattern_all = tile.repeat((largest + 12) // 13)[:largest]
    expected_all = pattern_all * float(world) + base_sum
    for nbytes in byte_sizes:
        t_size = time.perf_counter()
        count = max(1, nbytes // 4)
        pattern = pattern_all[:count]
        buf = pattern + float(rank + 1)
        dist.all_reduce(buf)  # the checked run (first warmup iteration)
        if corrupt is not None and corrupt < count and nbytes == byte_sizes[0]:
            buf[corrupt] += 1.0
        expected = expected_all[:count]
        mine = 0 if torch.equal(buf, expected) else int((buf != expected).sum().item())
        mine_counts.append(mine)
        for _ in range(max(0, warmup - 1)):
            dist.all_reduce(buf)
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        sync()
        seconds = (time.perf_counter() - start) / max(1, iters)
        algbw, busbw = bandwidths(count * 4, seconds, world)
        rows.append(
            {
                "bytes": count * 4,
                "count": count,
                "type": "float32",
                "redop": "sum",
                "time_us": round(seconds * 1e6, 2),
                "algbw_gbps": round(algbw, 4),
                "busbw_gbps": round(busbw, 4),
                "wrong_this_rank": mine,
                "sweep_s": time.perf_counter() - t_size,
            }
        )
    totals = torch.tensor(mine_counts, dtype=torch.int64, device=device)
    dist.all_reduce(totals)
    for row, total in zip(rows, totals.tolist(), strict=True):
        row["wrong"] = int(total)
    return rows


if __name__ == "__main__":
    sys.exit(probe.main("nccl", body, add_args))
