"""The probe side of the runner protocol: what every probe script shares.

A probe is ``probes/<name>_probe.py`` (``registry``), run by the *target*
environment's Python with this kit on ``PYTHONPATH``; its body gets a ``Context``
and records checks, and ``main`` does the rest:

- rank environment is torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); under ``srun`` with RANK unset,
  SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE are mapped;
- profile settings arrive as JSON in ``HPCENV_PROBE_CONFIG``, with ``timeout_s``:
  the runner stops the probe's process group after that many seconds, so helper
  processes (``children.run_children``) get a deadline well before it (``deadline``);
- each rank writes ``$HPCENV_RESULT_DIR/<probe>.rank<k>.started`` when it starts
  and ``<probe>.rank<k>.json`` at the end (``rank_file``), and prints that JSON as its
  last stdout line. Exit 0 for pass/fail/skip; a crash (non-zero exit) becomes an
  ``error`` result made by the runner (``hpcenv.runner.probes``) from the stderr tail.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcenv.kit import masking, nccl, nvidia_proc, slurm_env
from hpcenv.kit.registry import script_name
from hpcenv.kit.status import Status

#: A probe run by hand (no runner, no ``timeout_s`` in the config) gets this long.
DEFAULT_TIMEOUT_S = 300.0
#: Roughly when the probe started (this module is imported first thing).
_STARTED = time.monotonic()


def rank_file(result_dir: Path, name: str, rank: int, kind: str) -> Path:
    """``<probe>.rank<k>.<kind>``: kind ``started``, ``json``, ``stdout`` or ``stderr``."""
    return result_dir / f"{name}.rank{rank}.{kind}"


# --- rank environment -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Rank:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name, "") or default)
    except ValueError:
        return default


def rank_from_env(env: Mapping[str, str]) -> Rank:
    """torchrun-style variables, or SLURM's when RANK is unset (srun launches)."""
    slurm = slurm_env.read(env)
    if "RANK" in env or slurm.procid is None:
        rank = _int(env, "RANK", 0)
        world = _int(env, "WORLD_SIZE", 1)
        local = _int(env, "LOCAL_RANK", rank)
        local_world = _int(env, "LOCAL_WORLD_SIZE", world)
    else:
        rank = slurm.procid or 0
        world = slurm.ntasks or 1
        local = slurm.localid or 0
        # "4" or "4(x2)" or "2,1": the first number is this layout's tasks per node
        local_world = slurm.ntasks_per_node or slurm.tasks_per_node or world
    return Rank(
        rank=rank,
        world_size=world,
        local_rank=local,
        local_world_size=local_world,
        master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
        master_port=_int(env, "MASTER_PORT", 29500),
    )


def export_rank(r: Rank) -> None:
    """Set the torchrun variables in os.environ (torch.distributed's env:// reads them)."""
    os.environ.update(
        RANK=str(r.rank),
        WORLD_SIZE=str(r.world_size),
        LOCAL_RANK=str(r.local_rank),
        LOCAL_WORLD_SIZE=str(r.local_world_size),
        MASTER_ADDR=r.master_addr,
        MASTER_PORT=str(r.master_port),
    )


def config() -> dict[str, Any]:
    """Profile settings the runner passed (``HPCENV_PROBE_CONFIG``); {} when run by hand."""
    raw = os.environ.get("HPCENV_PROBE_CONFIG", "")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def probe_timeout(cfg: Mapping[str, Any]) -> float:
    """The runner's timeout for this probe (``timeout_s`` in the config), else the default."""
    value = cfg.get("timeout_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_TIMEOUT_S


def deadline(
    cfg: Mapping[str, Any], *, margin_fraction: float = 0.25, min_margin_s: float = 5.0
) -> float:
    """``time.monotonic()`` by which the probe's helpers must be done.

    The runner's timeout less a margin (a quarter of it, at least ``min_margin_s``):
    the probe then still has time to write its own result, which names what hung,
    before the runner stops it and can only say "did not finish".
    """
    timeout = probe_timeout(cfg)
    margin = max(min_margin_s, timeout * margin_fraction)
    return _STARTED + max(1.0, timeout - margin)


# --- facts each rank reports (compared across ranks by the runner) ----------------------


def collect_facts() -> dict[str, Any]:
    """driver, nccl_version, gpu_count, gpu_model, modules, torch of this rank.

    torch and its NCCL are reported only when the probe already imported torch:
    a probe that does not need torch must not pay for importing it.
    """
    models = nvidia_proc.gpu_models()
    torch = sys.modules.get("torch")
    driver = nvidia_proc.driver_version()
    return {
        "driver": driver[0] if driver else None,
        "nccl_version": nccl.torch_nccl_version(torch) if torch is not None else None,
        "gpu_count": len(models),
        "gpu_model": sorted(set(models))[0] if len(set(models)) == 1 else (models or None),
        "modules": [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m],
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
    }


# --- checks and the result -------------------------------------------------------------


@dataclass(kw_only=True)
class Context:
    """What a probe body works with: its arguments, config, rank, and the checks it adds."""

    name: str
    args: argparse.Namespace
    config: dict[str, Any]
    rank: Rank
    checks: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    status: Status | None = None  # set to override the status combined from the checks
    summary: str | None = None
    remedy: str | None = None

    def check(
        self, name: str, status: Status | str, summary: str, remedy: str = "", **details: Any
    ) -> Status:
        """Record one check; ``remedy`` is required for fail/skip/error."""
        status = Status(status)
        item: dict[str, Any] = {"name": name, "status": status.value, "summary": summary}
        if remedy:
            item["remedy"] = remedy
        if details:
            item["details"] = details
        self.checks.append(item)
        return status

    def result(self) -> dict[str, Any]:
        status = self.status or Status.combine(c["status"] for c in self.checks)
        bad = [c for c in self.checks if c["status"] == status and status != Status.PASS]
        summary = self.summary
        if summary is None:
            shown = bad or [c for c in self.checks if c["status"] == Status.PASS]
            summary = "; ".join(f"{c['name']}: {c['summary']}" for c in shown)
        remedy = self.remedy
        if remedy is None:
            remedy = " ".join(c["remedy"] for c in bad if c.get("remedy"))
        if status != Status.PASS and not remedy:
            remedy = "see details for what was checked"
        details = dict(self.details)
        details["checks"] = self.checks
        facts = collect_facts()
        facts.update(self.facts)
        return {
            "name": self.name,
            "status": status.value,
            "summary": summary or "no checks ran",
            "details": details,
            "metrics": self.metrics,
            "remedy": remedy if status != Status.PASS else (remedy or ""),
            "rank": self.rank.rank,
            "host": socket.gethostname(),
            "facts": facts,
        }


def import_torch(ctx: Context) -> Any:
    """torch, or None after recording a failed check that says how to get it."""
    try:
        import torch
    except ImportError as exc:
        try:
            with open("/proc/self/maps") as f:
                maps = f.read()
        except OSError:
            maps = ""
        purelib = sysconfig.get_paths()["purelib"]
        why = nccl.import_failure(str(exc), maps, os.environ, purelib)
        if why:
            ctx.check(
                "torch",
                Status.FAIL,
                f"torch does not import in {sys.prefix}: {why}",
                remedy="unset LD_PRELOAD of another NCCL, or set [job] nccl = 'venv' in the "
                "profile and rebuild (the venv's NCCL then loads first in its Pythons)",
            )
            return None
        ctx.check(
            "torch",
            Status.FAIL,
            f"torch does not import in {sys.prefix}: {exc}",
            remedy="build the environment first (hpcenv build PROFILE), or point --env at a "
            "venv that has torch",
        )
        return None
    return torch


def _write(path: Path, data: dict[str, Any]) -> None:
    """A rank file: masked (``masking``: the job's secrets), written to a new file (never
    through a symlink planted in a shared results directory) and renamed into place."""
    text = masking.mask(
        json.dumps(data, default=str), masking.ordered(masking.env_secrets(os.environ))
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(tmp, flags, 0o666), "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    os.replace(tmp, path)


def result_dir() -> Path | None:
    d = os.environ.get("HPCENV_RESULT_DIR")
    return Path(d) if d else None


def main(
    name: str,
    body: Callable[[Context], None],
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: list[str] | None = None,
) -> int:
    """Parse arguments, announce the rank, run ``body``, write and print the result."""
    parser = argparse.ArgumentParser(prog=f"probes/{script_name(name)}", description=body.__doc__)
    if add_args is not None:
        add_args(parser)
    args = parser.parse_args(argv)
    rank = rank_from_env(os.environ)
    out = result_dir()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write(
            rank_file(out, name, rank.rank, "started"),
            {
                "rank": rank.rank,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "time": time.time(),
            },
        )
    ctx = Context(name=name, args=args, config=config(), rank=rank)
    start = time.monotonic()
    body(ctx)
    ctx.metrics.setdefault("seconds", round(time.monotonic() - start, 3))
    result = ctx.result()
    if out is not None:
        _write(rank_file(out, name, rank.rank, "json"), result)
    sys.stdout.flush()
    secrets = masking.ordered(masking.env_secrets(os.environ))
    print(masking.mask(json.dumps(result, default=str), secrets), flush=True)
    return 0
