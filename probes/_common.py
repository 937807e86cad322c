"""Helpers every probe script shares.

Probes run under the *target* environment's Python (the venv being validated),
so this module uses the standard library only; torch and friends are imported by
the probe that checks them. The runner starts ``python probes/<name>.py``, which
puts this directory first on ``sys.path``, so probes ``import _common``.

Protocol with the runner (``hpcenv.runner``):

- rank environment is torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); under ``srun`` with RANK unset,
  SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE are mapped;
- profile settings arrive as JSON in ``HPCENV_PROBE_CONFIG``, with ``timeout_s``:
  the runner stops the probe's process group after that many seconds, so helper
  processes (``run_children``) get a deadline well before it (``deadline``);
- each rank writes ``$HPCENV_RESULT_DIR/<probe>.rank<k>.started`` when it starts
  and ``<probe>.rank<k>.json`` at the end, and prints that JSON as its last stdout
  line. Exit 0 for pass/fail/skip; a crash (non-zero exit) becomes an ``error``
  result made by the runner from the stderr tail.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.abc
import importlib.machinery
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
#: Probe scripts named like the packages they check (torch.py, ray.py, vllm.py).
_SHADOWING = frozenset(p.stem for p in Path(_HERE).glob("*.py") if not p.stem.startswith("_"))


class _NoShadow(importlib.abc.MetaPathFinder):
    """``python probes/torch.py`` puts probes/ first on sys.path, where ``import torch``
    would find the probe script itself: look such names up everywhere but here."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or fullname not in _SHADOWING:
            return None
        elsewhere = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
        spec = importlib.machinery.PathFinder.find_spec(fullname, elsewhere)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return spec


sys.meta_path.insert(0, _NoShadow())

PASS, FAIL, SKIP, ERROR = "pass", "fail", "skip", "error"
STATUSES = (PASS, FAIL, SKIP, ERROR)


def combine(statuses: list[str]) -> str:
    """Overall status of several checks: error, then fail, wins; any pass beats skip.

    A CPU node where the CUDA checks skip but the CPU checks pass is a pass.
    """
    for worst in (ERROR, FAIL):
        if worst in statuses:
            return worst
    if PASS in statuses:
        return PASS
    return SKIP


# --- rank environment -------------------------------------------------------------------


@dataclass(frozen=True)
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
    if "RANK" in env or "SLURM_PROCID" not in env:
        rank = _int(env, "RANK", 0)
        world = _int(env, "WORLD_SIZE", 1)
        local = _int(env, "LOCAL_RANK", rank)
        local_world = _int(env, "LOCAL_WORLD_SIZE", world)
    else:
        rank = _int(env, "SLURM_PROCID", 0)
        world = _int(env, "SLURM_NTASKS", 1)
        local = _int(env, "SLURM_LOCALID", 0)
        per_node = env.get("SLURM_NTASKS_PER_NODE", "") or env.get("SLURM_TASKS_PER_NODE", "")
        # "4" or "4(x2)" or "2,1": the first number is this layout's tasks per node
        m = re.match(r"(\d+)", per_node)
        local_world = int(m.group(1)) if m else world
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


#: A probe run by hand (no runner, no ``timeout_s`` in the config) gets this long.
DEFAULT_TIMEOUT_S = 300.0
#: Roughly when the probe started (this module is imported first thing).
_STARTED = time.monotonic()


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


def free_port() -> int:
    """A TCP port free on this host now (a rendezvous port for helper processes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


# --- helper processes -------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:  # resolved here, before any fork: the child must not run the dynamic loader
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: SIGKILL the child when the probe dies (PR_SET_PDEATHSIG).

    Covers a probe killed on its own (not its group, e.g. by the OOM killer); if the
    probe died between fork and prctl, the child is already orphaned and exits.
    """

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


@dataclass(frozen=True)
class Child:
    """How one helper process ended: exit code (negative: killed by that signal)."""

    argv: list[str]
    pid: int
    returncode: int
    output: str
    timed_out: bool


def run_children(
    commands: Sequence[tuple[Sequence[str], Mapping[str, str]]],
    until: float,
    *,
    term_grace_s: float = 5.0,
) -> list[Child]:
    """Run helper processes side by side until all exit or ``until`` (monotonic) passes.

    Those still running then get SIGTERM, and SIGKILL ``term_grace_s`` later. They stay
    in the probe's process group, so the runner's timeout (which stops the group) stops
    them too, and they die with the probe (PDEATHSIG): none is left holding a GPU.
    stdout and stderr go to one temporary file each (no pipe to fill up and block).
    """
    procs: list[subprocess.Popen[bytes]] = []
    late: list[bool] = []
    with contextlib.ExitStack() as stack:
        files = []
        try:
            for argv, env in commands:
                out = stack.enter_context(tempfile.TemporaryFile())
                files.append(out)
                procs.append(
                    subprocess.Popen(
                        [str(a) for a in argv],
                        env=dict(env),
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_die_with(os.getpid()),  # noqa: PLW1509 - prctl only
                    )
                )
            while time.monotonic() < until and any(p.poll() is None for p in procs):
                time.sleep(0.05)
        finally:
            late = [p.poll() is None for p in procs]
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            grace = time.monotonic() + term_grace_s
            while time.monotonic() < grace and any(p.poll() is None for p in procs):
                time.sleep(0.05)
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        children = []
        for (argv, _), p, was_late, out in zip(commands, procs, late, files, strict=True):
            out.seek(0)
            children.append(
                Child(
                    argv=[str(a) for a in argv],
                    pid=p.pid,
                    returncode=p.returncode,
                    output=out.read().decode(errors="replace"),
                    timed_out=was_late,
                )
            )
    return children


# --- the NCCL net plugin -------------------------------------------------------------

#: Where the loader finds libraries without LD_LIBRARY_PATH (Debian and RHEL layouts);
#: the same list as ``hpcenv.facts.SYSTEM_LIB_DIRS`` (tests/test_probe_plugin_search.py).
SYSTEM_LIB_DIRS = (
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)


def find_net_plugin(env: Mapping[str, str]) -> str | None:
    """The net plugin NCCL would open: NCCL_NET_PLUGIN (a path, a file name, or a short
    name as in ``libnccl-net-<name>.so``), else ``libnccl-net.so``, on LD_LIBRARY_PATH
    and then the system library directories. None when there is none."""
    wanted = env.get("NCCL_NET_PLUGIN", "")
    if "/" in wanted:
        return wanted if Path(wanted).is_file() else None
    names = [wanted, f"libnccl-net-{wanted}.so"] if wanted else ["libnccl-net.so"]
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(SYSTEM_LIB_DIRS)
    for d in dirs:
        for n in names:
            if (Path(d) / n).is_file():
                return str(Path(d) / n)
    return None


# --- facts each rank reports (compared across ranks by the runner) ----------------------


def driver_version() -> str | None:
    """The NVIDIA kernel module version, from /proc (no subprocess, no NVML)."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module(?: for [\w-]+)?\s+([0-9][0-9.]+)", text)
    return m.group(1) if m else None


def proc_gpus() -> list[str]:
    """GPU model names from /proc/driver/nvidia/gpus/*/information (node-wide)."""
    models = []
    base = Path("/proc/driver/nvidia/gpus")
    if not base.is_dir():
        return models
    for info in sorted(base.glob("*/information")):
        try:
            m = re.search(r"^Model:\s*(.+)$", info.read_text(), re.M)
        except OSError:
            continue
        models.append(m.group(1).strip() if m else "unknown")
    return models


def collect_facts() -> dict[str, Any]:
    """driver, nccl_version, gpu_count, gpu_model, modules, torch of this rank.

    torch and its NCCL are reported only when the probe already imported torch:
    a probe that does not need torch must not pay for importing it.
    """
    models = proc_gpus()
    torch_version = None
    nccl = None
    torch = sys.modules.get("torch")
    if torch is not None:
        torch_version = getattr(torch, "__version__", None)
        try:
            if torch.cuda.is_available() or getattr(torch.version, "cuda", None):
                v = torch.cuda.nccl.version()
                nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:  # a CPU build has no NCCL; that is a fact too
            nccl = None
    return {
        "driver": driver_version(),
        "nccl_version": nccl,
        "gpu_count": len(models),
        "gpu_model": sorted(set(models))[0] if len(set(models)) == 1 else (models or None),
        "modules": [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m],
        "torch": torch_version,
    }


# --- checks and the result -------------------------------------------------------------


@dataclass
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
    status: str | None = None  # set to override the status combined from the checks
    summary: str | None = None
    remedy: str | None = None

    def check(self, name: str, status: str, summary: str, remedy: str = "", **details: Any) -> str:
        """Record one check; ``remedy`` is required for fail/skip/error."""
        assert status in STATUSES, status
        item: dict[str, Any] = {"name": name, "status": status, "summary": summary}
        if remedy:
            item["remedy"] = remedy
        if details:
            item["details"] = details
        self.checks.append(item)
        return status

    def result(self) -> dict[str, Any]:
        statuses = [c["status"] for c in self.checks]
        status = self.status or (combine(statuses) if statuses else SKIP)
        bad = [c for c in self.checks if c["status"] == status and status != PASS]
        summary = self.summary
        if summary is None:
            if bad:
                summary = "; ".join(f"{c['name']}: {c['summary']}" for c in bad)
            else:
                summary = "; ".join(
                    f"{c['name']}: {c['summary']}" for c in self.checks if c["status"] == PASS
                )
        remedy = self.remedy
        if remedy is None:
            remedy = " ".join(c["remedy"] for c in bad if c.get("remedy"))
        if status != PASS and not remedy:
            remedy = "see details for what was checked"
        details = dict(self.details)
        details["checks"] = self.checks
        facts = collect_facts()
        facts.update(self.facts)
        return {
            "name": self.name,
            "status": status,
            "summary": summary or "no checks ran",
            "details": details,
            "metrics": self.metrics,
            "remedy": remedy if status != PASS else (remedy or ""),
            "rank": self.rank.rank,
            "host": socket.gethostname(),
            "facts": facts,
        }


def import_torch(ctx: Context) -> Any:
    """torch, or None after recording a failed check that says how to get it."""
    try:
        import torch
    except ImportError as exc:
        ctx.check(
            "torch",
            FAIL,
            f"torch does not import in {sys.prefix}: {exc}",
            remedy="build the environment first (hpcenv build PROFILE), or point --env at a "
            "venv that has torch",
        )
        return None
    return torch


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, default=str) + "\n")
    tmp.replace(path)


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
    parser = argparse.ArgumentParser(prog=f"probes/{name}.py", description=body.__doc__)
    if add_args is not None:
        add_args(parser)
    args = parser.parse_args(argv)
    rank = rank_from_env(os.environ)
    out = result_dir()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write(
            out / f"{name}.rank{rank.rank}.started",
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
        _write(out / f"{name}.rank{rank.rank}.json", result)
    sys.stdout.flush()
    print(json.dumps(result, default=str), flush=True)
    return 0
