"""Compare uv's ``--torch-backend auto`` with hpcenv's resolver on the four clusters.

For each node (GH200/565 aarch64, V100/575, V100/580, RTX 6000/535) and torch version,
a fake ``nvidia-smi`` that prints the node's driver is put first on PATH (uv 0.13.9
reads UV_CUDA_DRIVER_VERSION, /sys/module/nvidia/version, /proc/driver/nvidia/version,
then ``nvidia-smi --query-gpu=driver_version``; this machine has no NVIDIA module and
UV_CUDA_DRIVER_VERSION is removed, so the fake is what uv sees). ``uv pip install
--dry-run --torch-backend auto torch==X -v`` then fails to reach download.pytorch.org
(unreachable here); the index it waited on first - its top choice - is the one named in
its final "Failed to fetch" line, and the debug log lists every index it considered.
Beside it: hpcenv's choice from the same facts, and whether uv's first pick can run on
the node according to hpcenv's knowledge (published for that torch? driver? SASS?).

Writes docs/compare-uv.md (generated; date and uv version in it) and prints JSON.
Run: .venv/bin/python bench/compare_uv.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from hpcenv import knowledge
from hpcenv.decide.torch_choice import TorchWish, choose_torch
from hpcenv.decide.torch_variant import assess, describe_gpus
from hpcenv.facts import collect
from hpcenv.models.facts import Facts, NvidiaFacts
from hpcenv.tools import command

REPO = Path(__file__).resolve().parents[1]
FACTS = REPO / "tests" / "data" / "facts"
OUT = REPO / "docs" / "compare-uv.md"
TORCH_VERSIONS = ("2.9.1", "2.13.0")
PLATFORMS = {"aarch64": "aarch64-manylinux_2_28", "x86_64": "x86_64-manylinux_2_28"}
FAILED_FETCH = re.compile(r"Failed to fetch: (\S+/whl/(\w+)/torch/)")
REQUESTED = re.compile(r"GET request for: \S+/whl/(\w+)/torch/")


def _with_driver(facts: Facts, driver: str, label: str) -> Facts:
    assert facts.nvidia is not None
    nv = dataclasses.replace(facts.nvidia, driver_version=driver, cuda_driver_version=None)
    return dataclasses.replace(facts, nvidia=nv, source=label)


def nodes() -> list[tuple[str, Facts]]:
    gh200 = collect.load(FACTS / "gh200-isambard.json")
    v100 = collect.load(FACTS / "v100-supercloud.json")
    rtx = collect.load(FACTS / "rtx6000-brtx.json")
    return [
        ("GH200 / 565.57.01 (aarch64)", gh200),
        ("V100 / 575.57.08", v100),
        ("V100 / 580.95.05", _with_driver(v100, "580.95.05", "V100 with a 580 driver")),
        ("RTX 6000 / 535.104.05", rtx),
    ]


def uv_first_index(
    uv: str, work: Path, nv: NvidiaFacts, version: str, arch: str
) -> dict[str, object]:
    """Run uv against a fake nvidia-smi; return its first index and all it considered."""
    bindir = work / f"smi-{nv.driver_version}"
    bindir.mkdir(exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho {nv.driver_version}\n")
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env |= {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "UV_CACHE_DIR": str(work / "uv-cache"),
        "UV_HTTP_RETRIES": "0",
        "UV_NO_CONFIG": "1",
    }
    venv = work / "venv"
    if not venv.exists():
        command.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], env=env, timeout=120)
    done = command.run(
        [uv, "pip", "install", "--dry-run", "-v", "--python", str(venv / "bin" / "python"),
         "--python-platform", PLATFORMS[arch], "--torch-backend", "auto", f"torch=={version}"],
        env=env, timeout=300, check=False,
    )  # fmt: skip
    log = done.stdout + done.stderr
    first = FAILED_FETCH.search(log)
    tried = sorted(set(REQUESTED.findall(log)), key=lambda v: knowledge.cuda_key(
        knowledge.variant_cuda(v) or "0.0"), reverse=True)  # fmt: skip
    detected = re.search(r"Detected CUDA driver version from `([^`]+)`: (\S+)", log)
    return {
        "first": first.group(2) if first else None,
        "first_url": first.group(1) if first else None,
        "considered": tried,
        "driver_source": detected.group(1) if detected else None,
        "driver_seen": detected.group(2) if detected else None,
        "returncode": done.returncode,
    }


def published(facts: Facts, version: str, variant: str) -> bool:
    release = knowledge.load().release_of(version)
    arch = facts.arch or ""
    return bool(
        release and arch in release.platforms and variant in release.platforms[arch].variants
    )


def verdict(facts: Facts, version: str, variant: str | None) -> str:
    """Whether ``variant`` of torch ``version`` runs on the node, by hpcenv's knowledge."""
    if variant is None:
        return "-"
    if not published(facts, version, variant):
        return f"torch {version} has no {variant} build for {facts.arch}"
    a = assess(facts, version, variant)
    if a.runs and a.outright:
        return "runs"
    problems = []
    if a.missing:
        problems.append("no SASS for " + ", ".join(f"sm_{c.replace('.', '')}" for c in a.missing))
    if not a.outright and not a.minor_compat:
        problems.append(f"needs driver >= {a.min_driver}")
    elif not a.outright:
        problems.append("only under minor-version compatibility")
    return "; ".join(problems)


def fall_through(facts: Facts, version: str, considered: list[str]) -> str | None:
    """The first index in uv's order that publishes torch ``version`` for this arch."""
    return next((v for v in considered if published(facts, version, v)), None)


def main() -> int:
    uv = shutil.which("uv")
    if uv is None:
        print(json.dumps({"error": "uv not on PATH"}))
        return 1
    uv_version = command.run([uv, "--version"]).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpcenv-compare-uv-") as tmp:
        work = Path(tmp)
        for label, facts in nodes():
            assert facts.nvidia is not None and facts.arch is not None
            for version in TORCH_VERSIONS:
                got = uv_first_index(uv, work, facts.nvidia, version, facts.arch)
                mine = choose_torch(facts, TorchWish(spec=f"=={version}")).choice
                first = got["first"] if isinstance(got["first"], str) else None
                considered = got["considered"] if isinstance(got["considered"], list) else []
                through = fall_through(facts, version, considered)
                rows.append(
                    {
                        "node": label,
                        "gpus": describe_gpus(facts.gpus),
                        "driver": facts.nvidia.driver_version,
                        "arch": facts.arch,
                        "torch": version,
                        "uv": got,
                        "uv_verdict": verdict(facts, version, first),
                        "uv_fall_through": through,
                        "uv_fall_through_verdict": verdict(facts, version, through),
                        "hpcenv": mine.backend,
                        "hpcenv_warnings": list(mine.warnings),
                        "hpcenv_error": mine.error,
                    }
                )
    write_doc(rows, uv_version)
    print(json.dumps({"uv": uv_version, "doc": str(OUT.relative_to(REPO)), "rows": rows}, indent=2))
    return 0


def write_doc(rows: list[dict[str, object]], uv_version: str) -> None:
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# uv `--torch-backend auto` compared with `hpcenv resolve`",
        "",
        f"Generated by `bench/compare_uv.py` on {today} with {uv_version}. Do not edit by hand.",
        "",
        "uv is run as `uv pip install --dry-run -v --torch-backend auto --python-platform "
        "<arch>-manylinux_2_28 torch==X` with a fake `nvidia-smi` that prints the node's "
        "driver first on PATH (uv reads UV_CUDA_DRIVER_VERSION, /sys/module/nvidia/version, "
        "/proc/driver/nvidia/version, then nvidia-smi; the first three are absent here). "
        "download.pytorch.org is unreachable from this machine, so uv's top choice is the "
        "index named in its final `Failed to fetch` error; *considered* lists every index it "
        "requested. hpcenv's choice comes from the same facts (`tests/data/facts/`). "
        "The verdicts apply hpcenv's knowledge (`src/hpcenv/knowledge/`) to uv's first index "
        "and, since that index often has no build of the requested torch, to the first index "
        "in uv's order that does (what uv gets if it falls through to the next index; that "
        "step could not be observed offline). The JSON printed by the script also lists "
        "every index uv requested.",
        "",
        "| node | torch | uv first index | on this node | first uv index with that torch "
        "| on this node | hpcenv |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        got = r["uv"]
        assert isinstance(got, dict)
        mine = r["hpcenv"] or f"none ({r['hpcenv_error']})"
        if r["hpcenv_warnings"]:
            mine += " (minor-version compatibility, warned)"
        lines.append(
            f"| {r['node']} | {r['torch']} | {got['first'] or '-'} | {r['uv_verdict']} | "
            f"{r['uv_fall_through'] or '-'} | {r['uv_fall_through_verdict']} | {mine} |"
        )
    lines += [
        "",
        "uv picks by driver alone: every cu12x counts as runnable from driver 525.60.13 and "
        "every cu13x from 580, and the highest is tried first. It does not look at the GPU's "
        "compute capability (a V100 has no kernels in cu128 from torch 2.11 on, nor in any "
        "cu13x build) nor at whether that variant exists for the torch version and CPU arch. "
        "hpcenv requires SASS for every GPU and prefers a CUDA version the driver runs "
        "outright, falling back to minor-version compatibility only with a warning.",
        "",
    ]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
