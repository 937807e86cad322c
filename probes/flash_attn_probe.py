"""flash-attn: imports, version, and flash_attn_func agrees with torch SDPA on random
fp16 inputs on the GPU.

flash-attn 2 needs compute capability >= 8.0 (csrc/flash_attn/flash_api.cpp): on CPU, on
V100/Turing, or when it is not installed, the probe skips with the reason. A wheel
built for another torch fails at import with an undefined symbol, which this probe
reports with the fix (rebuild for this torch).
"""

from __future__ import annotations

import importlib.metadata as md
import sys

from hpcenv.kit import probe
from hpcenv.kit.status import Status

MIN_CAPABILITY = (8, 0)
#: fp16 attention vs the math reference: flash-attn's own tests allow about this.
TOLERANCE = 2e-2


def body(ctx: probe.Context) -> None:
    """Import, version, flash_attn_func vs SDPA on random fp16 inputs."""
    try:
        version = md.version("flash-attn")
    except md.PackageNotFoundError:
        try:
            version = md.version("flash_attn")
        except md.PackageNotFoundError:
            version = None
    if version is None:
        mode = ctx.config.get("flash_attn_mode", "auto")
        ctx.check(
            "installed",
            Status.SKIP,
            f"flash-attn is not installed (profile flash_attn.mode = {mode})",
            remedy=(
                "nothing to do unless the project needs it: with mode 'auto' hpcenv installs "
                "it on a node with GPUs of sm >= 8.0 (here: none); `hpcenv plan` says why"
                if mode == "auto"
                else "set [flash_attn] mode = 'auto' and rebuild on a node with GPUs of "
                "sm >= 8.0 (PyTorch SDPA is the fallback elsewhere)"
            ),
        )
        return
    ctx.details["flash_attn"] = version
    import torch

    if not torch.cuda.is_available():
        ctx.check(
            "compare",
            Status.SKIP,
            f"flash-attn {version} installed; no GPU to run it",
            remedy="run on a GPU node (sm >= 8.0)",
        )
        return
    cap = torch.cuda.get_device_capability(0)
    if cap < MIN_CAPABILITY:
        ctx.check(
            "compare",
            Status.SKIP,
            f"GPU sm {cap[0]}.{cap[1]} < 8.0: flash-attn 2 does not run here",
            remedy="use torch SDPA (memory-efficient backend) on V100/Turing",
        )
        return
    try:
        from flash_attn import flash_attn_func
    except Exception as exc:  # an ABI mismatch shows here
        ctx.check(
            "import",
            Status.FAIL,
            f"import flash_attn failed: {type(exc).__name__}: {exc}",
            remedy="flash-attn was built for another torch/CUDA: rebuild it for this "
            "environment (hpcenv build rebuilds it when the ABI key changes)",
        )
        return
    ctx.check("import", Status.PASS, f"flash-attn {version} imports")
    torch.manual_seed(0)
    worst = 0.0
    for causal in (False, True):
        q, k, v = (torch.randn(2, 256, 8, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        got = flash_attn_func(q, k, v, causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(),
            k.transpose(1, 2).float(),
            v.transpose(1, 2).float(),
            is_causal=causal,
        ).transpose(1, 2)
        worst = max(worst, float((got.float() - ref).abs().max()))
    ctx.metrics["max_abs_diff"] = worst
    if worst <= TOLERANCE:
        ctx.check(
            "compare",
            Status.PASS,
            f"flash_attn_func matches SDPA (max |diff| {worst:.1e}, causal and not)",
        )
    else:
        ctx.check(
            "compare",
            Status.FAIL,
            f"flash_attn_func differs from SDPA by {worst:.2e} > {TOLERANCE}",
            remedy="flash-attn computes wrong results here: rebuild it for this GPU arch "
            "(FLASH_ATTN_CUDA_ARCHS) and torch; report if it persists",
        )


if __name__ == "__main__":
    sys.exit(probe.main("flash-attn", body))
