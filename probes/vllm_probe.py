"""vLLM: imports, its version, the GPUs' compute capability against that version's
minimum (hpcenv's table, read from vLLM's sdists, in the probe config), and the torch it
was built for against the installed one;
a short generation when given ``--model PATH`` (a local model directory).

vLLM wheels are built against one torch version (their metadata pins
``torch==X``); a torch swap after installing vLLM gives undefined-symbol errors
or silent misbehaviour, so the pin is compared, not assumed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from pathlib import Path
from typing import Any

from hpcenv.kit import probe, versions
from hpcenv.kit.status import Status

HERE = Path(__file__).resolve().parent


def min_capability(vllm_version: str, table: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row of ``table`` (``vllm_min_compute_capability`` in the probe config) whose
    release range holds ``vllm_version``."""
    return next((row for row in table if versions.in_range(vllm_version, row["vllm"])), None)


def torch_pin(requires: list[str]) -> str | None:
    """'torch==2.9.0' among vLLM's Requires-Dist (markers ignored) -> '2.9.0'."""
    for r in requires:
        m = re.match(r"^\s*torch\s*==\s*([0-9][^\s;,]*)", r)
        if m:
            return m.group(1)
    return None


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="local model directory for a short generation")


def body(ctx: probe.Context) -> None:
    """Import, version, compute capability minimum, torch pin, optional generation."""
    try:
        version = md.version("vllm")
    except md.PackageNotFoundError:
        ctx.check(
            "installed",
            Status.SKIP,
            "vllm is not installed in this environment",
            remedy="add 'vllm' to [packages] install if the project serves models",
        )
        return
    ctx.details["vllm"] = version
    pin = torch_pin(md.requires("vllm") or [])
    try:
        torch_version = md.version("torch")
    except md.PackageNotFoundError:
        torch_version = None
    ctx.details.update(torch_pin=pin, torch=torch_version)
    if pin and torch_version and versions.key(pin) != versions.key(torch_version):
        ctx.check(
            "torch-pin",
            Status.FAIL,
            f"vllm {version} was built for torch {pin}, the environment has {torch_version}",
            remedy=f"install torch=={pin} (same CUDA variant) or the vllm release built "
            f"for torch {torch_version}",
        )
    else:
        ctx.check(
            "torch-pin",
            Status.PASS,
            f"built for torch {pin or '(no pin)'}, installed {torch_version}",
        )
    try:
        import vllm  # noqa: F401 - importing is the check
    except Exception as exc:  # a broken vllm import is the finding
        ctx.check(
            "import",
            Status.FAIL,
            f"import vllm failed: {type(exc).__name__}: {exc}",
            remedy="reinstall vllm for this torch/CUDA (see torch-pin)",
        )
        return
    ctx.check("import", Status.PASS, f"vllm {version} imports")
    import torch

    row = min_capability(version, list(ctx.config.get("vllm_min_compute_capability") or []))
    if not torch.cuda.is_available():
        ctx.check(
            "capability",
            Status.SKIP,
            "no GPU: compute capability not checked",
            remedy="run on a GPU node",
        )
        ctx.check(
            "generate",
            Status.SKIP,
            "no GPU: vLLM cannot generate here",
            remedy="run on a GPU node with --model PATH",
        )
        return
    caps = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        caps.append(f"{major}.{minor}")
    if row is None:
        ctx.check(
            "capability",
            Status.SKIP,
            f"vllm {version} is not in hpcenv's vLLM table (probe config)",
            remedy="run the probe through 'hpcenv probe' (it passes the table), or update "
            "hpcenv's knowledge ('hpcenv knowledge update') for this release",
        )
    else:
        low = [c for c in caps if versions.key(c) < versions.key(row["min"])]
        note = " (unconfirmed minimum)" if row.get("unconfirmed") else ""
        if low:
            ctx.check(
                "capability",
                Status.FAIL,
                f"vllm {version} needs compute capability >= {row['min']}{note}, "
                f"GPU(s) have {', '.join(sorted(set(low)))}",
                remedy="use an older vllm release that still supports these GPUs "
                "(V100: <= 0.14 is documented), or other GPUs",
            )
        else:
            ctx.check(
                "capability",
                Status.PASS,
                f"GPUs sm {', '.join(sorted(set(caps)))} >= {row['min']}{note}",
            )
    model = ctx.args.model
    if not model:
        ctx.check(
            "generate",
            Status.SKIP,
            "no --model PATH given",
            remedy="pass --model /path/to/a/small/local/model for a generation test",
        )
        return
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, max_model_len=256, gpu_memory_utilization=0.5, enforce_eager=True)
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=8, temperature=0))
    text = out[0].outputs[0].text
    ctx.details["generated"] = text
    ok = bool(text.strip())
    ctx.check(
        "generate",
        Status.PASS if ok else Status.FAIL,
        f"generated {len(text)} chars from {Path(model).name}",
        remedy="vLLM produced no text: read the engine log on stderr",
    )


if __name__ == "__main__":
    sys.exit(probe.main("vllm", body, add_args))
