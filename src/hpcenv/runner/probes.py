"""Run probe scripts in a target environment and gather their results, never hanging.

A probe is ``probes/<name>_probe.py`` (``hpcenv.kit.registry``) run by the target
venv's Python, with the probe kit (``hpcenv.kit``, and nothing else of hpcenv) on its
``PYTHONPATH`` (``paths.kit_path``). A ``Launcher``
starts its ranks: ``LocalLauncher`` one process per rank on this host with the
torchrun variables set; the SLURM launcher (``hpcenv.slurm``) one ``srun`` for all
ranks. The runner waits for the processes or the probe's timeout, stops what is
left (whole process groups, escalating signals), then reads each rank's files in
the result directory:

- ``<probe>.rank<k>.started`` (JSON: rank, host, pid, time): the rank started;
- ``<probe>.rank<k>.json``: its result (the ``hpcenv.kit.probe`` contract);
- ``<probe>.rank<k>.stdout`` / ``.stderr``: its output. Launchers must send rank k's
  output there (``srun --output=<dir>/<probe>.rank%t.stdout --error=...rank%t.stderr``)
  so a crash is reported with its stderr tail.

A rank with ``.started`` but no result "started but did not finish within T s"; a
rank without ``.started`` "never started/joined", named with the host it was meant
for. Results fold into one ``ProbeResult`` (``results.gather``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hpcenv.kit import nvidia_proc, registry
from hpcenv.kit.ports import free_port
from hpcenv.kit.probe import rank_file
from hpcenv.models.results import ProbeResult, RankResult, Status, gather
from hpcenv.profile import schema
from hpcenv.profile.schema import Profile
from hpcenv.tools import command
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput, Interrupted


def _no_space(tail: str, directory: Path) -> bool:
    """Did a rank die of a full disk? Its stderr says so, or (when even that file could
    not be written) the disk it writes to has less than a MiB left."""
    if "No space left on device" in tail or "Disk quota exceeded" in tail:
        return True
    try:
        return shutil.disk_usage(directory).free < (1 << 20)
    except OSError:
        return False


#: After one rank crashed, how long the others get before they are stopped: a
#: collective without that rank would only wait for the full timeout.
GRACE_AFTER_CRASH_S = 10.0

STDERR_TAIL_LINES = 20


class Launcher(Protocol):
    """Starts the ranks of one probe: everything the runner and the probe command ask
    of a launcher (``LocalLauncher`` here, ``hpcenv.slurm.srun.SrunLauncher`` in a job).

    ``env`` holds everything the ranks need, including ``HPCENV_RESULT_DIR`` and
    ``HPCENV_PROBE_NAME`` (for the output file names above) and MASTER_ADDR /
    MASTER_PORT (a launcher spanning hosts sets MASTER_ADDR to its first host).
    Processes must lead their own process group (``command.spawn`` does that) so
    the runner can stop them with everything they started.
    """

    @property
    def nodes(self) -> int:
        """How many hosts the ranks span (the profile's multi-node env applies above 1)."""
        ...

    def default_ranks(self) -> int:
        """Ranks of a multi-rank probe when the user names none."""
        ...

    def hosts_for(self, ranks: int) -> list[str]:
        """The host each rank runs on."""
        ...

    def start(
        self, argv: Sequence[str], env: Mapping[str, str], ranks: int
    ) -> list[subprocess.Popen[Any]]:
        """Start the ranks; one process per rank, or one for all of them."""
        ...

    def rank_exit_codes(
        self, env: Mapping[str, str], ranks: int, codes: Sequence[int | None]
    ) -> list[int | None]:
        """Per-rank exit codes from the started processes' (``None``: still running when
        the runner stopped it, or stopped by the launcher after another rank failed)."""
        ...


def local_default_ranks() -> int:
    """One rank per GPU on this node (as CUDA_VISIBLE_DEVICES narrows them), else 2
    (gloo on CPU)."""
    count = len(nvidia_proc.gpu_models())
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and count:
        count = min(count, len([d for d in cvd.split(",") if d.strip()]))
    return count if count >= 1 else 2


@dataclass(frozen=True, kw_only=True)
class LocalLauncher:
    """All ranks on this host, one process each, torchrun-style variables set."""

    host: str = field(default_factory=socket.gethostname)

    @property
    def nodes(self) -> int:
        return 1

    def default_ranks(self) -> int:
        return local_default_ranks()

    def start(
        self, argv: Sequence[str], env: Mapping[str, str], ranks: int
    ) -> list[subprocess.Popen[Any]]:
        result_dir = Path(env["HPCENV_RESULT_DIR"])
        name = env["HPCENV_PROBE_NAME"]
        procs: list[subprocess.Popen[Any]] = []
        try:
            for k in range(ranks):
                rank_env = dict(env)
                rank_env.update(
                    RANK=str(k),
                    WORLD_SIZE=str(ranks),
                    LOCAL_RANK=str(k),
                    LOCAL_WORLD_SIZE=str(ranks),
                )
                rank_env["MASTER_ADDR"] = "127.0.0.1"  # every rank is on this host
                procs.append(
                    command.spawn(
                        argv,
                        env=rank_env,
                        stdout=rank_file(result_dir, name, k, "stdout"),
                        stderr=rank_file(result_dir, name, k, "stderr"),
                    )
                )
        except BaseException:
            command.shutdown_all(procs)
            raise
        return procs

    def hosts_for(self, ranks: int) -> list[str]:
        return [self.host] * ranks

    def rank_exit_codes(
        self, env: Mapping[str, str], ranks: int, codes: Sequence[int | None]
    ) -> list[int | None]:
        return list(codes)  # one process per rank already


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """One probe to run: which script, with what, for how long."""

    name: str
    python: Path
    args: tuple[str, ...] = ()
    ranks: int = 1
    timeout_s: float = 300.0
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)


#: Memory one local CPU rank of a probe takes (a torch gloo rank: ~420 MB measured).
RANK_MEMORY_GIB = 0.5


def rank_cap(gpus: int = 0) -> tuple[int, str]:
    """(the most local ranks this node runs by default, why): one per CPU this process
    may use, no more than memory allows at RANK_MEMORY_GIB each, never fewer than its
    GPUs or 2; ``HPCENV_MAX_RANKS`` overrides it."""
    override = os.environ.get("HPCENV_MAX_RANKS", "")
    if override:
        if not override.isdigit() or int(override) < 1:
            raise BadInput(f"HPCENV_MAX_RANKS={override!r} must be a whole number, 1 or more")
        return int(override), f"HPCENV_MAX_RANKS={override}"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    by_memory = int(mem_gib / RANK_MEMORY_GIB)
    cap = max(2, gpus, min(cpus or 1, by_memory))
    return cap, (
        f"this node's cap: {cpus} CPUs, {mem_gib:.0f} GiB memory at ~{RANK_MEMORY_GIB:g} GiB "
        "per rank"
    )


def check_ranks(ranks: int, gpus: int = 0) -> int:
    """``ranks`` when this node can run that many local ranks; BadInput naming the cap
    and the override otherwise."""
    if ranks < 1:
        raise BadInput(f"--ranks {ranks}: must be 1 or more")
    cap, why = rank_cap(gpus)
    if ranks > cap:
        shown = str(ranks) if len(str(ranks)) <= 12 else f"{str(ranks)[:12]}..."
        raise BadInput(
            f"--ranks {shown} is more than {cap} ({why}); ask for fewer, or set "
            f"HPCENV_MAX_RANKS={ranks if ranks < 10**6 else 'N'} to run them anyway"
        )
    return ranks


def probes_dir() -> Path:
    return paths.repo_dir("probes")


def config_for(profile: Profile | None) -> dict[str, Any]:
    """What a probe needs, passed as JSON in ``HPCENV_PROBE_CONFIG``: the profile's
    settings (none for a bare venv) and hpcenv's knowledge tables (always)."""
    tables = {"vllm_min_compute_capability": vllm_table()}
    p = profile
    if p is None:
        return tables
    return {
        "profile": p.name,
        "install": list(p.packages.install),
        "torch_backend": p.torch.backend,
        "arch": p.platform.arch,
        "gpu": p.platform.gpu,
        "compute_capability": p.platform.compute_capability,
        "gpus_per_node": p.platform.gpus_per_node,
        "libfabric_provider": p.platform.libfabric_provider,
        "nccl_net": p.platform.nccl_net,
        "flash_attn_mode": p.flash_attn.mode,
        "modules": list(p.modules.load),
        "nccl_min_bytes": p.probes.nccl_min_bytes,
        "nccl_max_bytes": p.probes.nccl_max_bytes,
        "gpu_memory_gib": p.job.gpu_memory_gib,
        "nccl": p.job.nccl,
        **tables,
    }


def vllm_table() -> list[dict[str, Any]]:
    """vLLM's minimum compute capability per release range, from hpcenv's data (vllm.toml,
    read from vLLM's sdists): ``{"vllm": range, "min", "source", "unconfirmed"}`` rows."""
    from hpcenv import knowledge

    return [
        {"vllm": r.versions, "min": r.min_compute_capability, "source": r.source,
         "unconfirmed": not r.confirmed}
        for r in knowledge.load().vllm
    ]  # fmt: skip


def probe_env(
    spec: ProbeSpec, result_dir: Path, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a probe's ranks: ours, the profile's, the protocol's."""
    env = dict(os.environ if base is None else base)
    venv = spec.python.parent.parent
    if (venv / "pyvenv.cfg").is_file():  # the venv's tools (ray, ...) first on PATH
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env.pop("PYTHONHOME", None)
    env.update(spec.env)
    env.update(
        HPCENV_RESULT_DIR=str(result_dir),
        HPCENV_PROBE_NAME=spec.name,
        # timeout_s: the probe's helpers (ofi's NCCL workers) end well before it
        HPCENV_PROBE_CONFIG=json.dumps({**spec.config, "timeout_s": spec.timeout_s}),
        PYTHONUNBUFFERED="1",
        # the kit first; what the caller had after it (a user's own PYTHONPATH)
        PYTHONPATH=paths.kit_pythonpath(env.get("PYTHONPATH")),
    )
    # a fresh rendezvous, never one inherited from a surrounding job (torchrun, a
    # training run on this node); a launcher spanning hosts replaces the address
    env["MASTER_ADDR"] = spec.env.get("MASTER_ADDR") or "127.0.0.1"
    env["MASTER_PORT"] = spec.env.get("MASTER_PORT") or str(free_port())
    return env


#: The most of a rank's result or started file read (a probe's JSON is a few KB).
MAX_RESULT_BYTES = 8 << 20
#: The most of a rank's stderr read for its tail, however much it wrote.
MAX_TAIL_BYTES = 64 << 10


def _read_json(path: Path) -> dict[str, Any] | str | None:
    """A rank file's object; a string saying what is wrong with it; None when absent."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > MAX_RESULT_BYTES:
        return f"{path.name} is {size} bytes, more than the {MAX_RESULT_BYTES} a result may be"
    try:
        data = fsio.load_json(path, "rank result")
    except BadInput as exc:
        return str(exc)
    return data if isinstance(data, dict) else f"{path.name} holds JSON that is not an object"


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` lines of a rank's stderr (reading at most MAX_TAIL_BYTES)."""
    return "\n".join(fsio.read_tail(path, MAX_TAIL_BYTES).strip().splitlines()[-lines:])


def _wait(procs: Sequence[subprocess.Popen[Any]], timeout: float) -> tuple[bool, bool]:
    """Wait until all exit, the timeout passes, or a crashed rank's grace ends.

    Returns (timed_out, stopped_after_crash).
    """
    deadline = time.monotonic() + timeout
    crash_deadline: float | None = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return False, False
        now = time.monotonic()
        if crash_deadline is None and any(c not in (None, 0) for c in codes):
            crash_deadline = now + GRACE_AFTER_CRASH_S
        if now >= deadline:
            return True, False
        if crash_deadline is not None and now >= crash_deadline:
            return False, True
        time.sleep(0.05)


#: What to do about a rank SIGKILLed from outside (the runner takes codes before it stops
#: anything, so the signal was not ours).
KILLED_REMEDY = (
    "SIGKILL came from outside the probe: the kernel's OOM killer or a cgroup memory "
    "limit (check 'dmesg' and 'sacct -o JobID,MaxRSS,State' for that host), an admin, or "
    "the node failing; rerun, and exclude the host if it happens there again"
)


def exit_text(code: int) -> str:
    """``exit 3``, or ``killed by SIGKILL`` for a death by signal (a negative code, as
    ``subprocess`` and the srun launcher report it)."""
    if code >= 0:
        return f"exit {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def collect(
    spec: ProbeSpec,
    result_dir: Path,
    hosts: Sequence[str],
    exit_codes: Sequence[int | None],
    *,
    timed_out: bool,
    stopped_after_crash: bool = False,
) -> list[RankResult]:
    """Read every rank's files and say what happened to the silent ones.

    ``exit_codes``: one per process (per rank, or one for an srun of all ranks),
    taken before the runner stopped anything: None means it was still running.
    """
    out = []
    for k in range(spec.ranks):
        host = hosts[k] if k < len(hosts) else "?"
        code = exit_codes[k] if len(exit_codes) == spec.ranks else exit_codes[0]
        tail = stderr_tail(rank_file(result_dir, spec.name, k, "stderr"))
        result_file = rank_file(result_dir, spec.name, k, "json")
        data = _read_json(result_file)
        started = _read_json(rank_file(result_dir, spec.name, k, "started"))
        if isinstance(data, str):
            out.append(
                RankResult(
                    rank=k,
                    host=host,
                    status=Status.ERROR,
                    summary=f"rank {k} on host {host} wrote a bad result: {data}",
                    remedy="the probe broke its result contract; run it by hand and "
                    f"report the bug: probes/{spec.name}.py",
                    stderr_tail=tail,
                )
            )
            continue
        if data is not None:
            r = RankResult.from_json(data, rank=k, host=host, where=str(result_file))
            if code not in (0, None) and r.status is not Status.ERROR:
                # wrote a result, then died (e.g. in teardown): keep the result, note it
                r = dataclasses.replace(r, summary=f"{r.summary} (then exited with {code})")
            out.append(r)
            continue
        if isinstance(started, dict) and isinstance(started.get("host"), str):
            host = started["host"] or host
        if code not in (0, None) and _no_space(
            tail, result_file.parent
        ):  # the disk, not the environment
            full = fsio.disk_full(result_file.parent)
            out.append(
                RankResult(
                    rank=k,
                    host=host,
                    status=Status.ERROR,
                    summary=f"rank {k} on host {host} could not write: {full}",
                    remedy="free space there, or give the probes another place with "
                    "--results-dir DIR (or HPCENV_HOME)",
                    stderr_tail=tail,
                )
            )
            continue
        if code not in (0, None):  # exited by itself, not stopped by the runner
            last = tail.splitlines()[-1] if tail else "no output on stderr"
            out.append(
                RankResult(
                    rank=k,
                    host=host,
                    status=Status.ERROR,
                    summary=f"rank {k} on host {host} crashed ({exit_text(code)}): {last}",
                    remedy=KILLED_REMEDY
                    if code == -signal.SIGKILL
                    else "read the stderr tail in the details; run the probe by hand "
                    "with the environment's python to reproduce: "
                    f"probes/{registry.script_name(spec.name)}",
                    stderr_tail=tail,
                )
            )
        elif started is not None:
            why = (
                f"within {spec.timeout_s:g} s"
                if not stopped_after_crash
                else "after another rank crashed"
            )
            out.append(
                RankResult(
                    rank=k,
                    host=host,
                    status=Status.FAIL,
                    summary=f"rank {k} on host {host} started but did not finish {why}",
                    remedy="a collective that hangs usually means a rank cannot reach "
                    "the others (firewall, NCCL_SOCKET_IFNAME, wrong MASTER_ADDR) or one "
                    "node is broken; rerun with NCCL_DEBUG=INFO, or raise --timeout",
                    stderr_tail=tail,
                )
            )
        else:
            out.append(
                RankResult(
                    rank=k,
                    host=host,
                    status=Status.FAIL,
                    summary=f"rank {k} (expected on host {host}) never started/joined",
                    remedy="check that the node is up and the environment's python exists "
                    "there (shared filesystem), and that the launcher placed the rank",
                    stderr_tail=tail,
                )
            )
    return out


def run_probe(
    spec: ProbeSpec,
    *,
    launcher: Launcher,
    result_dir: Path,
    base_env: Mapping[str, str] | None = None,
    script_dir: Path | None = None,
) -> ProbeResult:
    """Run one probe to the end (or its timeout) and gather its ranks' results."""
    fsio.ensure_dir(result_dir)
    for stale in result_dir.glob(f"{spec.name}.rank*"):
        stale.unlink()
    script = (script_dir or probes_dir()) / registry.script_name(spec.name)
    argv = [str(spec.python), str(script), *spec.args]
    env = probe_env(spec, result_dir, base_env)
    hosts = launcher.hosts_for(spec.ranks)
    start = time.monotonic()
    procs = launcher.start(argv, env, spec.ranks)
    try:
        timed_out, stopped = _wait(procs, spec.timeout_s)
        # None: still running (stopped by us below), or stopped by the launcher (one srun
        # for all ranks ends the others when one fails): then they stopped after a crash
        codes = launcher.rank_exit_codes(env, spec.ranks, [p.poll() for p in procs])
        crashed = any(c not in (0, None) for c in codes)
        stopped = stopped or (not timed_out and None in codes and crashed)
    except KeyboardInterrupt as exc:
        command.shutdown_all(procs)
        raise Interrupted(f"interrupted; probe {spec.name} was stopped") from exc
    finally:
        command.shutdown_all(procs)
    ranks = collect(
        spec, result_dir, hosts, codes, timed_out=timed_out, stopped_after_crash=stopped
    )
    return gather(spec.name, ranks, seconds=time.monotonic() - start)


@dataclass(frozen=True, kw_only=True)
class Target:
    """The environment probes run in: its python, and the profile its settings come from."""

    name: str
    python: Path
    profile: Profile | None = None

    @property
    def default_probes(self) -> tuple[str, ...]:
        return self.profile.probes.run if self.profile else registry.NAMES

    @property
    def timeout_s(self) -> float:
        return self.profile.probes.timeout_s if self.profile else 300.0

    @property
    def config(self) -> dict[str, Any]:
        return config_for(self.profile)


def resolve_target(env: str, profile_name: str | None = None) -> Target:
    """``--env``: a profile name or .toml (its built venv), an environment hpcenv built for
    a project (``isambard-open-instruct``: its profile's settings), or a venv directory or
    python.

    With a venv or python path, ``profile_name`` (optional) supplies the settings.
    """
    as_path = Path(env)
    prof = schema.load(profile_name) if profile_name else None
    if as_path.is_dir() and not env.endswith(".toml"):
        python = paths.venv_python(as_path)
        if not python.exists():
            raise BadInput(
                f"--env {env}: no bin/python in that directory; give a venv or a profile name"
            )
        return Target(name=prof.name if prof else as_path.name, python=python, profile=prof)
    if as_path.is_file() and not env.endswith(".toml"):
        venv_name = as_path.absolute().parent.parent.name  # <venv>/bin/python
        return Target(
            name=prof.name if prof else venv_name or "python", python=as_path, profile=prof
        )
    built_for = paths.environment_profile(env) if "/" not in env else None
    if built_for and built_for != env:  # venvs/<profile>-<project>: its profile's settings
        prof = schema.load(profile_name or built_for)
        return Target(name=env, python=paths.venv_python(paths.built_venv(env)), profile=prof)
    prof = schema.load(env)
    venv = paths.built_venv(prof.name)
    python = paths.venv_python(venv)
    if not python.exists():
        raise BadInput(
            f"--env {env}: the environment of profile {prof.name} is not built ({venv} has no "
            f"bin/python); run 'hpcenv build {prof.name}' (nox -s build-{prof.name}) first"
        )
    return Target(name=prof.name, python=python, profile=prof)


def check_names(names: Sequence[str]) -> None:
    bad = [n for n in names if n not in registry.NAMES]
    if bad:
        known = ", ".join(registry.NAMES)
        raise BadInput(f"unknown probe(s) {', '.join(bad)}; known: {known}")


def run_suite(
    target: Target,
    names: Sequence[str],
    *,
    launcher: Launcher,
    ranks: int,
    result_dir: Path,
    timeout_s: float | None = None,
    extra_args: Mapping[str, Sequence[str]] | None = None,
    on_start: Any = None,
    on_done: Any = None,
) -> list[ProbeResult]:
    """Run ``names`` one after the other in ``target``; multi-rank ones with ``ranks``."""
    check_names(names)
    env = target.profile.env_for(nodes=launcher.nodes) if target.profile else {}
    results = []
    for name in names:
        spec = ProbeSpec(
            name=name,
            python=target.python,
            args=tuple((extra_args or {}).get(name, ())),
            ranks=ranks if name in registry.MULTI_RANK else 1,
            timeout_s=timeout_s or target.timeout_s,
            env=env,
            config=target.config,
        )
        if on_start is not None:
            on_start(spec)
        result = run_probe(spec, launcher=launcher, result_dir=result_dir)
        if on_done is not None:
            on_done(result)
        results.append(result)
    return results


__all__ = [
    "Launcher",
    "LocalLauncher",
    "ProbeSpec",
    "Target",
    "check_names",
    "collect",
    "config_for",
    "resolve_target",
    "run_probe",
    "run_suite",
]
