"""The NCCL network plugin (aws-ofi-nccl) and libfabric: present, compatible, really used.

1. finds the plugin NCCL would open (``hpcenv.kit.netplugin``: NCCL_NET_PLUGIN,
   else libnccl-net.so on the loader path) and reads its exported
   ``ncclNetPlugin_vN`` symbols from the ELF dynamic symbol table (``hpcenv.kit.elf``);
2. reads NCCL's version (the environment's libnccl.so.2 via ncclGetVersion, else
   torch's) and fails when NCCL tries no plugin API version the plugin exports
   (``_ofi_api.json``: NCCL's src/plugin/net.cc per release);
3. lists libfabric providers (``fi_info -l``) and checks the expected one (cxi on
   Slingshot);
4. on GPUs, runs a short NCCL init with NCCL_DEBUG=INFO and reads which network
   NCCL really used (``hpcenv.kit.nccl_log``), failing when OFI was expected and NCCL fell
   back to Socket.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hpcenv.kit import (
    children,
    elf,
    libfabric,
    nccl,
    nccl_log,
    netplugin,
    nvidia_proc,
    ports,
    probe,
    versions,
)
from hpcenv.kit.status import Status

HERE = Path(__file__).resolve().parent


def load_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads((HERE / "_ofi_api.json").read_text())
    return table


def nccl_tries(nccl_version: str, table: dict[str, Any] | None = None) -> list[int] | None:
    """Plugin API versions this NCCL release tries, newest first; None when not in the table."""
    for row in (table or load_table())["nccl_tries"]:
        if versions.in_range(nccl_version, row["nccl"]):
            return list(row["versions"])
    return None


def libnccl_candidates(env: dict[str, str] | os._Environ[str]) -> list[str]:
    """The environment's NCCL first (nvidia-nccl-cu12/cu13 wheels), then the loader path."""
    out = []
    purelib = Path(sysconfig.get_paths()["purelib"])
    out += [str(p) for p in sorted(purelib.glob("nvidia/nccl/lib/libnccl.so*"))]
    for d in [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]:
        out += [str(p) for p in sorted(Path(d).glob("libnccl.so*"))]
    found = ctypes.util.find_library("nccl")
    if found:
        out.append(found)
    return list(dict.fromkeys(out))


def nccl_version(env: dict[str, str] | os._Environ[str]) -> tuple[str | None, str]:
    """(version, where it came from)."""
    for lib in libnccl_candidates(env):
        try:
            handle = ctypes.CDLL(lib)
            code = ctypes.c_int(0)
            if handle.ncclGetVersion(ctypes.byref(code)) == 0 and code.value:
                return nccl.decode_version(code.value), lib
        except (OSError, AttributeError):
            continue
    try:
        import torch
    except ImportError:  # no torch: the version stays unknown
        torch = None
    text = nccl.torch_nccl_version(torch) if torch is not None else None
    if text:
        return text, "torch.cuda.nccl.version()"
    return None, "no libnccl.so found (environment, LD_LIBRARY_PATH, loader) and no CUDA torch"


def fi_providers() -> list[str] | None:
    exe = shutil.which("fi_info")
    if exe is None:
        return None
    proc = subprocess.run(
        [exe, "-l"],
        capture_output=True,
        text=True,
        timeout=libfabric.FI_INFO_TIMEOUT_S,
        check=False,
    )
    return list(libfabric.parse_fi_info_list(proc.stdout))


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expect-provider", help="libfabric provider that must be present (cxi)")
    p.add_argument(
        "--expect-net",
        choices=("ofi", "ib", "socket", "any"),
        help="network NCCL must use (default: the profile's platform.nccl_net)",
    )
    p.add_argument("--nccl-init-worker", action="store_true", help=argparse.SUPPRESS)


def check_plugin(ctx: probe.Context, expect: str) -> None:
    plugin = netplugin.find_net_plugin(os.environ)
    version, where = nccl_version(os.environ)
    ctx.details.update(plugin=plugin, nccl_version=version, nccl_version_from=where)
    if version:
        ctx.facts["nccl_version"] = version
    if plugin is None:
        if expect == "ofi":
            ctx.check(
                "plugin",
                Status.FAIL,
                "no NCCL net plugin found (NCCL_NET_PLUGIN / libnccl-net.so on LD_LIBRARY_PATH)",
                remedy="load the aws-ofi-nccl module (Isambard: brics/aws-ofi-nccl/1.8.1 or "
                "brics/nccl) or set NCCL_NET_PLUGIN to the plugin's path",
            )
        else:
            ctx.check(
                "plugin",
                Status.SKIP,
                f"no NCCL net plugin found, and the profile expects none (nccl_net={expect})",
                remedy="nothing to do here; profiles for Slingshot clusters set "
                "platform.nccl_net = 'ofi'",
            )
        return
    try:
        symbols = elf.exported_symbols(plugin)
    except (OSError, elf.ElfError) as exc:
        ctx.check(
            "plugin",
            Status.FAIL,
            f"cannot read {plugin}: {exc}",
            remedy="check the plugin file (a 64-bit shared library)",
        )
        return
    exported = netplugin.plugin_api_versions(symbols)
    ctx.details["plugin_api_versions"] = exported
    if not exported:
        ctx.check(
            "plugin",
            Status.FAIL,
            f"{plugin} exports no ncclNetPlugin_vN symbol",
            remedy="this is not an NCCL net plugin; point NCCL_NET_PLUGIN at aws-ofi-nccl",
        )
        return
    if version is None:
        ctx.check(
            "plugin",
            Status.SKIP,
            f"{plugin} exports API v{exported[-1]}..v{exported[0]}; NCCL version unknown ({where})",
            remedy="install the NCCL the job uses (nvidia-nccl-cu12/cu13) or a CUDA torch so "
            "the API match can be checked",
        )
        return
    tries = nccl_tries(version)
    if tries is None:
        ctx.check(
            "plugin",
            Status.SKIP,
            f"NCCL {version} is not in the plugin API table (probes/_ofi_api.json)",
            remedy="add the API versions this NCCL release tries to probes/_ofi_api.json",
        )
        return
    shared = sorted(set(tries) & set(exported), reverse=True)
    ctx.details.update(nccl_tries=tries, shared_api_versions=shared)
    if not shared:
        ctx.check(
            "plugin",
            Status.FAIL,
            f"NCCL {version} tries plugin API v{tries[0]}..v{tries[-1]} but {plugin} exports "
            f"v{exported[-1]}..v{exported[0]}: NCCL will not load it and falls back to sockets",
            remedy="use an aws-ofi-nccl release that exports an API this NCCL tries (newer "
            "plugin for a newer NCCL), or pin the NCCL wheel to match the plugin",
        )
    else:
        ctx.check(
            "plugin",
            Status.PASS,
            f"{Path(plugin).name} v{shared[0]} matches NCCL {version} "
            f"(tries v{tries[0]}..v{tries[-1]}, plugin v{exported[-1]}..v{exported[0]})",
        )


def check_providers(ctx: probe.Context, expected: str) -> None:
    providers = fi_providers()
    ctx.details["libfabric_providers"] = providers
    if providers is None:
        if expected:
            ctx.check(
                "libfabric",
                Status.FAIL,
                "fi_info not found",
                remedy="load the libfabric module (Isambard: it comes with PrgEnv-cray)",
            )
        else:
            ctx.check(
                "libfabric",
                Status.SKIP,
                "fi_info not found",
                remedy="install libfabric-bin to list providers (only needed on "
                "libfabric networks)",
            )
        return
    if expected and expected not in providers:
        ctx.check(
            "libfabric",
            Status.FAIL,
            f"provider {expected} missing; fi_info -l lists: {', '.join(providers) or 'none'}",
            remedy=f"the node's NIC is not visible to libfabric as {expected}: run on a compute "
            "node, load the libfabric module, check FI_PROVIDER",
        )
        return
    want = f", expected {expected} present" if expected else ""
    shown = ", ".join(providers[:6]) + (", ..." if len(providers) > 6 else "")
    ctx.check("libfabric", Status.PASS, f"{len(providers)} providers ({shown}){want}")


def nccl_init_worker() -> int:
    """One rank of the short NCCL init (run as a child of this probe)."""
    import datetime

    import torch
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", init_method="env://", timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    return 0


def check_nccl_init(ctx: probe.Context, expect: str) -> None:
    if nvidia_proc.driver_version() is None and not nvidia_proc.gpu_models():
        ctx.check(
            "nccl-init",
            Status.SKIP,
            "no GPU: no NVIDIA driver on this node",
            remedy="run on a GPU node to see which network NCCL uses",
        )
        return
    try:
        import torch
    except ImportError:
        ctx.check(
            "nccl-init",
            Status.SKIP,
            "torch is not installed",
            remedy="install torch to see which network NCCL uses",
        )
        return
    if not torch.cuda.is_available():
        ctx.check(
            "nccl-init",
            Status.SKIP,
            "no GPU: NCCL cannot start here",
            remedy="run on a GPU node to see which network NCCL uses",
        )
        return
    world = min(2, torch.cuda.device_count())
    env = dict(os.environ)
    env.update(
        NCCL_DEBUG="INFO",
        NCCL_DEBUG_SUBSYS="INIT,NET",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(ports.free_port()),
        WORLD_SIZE=str(world),
    )
    worker = [sys.executable, str(Path(__file__).resolve()), "--nccl-init-worker"]
    # one deadline for all ranks, well before the runner's timeout; the workers stay in
    # the probe's process group and die with it, so a timeout leaves no GPU held
    workers = children.run_children(
        [(worker, dict(env, RANK=str(k), LOCAL_RANK=str(k))) for k in range(world)],
        probe.deadline(ctx.config),
    )
    text = "\n".join(c.output for c in workers)
    parsed = nccl_log.parse(text)
    ctx.details["nccl_init"] = {
        **parsed,
        "ranks": world,
        "exit_codes": [c.returncode for c in workers],
        "timed_out": [c.timed_out for c in workers],
    }
    status, summary, remedy = nccl_log.judge(parsed, expect)
    hung = [k for k, c in enumerate(workers) if c.timed_out]
    if hung:
        status = Status.FAIL
        summary = f"NCCL init of rank(s) {hung} did not finish before the probe's deadline"
        remedy = "read details.nccl_init, rerun with NCCL_DEBUG=INFO, or raise --timeout"
    elif status == Status.PASS and any(c.returncode != 0 for c in workers):
        tail = text.strip().splitlines()[-1:] or [""]
        status, summary = Status.FAIL, f"{summary}, but the init failed: {tail[0]}"
        remedy = "read details.nccl_init and rerun with NCCL_DEBUG=INFO"
    ctx.check("nccl-init", status, summary, remedy=remedy)


def body(ctx: probe.Context) -> None:
    """NCCL net plugin present and API-compatible, libfabric provider, network used."""
    expect = ctx.args.expect_net or ctx.config.get("nccl_net") or "any"
    provider = ctx.args.expect_provider
    if provider is None:
        provider = ctx.config.get("libfabric_provider") or ""
    ctx.details.update(expect_net=expect, expect_provider=provider)
    check_providers(ctx, provider)
    check_plugin(ctx, expect)
    check_nccl_init(ctx, expect)


if __name__ == "__main__":
    if "--nccl-init-worker" in sys.argv:
        sys.exit(nccl_init_worker())
    sys.exit(probe.main("ofi", body, add_args))
