"""torch works on this node: version and CUDA build, GPU archs compiled in, a kernel
runs, matmul agrees with the CPU, bf16 support, and which libnccl.so.2 it loaded
(against the profile's ``[job] nccl``).

The symptom of a wrong wheel variant (cu130 on a V100: no cu13 build carries sm_70) is
"no kernel image is available for execution on the device" at the first kernel,
not at import; this probe triggers that on purpose and names the variant to
install. On a CPU node the CUDA checks skip with the reason and the CPU checks
still run, so the probe passes.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

from hpcenv.kit import coverage, nccl, probe
from hpcenv.kit.status import Status


def arch_supported(capability: str, arch_list: list[str]) -> tuple[bool, str]:
    """Whether a GPU of ``capability`` ("9.0") can run this build, by the one coverage
    rule (``hpcenv.kit.coverage``): SASS (``sm_XY``) of the same major and a lower or
    equal minor (``sm_90a`` only on 9.0), else PTX (``compute_XY``) JIT-compiled at
    first use. torch's own kernel check below confirms it on the GPU."""
    sass: list[str] = []
    ptx: list[str] = []
    for arch in arch_list:
        try:
            coverage.parse_arch(arch)
        except ValueError:
            continue
        (sass if arch.startswith("sm_") else ptx).append(arch)
    how = coverage.covers(capability, sass, ptx, ptx_jit=True)
    if how is None:
        return False, ""
    return True, f"{how} (JIT-compiled at first use)" if how.startswith("PTX") else how


def variant_hint(capability: str) -> str:
    """Which torch CUDA variant carries kernels for this GPU (hpcenv's torch knowledge,
    read from the wheels; ``hpcenv resolve`` names the exact one)."""
    major, minor = (int(x) for x in capability.split("."))
    if (major, minor) < (7, 5):
        return (
            f"sm_{major}{minor} (V100-class) needs a cu126 build (cu118/cu124 for older "
            "torch); cu130/cu132 wheels, and cu128 from torch 2.11, dropped it"
        )
    if major >= 10:
        return f"sm_{major}{minor} needs a cu128 or newer build"
    return f"use a build whose arch list has sm_{major}{minor} (cu126 or newer for this GPU)"


def backend_of(cuda: str | None) -> str:
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"


def check_build(ctx: probe.Context, torch: Any) -> None:
    cuda = torch.version.cuda
    ctx.details.update(torch=torch.__version__, cuda_build=cuda, backend=backend_of(cuda))
    want = str(ctx.config.get("torch_backend") or "auto")
    have = backend_of(cuda)
    if want not in ("auto", have):
        ctx.check(
            "build",
            Status.FAIL,
            f"torch {torch.__version__} is a {have} build, the profile pins {want}",
            remedy=f"rebuild the environment: the {want} wheel was not installed "
            "(a plain PyPI torch is another variant)",
        )
    else:
        ctx.check("build", Status.PASS, f"torch {torch.__version__} ({have} build)")


def check_cpu(ctx: probe.Context, torch: Any) -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 96, generator=g)
    b = torch.randn(96, 64, generator=g)
    got = a @ b
    ref = (a.double() @ b.double()).float()
    err = float((got - ref).abs().max())
    small = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    exact = [
        [sum(float(small[i][k] * small[j][k]) for k in range(4)) for j in range(3)]
        for i in range(3)
    ]
    exact_ok = (small @ small.T).tolist() == exact
    ctx.metrics["cpu_matmul_max_abs_err"] = err
    if err < 1e-3 and exact_ok:
        ctx.check("cpu-matmul", Status.PASS, f"CPU matmul correct (max error {err:.1e})")
    else:
        ctx.check(
            "cpu-matmul",
            Status.FAIL,
            f"CPU matmul wrong (max error {err:.1e}, "
            f"exact integer check {'ok' if exact_ok else 'failed'})",
            remedy="the CPU BLAS in this torch build is broken on this CPU: try another "
            "torch build, or set OMP_NUM_THREADS=1 to narrow it down",
        )


def check_gpus(ctx: probe.Context, torch: Any) -> None:
    if not torch.cuda.is_available():
        reason = (
            "torch is a CPU build"
            if torch.version.cuda is None
            else "this CUDA build sees no GPU (no driver, or CUDA_VISIBLE_DEVICES empty)"
        )
        for name in ("arch-list", "kernel", "gpu-matmul", "bf16"):
            ctx.check(
                name,
                Status.SKIP,
                f"no GPU: {reason}",
                remedy="run on a GPU node to check the CUDA parts",
            )
        ctx.details["cuda_skipped"] = reason
        return
    archs = torch.cuda.get_arch_list()
    ctx.details["arch_list"] = archs
    n = torch.cuda.device_count()
    gpus = []
    for i in range(n):
        major, minor = torch.cuda.get_device_capability(i)
        cap = f"{major}.{minor}"
        name = torch.cuda.get_device_name(i)
        ok, how = arch_supported(cap, archs)
        gpus.append({"index": i, "name": name, "capability": cap, "arch": how or None})
        if not ok:
            ctx.check(
                "arch-list",
                Status.FAIL,
                f"GPU {i} {name} (sm {cap}) is not in this build's archs {archs}",
                remedy=variant_hint(cap),
            )
    ctx.details["gpus"] = gpus
    if not any(c["name"] == "arch-list" for c in ctx.checks):
        ctx.check(
            "arch-list",
            Status.PASS,
            f"{n} GPU(s) {', '.join(sorted({g['name'] for g in gpus}))} "
            f"covered by {', '.join(sorted({g['arch'] for g in gpus}))}",
        )
    for i, g in enumerate(gpus):
        dev = torch.device("cuda", i)
        try:
            x = torch.arange(1024, device=dev, dtype=torch.float32) * 2.0
            torch.cuda.synchronize(dev)
            ok = float(x.sum()) == 2.0 * 1023 * 1024 / 2
        except RuntimeError as exc:
            msg = str(exc).splitlines()[0]
            hint = (
                variant_hint(g["capability"])
                if "no kernel image" in msg
                else ("check the driver (hpcenv facts) and gpu-health")
            )
            ctx.check("kernel", Status.FAIL, f"GPU {i}: kernel failed: {msg}", remedy=hint)
            return
        if not ok:
            ctx.check(
                "kernel",
                Status.FAIL,
                f"GPU {i}: kernel gave a wrong sum",
                remedy="run gpu-health; report the GPU",
            )
            return
    ctx.check("kernel", Status.PASS, f"a kernel ran on all {n} GPU(s)")
    worst = 0.0
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(512, 512, generator=gen)
    b = torch.randn(512, 512, generator=gen)
    ref = a.double() @ b.double()
    for i in range(n):
        got = (a.to(f"cuda:{i}") @ b.to(f"cuda:{i}")).cpu().double()
        worst = max(worst, float((got - ref).abs().max() / ref.abs().max()))
    ctx.metrics["gpu_matmul_rel_err"] = worst
    if worst < 1e-2:  # TF32 (if a user enabled it) stays well inside this
        ctx.check("gpu-matmul", Status.PASS, f"GPU matmul matches CPU (rel. error {worst:.1e})")
    else:
        ctx.check(
            "gpu-matmul",
            Status.FAIL,
            f"GPU matmul differs from CPU ({worst:.1e})",
            remedy="run gpu-health on this node; report the GPU if ECC errors show",
        )
    caps = [g["capability"] for g in gpus]
    low = [c for c in caps if tuple(int(x) for x in c.split(".")) < (8, 0)]
    if low or not torch.cuda.is_bf16_supported():
        ctx.check(
            "bf16",
            Status.SKIP,
            f"bf16 not supported natively on sm {', '.join(low or caps)} (V100/Turing)",
            remedy="train in fp16 with loss scaling (torch.amp GradScaler) on these GPUs",
        )
    else:
        y = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16) @ torch.ones(
            64, 64, device="cuda", dtype=torch.bfloat16
        )
        ctx.check(
            "bf16",
            Status.PASS if float(y[0, 0]) == 64.0 else Status.FAIL,
            "bf16 matmul runs",
            remedy="bf16 matmul gave a wrong value: report the GPU",
        )


def check_nccl_library(ctx: probe.Context, torch: Any) -> None:
    """Which libnccl.so.2 torch really uses (the one torch's CUDA library binds to; this
    process's memory maps list every copy) against the one the profile's ``[job] nccl``
    means, with the versions; no GPU is needed: importing a CUDA torch loads its NCCL."""
    if torch.version.cuda is None:
        ctx.check(
            "nccl-library",
            Status.SKIP,
            "a CPU build of torch loads no NCCL",
            remedy="run with the CUDA build of torch to check which NCCL it loads",
        )
        return
    try:
        with open("/proc/self/maps") as f:
            loaded = nccl.loaded_libraries(f.read())
    except OSError as exc:
        ctx.check(
            "nccl-library",
            Status.SKIP,
            f"cannot read /proc/self/maps ({exc.strerror})",
            remedy="run on Linux to see which libnccl.so.2 torch loaded",
        )
        return
    venv_lib = nccl.venv_library(sysconfig.get_paths()["purelib"])
    system_lib = nccl.system_library(os.environ)
    paths = [p for p in dict.fromkeys([*loaded, venv_lib, system_lib]) if p]
    cuda_lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    verdict = nccl.check_library(
        str(ctx.config.get("nccl") or "auto"),
        used=nccl.bound_library(cuda_lib),
        loaded=loaded,
        venv_lib=venv_lib,
        system_lib=system_lib,
        preload=nccl.preloaded(os.environ),
        versions={p: nccl.file_version(p) for p in paths},
    )
    ctx.details["nccl_library"] = {
        **verdict.details,
        "torch_reports": nccl.torch_nccl_version(torch),
    }
    ctx.check("nccl-library", verdict.status, verdict.summary, remedy=verdict.remedy)


def body(ctx: probe.Context) -> None:
    """Version, CUDA build, arch list, a kernel, matmul vs CPU, bf16, which NCCL."""
    torch = probe.import_torch(ctx)
    if torch is None:
        return
    check_build(ctx, torch)
    check_cpu(ctx, torch)
    check_nccl_library(ctx, torch)
    check_gpus(ctx, torch)
    skipped = ctx.details.get("cuda_skipped")
    if skipped and all(c["status"] != Status.FAIL for c in ctx.checks):
        ctx.summary = (
            f"torch {torch.__version__}: CPU matmul correct; CUDA checks skipped ({skipped})"
        )


if __name__ == "__main__":
    sys.exit(probe.main("torch", body))
