"""A Ray cluster across the nodes of a SLURM allocation, for the ray probe.

The recipe of Ray's SLURM guide: the head on the first host of the node list
(``ray start --head --block`` in a one-node ``srun`` step pinned with ``-w``),
one worker per other host (a one-node step each), every node's
``--node-ip-address`` pinned to the address its host name resolves to (a worker left
to choose picks any interface of a multi-NIC node, e.g. the high-speed one the head
does not listen on), ``--num-cpus`` the CPUs the job asked for (``job_cpus``: not
``SLURM_CPUS_ON_NODE``, all 288 of an exclusive GH200 node), wait until ``ray.nodes()``
shows every node alive (bounded: a node that never joins is named, not waited
for; one driver reports it beside the steps, so a step that dies ends the wait at
once), run the probe with ``RAY_ADDRESS`` set, and tear the cluster down in a
``finally``: the srun steps we started are stopped by PID, which ends their
``ray start --block`` processes and, with them, the raylets. ``ray stop`` is
never used: it kills every Ray process of the user on the node, including other
jobs' clusters.

Run as ``python -m hpcenv.slurm.ray_cluster [options] -- ARGV`` by ``SrunLauncher``
for the ray probe, so the runner sees one process that ends when the probe ends, and
by the job scripts of ``hpcenv sbatch --ray -- CMD`` (``--inherit-output``: CMD writes
to the job's log; SIGUSR1 and SIGHUP are passed on to CMD's process group).
``ray symmetric-run`` (Ray >= 2.49) does the same in one srun step;
``has_symmetric_run`` says whether the target's Ray has it (written to
``ray-plan.json`` next to the rank files), but the explicit steps are used
because their wait is bounded and their teardown is ours.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from hpcenv.kit import slurm_env
from hpcenv.kit.ports import free_port
from hpcenv.tools import command
from hpcenv.utils import fsio
from hpcenv.utils.errors import CommandFailed, ProbeFailed
from hpcenv.utils.output import print_text

#: How long every node gets to join the cluster.
JOIN_TIMEOUT_S = 120.0

#: One Ray driver that reports the alive nodes' hostnames, a JSON list a line, every
#: second: ``ray.init`` itself waits for a head that is not up yet, so the join is
#: watched beside the srun steps (a step that dies is seen at once, never after a
#: blocking query) and Ray is imported once, not once a poll. A failed connect or query
#: (the head not up yet, a GCS hiccup while raylets register) is asked again, its error
#: written as the last line of stderr, which the join timeout's message quotes.
_WATCH_ALIVE = """
import json, sys, time
import ray
while True:
    try:
        ray.init(address={address!r}, log_to_driver=False)
        break
    except Exception as exc:
        print(f"connecting: {{exc!r}}", file=sys.stderr, flush=True)
        ray.shutdown()
        time.sleep(1.0)
while True:
    try:
        alive = sorted(n["NodeManagerHostname"] for n in ray.nodes() if n["Alive"])
    except Exception as exc:
        print(f"asking for the nodes: {{exc!r}}", file=sys.stderr, flush=True)
    else:
        print(json.dumps(alive), flush=True)
    time.sleep(1.0)
"""


@dataclass(frozen=True, kw_only=True)
class RayPlan:
    """Where the head and the workers go and how the workers find the head."""

    hosts: tuple[str, ...]
    head_ip: str
    port: int
    #: the address of each worker host, in the order of ``workers``
    worker_ips: tuple[str, ...] = ()
    num_cpus: int | None = None
    num_gpus: int | None = None

    @property
    def head(self) -> str:
        return self.hosts[0]

    @property
    def workers(self) -> tuple[str, ...]:
        return self.hosts[1:]

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.port}"


def job_cpus(s: slurm_env.SlurmEnv) -> int | None:
    """The CPUs the job asked for on each node: ``--cpus-per-task`` (1 when not given,
    SLURM's default) times its tasks per node, never more than the node gave
    (``SLURM_CPUS_ON_NODE``: an exclusive GH200 node gives all 288, which Ray would
    overcommit); None outside SLURM."""
    tasks = s.ntasks_per_node or s.tasks_per_node
    if s.cpus_per_task is None and tasks is None and s.cpus_on_node is None:
        return None
    asked = (s.cpus_per_task or 1) * (tasks or 1)
    return min(asked, s.cpus_on_node) if s.cpus_on_node else asked


def _address(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise ProbeFailed(f"Ray on SLURM: host {host} does not resolve ({exc})") from exc


def plan(
    hosts: Sequence[str],
    *,
    port: int | None = None,
    head_ip: str | None = None,
    env: Mapping[str, str] | None = None,
) -> RayPlan:
    """Head on the first host; every node's IP as its host name resolves here (the
    address SLURM and the other nodes use)."""
    if not hosts:
        raise ProbeFailed("Ray on SLURM: the allocation has no hosts")
    s = slurm_env.read(os.environ if env is None else env)
    return RayPlan(
        hosts=tuple(hosts),
        head_ip=head_ip or _address(hosts[0]),
        worker_ips=tuple(_address(h) for h in hosts[1:]),
        port=port or free_port(),
        num_cpus=job_cpus(s),
        num_gpus=s.gpus_on_node,
    )


def _resources(p: RayPlan) -> list[str]:
    out = []
    if p.num_cpus is not None:
        out.append(f"--num-cpus={p.num_cpus}")
    if p.num_gpus is not None:
        out.append(f"--num-gpus={p.num_gpus}")
    return out


def head_argv(p: RayPlan, ray: str, temp_dir: str, srun: str = "srun") -> list[str]:
    return [
        srun, "--nodes=1", "--ntasks=1", f"--nodelist={p.head}", "--overlap",
        "--kill-on-bad-exit=1",
        ray, "start", "--head", "--block", f"--port={p.port}",
        f"--node-ip-address={p.head_ip}", "--include-dashboard=false",
        "--disable-usage-stats", f"--temp-dir={temp_dir}", *_resources(p),
    ]  # fmt: skip


def worker_argvs(p: RayPlan, ray: str, srun: str = "srun") -> list[list[str]]:
    """One one-node srun step per non-head host, its address pinned; [] on one node."""
    return [
        [
            srun, "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--overlap",
            "--kill-on-bad-exit=1",
            ray, "start", "--block", f"--address={p.address}", f"--node-ip-address={ip}",
            "--disable-usage-stats", *_resources(p),
        ]
        for host, ip in zip(p.workers, p.worker_ips, strict=True)
    ]  # fmt: skip


def has_symmetric_run(ray: str) -> bool:
    """Whether this Ray has ``ray symmetric-run`` (2.49+), read from ``ray --help``."""
    try:
        done = command.run([ray, "--help"], timeout=60, check=False)
    except CommandFailed:
        return False
    return "symmetric-run" in done.stdout


def alive_hosts(report: Path) -> list[str]:
    """Hostnames of alive nodes, the last whole line the watcher wrote to ``report``
    (``_WATCH_ALIVE``); [] before it has reached the head."""
    try:
        lines = report.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in reversed(lines):
        try:
            hosts = json.loads(line)
        except ValueError:
            continue  # a line half written, or not the watcher's
        if isinstance(hosts, list):
            return [str(h) for h in hosts]
    return []


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


def _short(host: str) -> str:
    return host.split(".", maxsplit=1)[0]


def _wait_for_join(
    p: RayPlan,
    steps: Sequence[tuple[str, list[str]]],
    procs: Sequence[subprocess.Popen[Any]],
    log_dir: Path,
    join_timeout_s: float,
    *,
    watcher: subprocess.Popen[Any],
) -> None:
    """Until every host is alive in the watcher's report; a step or the watcher that
    ends first, or the deadline, raises naming it."""
    want = sorted({_short(h) for h in p.hosts})
    deadline = time.monotonic() + join_timeout_s
    while True:
        dead = [k for k, q in enumerate(procs) if q.poll() is not None]
        if dead:
            which = steps[dead[0]][0]
            err = log_dir / f"ray-{which.replace(' ', '-')}.err"
            raise ProbeFailed(
                f"Ray on SLURM: the {which} step ('ray start' via srun) exited with "
                f"{procs[dead[0]].returncode} before the cluster formed: {_last_line(err)} "
                f"(see {err})"
            )
        if watcher.poll() is not None:
            err = log_dir / "ray-join.err"
            raise ProbeFailed(
                f"Ray on SLURM: the driver watching the join exited with {watcher.returncode} "
                f"before the cluster formed: {_last_line(err)} (see {err})"
            )
        seen = sorted({_short(h) for h in alive_hosts(log_dir / "ray-join.log")})
        if all(h in seen for h in want):
            return
        if time.monotonic() >= deadline:
            missing = [h for h in want if h not in seen]
            raise ProbeFailed(
                f"Ray on SLURM: node(s) {', '.join(missing)} did not join the cluster at "
                f"{p.address} within {join_timeout_s:g} s (the join's watcher last said: "
                f"{_last_line(log_dir / 'ray-join.err')}); see {log_dir}/ray-*.err"
            )
        time.sleep(0.2)


@contextmanager
def cluster(
    p: RayPlan,
    *,
    python: str,
    ray: str,
    env: Mapping[str, str],
    log_dir: Path,
    join_timeout_s: float = JOIN_TIMEOUT_S,
    srun: str = "srun",
) -> Iterator[str]:
    """Start the cluster, wait for every node, yield its address; always tear it down."""
    log_dir.mkdir(parents=True, exist_ok=True)
    # Short: Ray's UNIX socket paths live under it (the limit is ~107 characters).
    temp_dir = tempfile.mkdtemp(prefix="hpcray-", dir="/tmp")
    procs: list[subprocess.Popen[Any]] = []
    steps = [("head", head_argv(p, ray, temp_dir, srun))]
    steps += [
        (f"worker {host}", argv)
        for host, argv in zip(p.workers, worker_argvs(p, ray, srun), strict=True)
    ]
    try:
        for which, argv in steps:
            log = f"ray-{which.replace(' ', '-')}"  # a host name may hold dots: no with_suffix
            procs.append(
                command.spawn(
                    argv, env=env, stdout=log_dir / f"{log}.log", stderr=log_dir / f"{log}.err"
                )
            )
        watcher = command.spawn(
            [python, "-c", _WATCH_ALIVE.format(address=p.address)],
            env=env, stdout=log_dir / "ray-join.log", stderr=log_dir / "ray-join.err",
        )  # fmt: skip
        try:
            _wait_for_join(p, steps, procs, log_dir, join_timeout_s, watcher=watcher)
        finally:
            command.shutdown_all([watcher])  # a driver of its own: gone before the probe runs
        yield p.address
    finally:
        command.shutdown_all(procs)  # the srun steps, by PID: their ray start --block end too
        shutil.rmtree(temp_dir, ignore_errors=True)


def with_auth_token(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with a fresh Ray auth token unless one is set.

    Ray >= 2.52 turns token authentication on for ``ray start --head``; the head,
    the workers (through srun's ``--export=ALL``) and the probe must share the
    token, and a per-job token keeps other users on the node out of the cluster.
    It is never written to a log (``redact`` hides ``*TOKEN*`` variables).
    """
    out = dict(env)
    if not out.get("RAY_AUTH_TOKEN"):
        out["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    out.setdefault("RAY_AUTH_MODE", "token")
    return out


def _raise_on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


#: Signals passed on to the command's process group (a checkpoint request before the
#: walltime, ``sbatch --signal=B:USR1@T``); SIGTERM and SIGINT end the run instead.
FORWARDED = (signal.SIGUSR1, signal.SIGHUP)


def _forward_to(proc: subprocess.Popen[Any]) -> None:
    def forward(signum: int, frame: FrameType | None) -> None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)


def main(argv: Sequence[str] | None = None) -> int:
    """Start Ray over the allocation, run ARGV against it, tear Ray down."""
    parser = argparse.ArgumentParser(prog="python -m hpcenv.slurm.ray_cluster")
    parser.add_argument("--hosts", required=True, help="comma-separated hosts, head first")
    parser.add_argument("--python", required=True, help="the target environment's python")
    parser.add_argument("--log-dir", required=True, type=Path)
    parser.add_argument("--stdout", type=Path)
    parser.add_argument("--stderr", type=Path)
    parser.add_argument(
        "--inherit-output", action="store_true", help="ARGV writes to our stdout and stderr"
    )
    parser.add_argument("--head-ip", default=None)
    parser.add_argument("--join-timeout", type=float, default=JOIN_TIMEOUT_S)
    parser.add_argument("probe", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    probe = args.probe[1:] if args.probe[:1] == ["--"] else args.probe
    signal.signal(signal.SIGTERM, _raise_on_term)  # the runner's stop runs our finally
    env = with_auth_token(os.environ)
    ray = str(Path(args.python).parent / "ray")
    try:
        p = plan(args.hosts.split(","), head_ip=args.head_ip, env=env)
    except ProbeFailed as exc:
        print_text(f"{exc}\n", err=True)
        return 5
    fsio.write_json(
        args.log_dir / "ray-plan.json",
        {
            "head": p.head,
            "workers": list(p.workers),
            "address": p.address,
            "worker_ips": list(p.worker_ips),
            "num_cpus": p.num_cpus,
            "symmetric_run_available": has_symmetric_run(ray),
            "head_argv": head_argv(p, ray, "<temp>"),
            "worker_argvs": worker_argvs(p, ray),
        },
    )
    try:
        with cluster(
            p, python=args.python, ray=ray, env=env, log_dir=args.log_dir,
            join_timeout_s=args.join_timeout,
        ) as address:  # fmt: skip
            probe_env = {**env, "RAY_ADDRESS": address}
            proc = command.spawn(
                probe,
                env=probe_env,
                stdout=args.stdout,
                stderr=args.stderr,
                inherit_output=args.inherit_output,
            )
            _forward_to(proc)
            try:
                return proc.wait()
            finally:
                command.shutdown_all([proc])
    except ProbeFailed as exc:
        if args.stderr is not None:
            fsio.append_text(args.stderr, f"{exc}\n")
        print_text(f"{exc}\n", err=True)
        return 5


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
