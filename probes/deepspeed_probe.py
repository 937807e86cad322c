"""DeepSpeed: what ``ds_report`` would show without its noise, and one real JIT op build.

Checks, each with its reason:

- ``installed``: deepspeed's version and the accelerator it picked (``cuda``, or ``cpu``
  on a node without a CUDA torch, where ``DS_ACCELERATOR=cpu`` is set for it);
- ``nvcc``: the nvcc DeepSpeed's JIT ops would use (``$CUDA_HOME/bin/nvcc``, else on
  PATH) against torch's CUDA major: another major fails every op build at the first
  ``deepspeed.initialize``; none at all is a warning (prebuilt ops only);
- ``arch-list``: ``TORCH_CUDA_ARCH_LIST`` against the GPUs (GH200 needs ``9.0a`` for the
  kernels hpcenv's sm90a fix is about);
- ``jit``: one op actually built and loaded, within the probe's time bound: CPUAdam
  (g++ only) on a CPU node, FusedAdam (nvcc) on a GPU node, into
  ``$TORCH_EXTENSIONS_DIR`` (where training reuses it).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import time

from hpcenv.kit import children, probe
from hpcenv.kit.status import Status

#: The op built per accelerator: small, and the one ZeRO offload and Adam need first.
BUILDERS = {"cpu": "CPUAdamBuilder", "cuda": "FusedAdamBuilder"}
BUILD = (
    "import sys\n"
    "from deepspeed.accelerator import get_accelerator\n"
    "b = get_accelerator().create_op_builder(sys.argv[1])\n"
    "if b is None or not b.is_compatible(): sys.exit(3)\n"
    "b.load(verbose=False)\n"
    "print('built', b.absolute_name())\n"
)


def nvcc_release(nvcc: str) -> str | None:
    """``X.Y`` from ``nvcc --version`` (``Cuda compilation tools, release 12.6, ...``)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out.stdout)
    return m.group(1) if m else None


def _nvcc(ctx: probe.Context, torch_cuda: str | None) -> None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    if not nvcc or not os.path.exists(nvcc):
        why = "no nvcc ($CUDA_HOME/bin/nvcc or on PATH): only prebuilt ops can load"
        status = Status.SKIP if torch_cuda is None else Status.PASS
        ctx.check("nvcc", status, why, remedy="load the cluster's CUDA module for JIT ops")
        return
    release = nvcc_release(nvcc)
    ctx.details["nvcc"] = {"path": nvcc, "release": release}
    if torch_cuda is None or release is None:
        ctx.check("nvcc", Status.PASS, f"nvcc {release or '?'} at {nvcc}")
    elif release.split(".")[0] != torch_cuda.split(".")[0]:
        ctx.check(
            "nvcc",
            Status.FAIL,
            f"nvcc {release} ({nvcc}) but torch is built with CUDA {torch_cuda}: DeepSpeed's "
            "JIT op builds fail at the first deepspeed.initialize",
            remedy=f"load a CUDA {torch_cuda.split('.')[0]}.x module (or set CUDA_HOME to one)",
        )
    else:
        ctx.check("nvcc", Status.PASS, f"nvcc {release} matches torch's CUDA {torch_cuda}")


def _arch_list(ctx: probe.Context, torch: object, gpu: bool) -> None:
    wanted = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    ctx.details["TORCH_CUDA_ARCH_LIST"] = wanted
    if not gpu:
        return
    cuda = torch.cuda  # type: ignore[attr-defined]
    caps = sorted(
        {"{}.{}".format(*cuda.get_device_capability(i)) for i in range(cuda.device_count())}
    )
    if "9.0" in caps and wanted and "9.0a" not in wanted:
        ctx.check(
            "arch-list",
            Status.FAIL,
            f"TORCH_CUDA_ARCH_LIST={wanted!r} on GH200/H100 (9.0) lacks 9.0a",
            remedy="add 9.0a (hpcenv's sm90a fix sets it in the built environment)",
        )
    else:
        ctx.check(
            "arch-list", Status.PASS, f"TORCH_CUDA_ARCH_LIST={wanted or '(unset)'}, GPUs {caps}"
        )


def _jit(ctx: probe.Context, accelerator: str) -> None:
    builder = BUILDERS.get(accelerator)
    if builder is None:
        ctx.check("jit", Status.SKIP, f"no op to build on the {accelerator} accelerator")
        return
    start = time.monotonic()
    (child,) = children.run_children(
        [([sys.executable, "-c", BUILD, builder], dict(os.environ))], probe.deadline(ctx.config)
    )
    took = time.monotonic() - start
    ctx.metrics["jit_build_s"] = round(took, 1)
    tail = child.output.strip().splitlines()[-3:]
    if child.timed_out:
        ctx.check(
            "jit",
            Status.FAIL,
            f"building {builder} did not finish in {took:.0f} s",
            remedy="raise the probe's timeout or prebuild the ops (DS_BUILD_OPS=1 at install)",
        )
    elif child.returncode == 3:
        ctx.check("jit", Status.SKIP, f"{builder} is not compatible with this node")
    elif child.returncode != 0:
        ctx.check(
            "jit",
            Status.FAIL,
            f"building {builder} failed: {' | '.join(tail)}",
            remedy="install the compiler it needs (g++; nvcc of torch's CUDA major)",
        )
    else:
        ctx.check("jit", Status.PASS, f"{builder} built and loaded in {took:.0f} s")


def body(ctx: probe.Context) -> None:
    """Version and accelerator, nvcc vs torch's CUDA, the arch list, one JIT op build."""
    try:
        version = md.version("deepspeed")
    except md.PackageNotFoundError:
        ctx.check(
            "installed",
            Status.SKIP,
            "deepspeed is not installed in this environment",
            remedy="add deepspeed to your project (or [packages] install) and rebuild",
        )
        return
    torch = probe.import_torch(ctx)
    if torch is None:
        return
    gpu = bool(torch.cuda.is_available())
    if not gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no CUDA torch: DeepSpeed's CPU path
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator().device_name()
    torch_cuda = torch.version.cuda
    ctx.details.update(deepspeed=version, accelerator=accelerator, torch_cuda=torch_cuda)
    ctx.check("installed", Status.PASS, f"deepspeed {version}, accelerator {accelerator}")
    _nvcc(ctx, torch_cuda if gpu else None)
    _arch_list(ctx, torch, gpu)
    _jit(ctx, accelerator)


if __name__ == "__main__":
    sys.exit(probe.main("deepspeed", body))
