"""A real one-node SLURM for the tests: munged, slurmctld and slurmd on this host.

Import the fixture in a test module (``from slurm_cluster import slurm_cluster_fixture``)
and ask for ``slurm``. It writes a minimal slurm.conf into a
temp dir (recipe: shared/KNOWLEDGE.md section 7), starts the daemons in the foreground
as children of the test process so their PIDs are known, waits until ``sinfo`` says
the node is idle, and stops exactly those PIDs at the end of the session. A munged
that is already running is reused and left alone; busy default ports are replaced by
free ones. When startup fails the daemon logs are printed, so CI shows why.

Without the binaries the tests skip (or fail under ``HPCENV_REQUIRE_SLURM=1``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import require
from hpcenv.kit.ports import free_port

DAEMONS = ("slurmctld", "slurmd", "munged")
CLIENTS = ("sinfo", "sbatch", "srun", "squeue", "scontrol", "scancel", "munge", "unmunge")
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
START_TIMEOUT_S = 60.0


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).is_file()), None
    )


def missing_binaries() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def munge_works(env: dict[str, str] | None = None) -> bool:
    """True when a running munged answers on the default socket."""
    munge, unmunge = _which("munge"), _which("unmunge")
    if not (munge and unmunge and MUNGE_SOCKET.exists()):
        return False
    try:
        cred = subprocess.run(
            [munge, "-n"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        subprocess.run(
            [unmunge], input=cred, capture_output=True, text=True, timeout=10, check=True
        )
    except (subprocess.SubprocessError, OSError):
        return False
    return True


@dataclass(kw_only=True)
class SlurmCluster:
    """What a test needs to use the cluster: the conf, the node, the environment."""

    root: Path
    conf: Path
    node: str
    cpus: int
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def run(
        self, *argv: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check
        )

    def log_text(self) -> str:
        parts = []
        for name, path in self.logs.items():
            try:
                text = path.read_text(errors="replace")
            except OSError:
                text = "(no log)"
            parts.append(f"----- {name} log ({path}) -----\n{text[-6000:]}")
        return "\n".join(parts)

    def wait_job(self, job_id: str, timeout: float = 180.0) -> str:
        """Wait until the job has left the queue; return its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            q = self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False)
            if q.returncode == 0 and not q.stdout.strip():
                break
            time.sleep(0.5)
        else:
            self.run("scancel", job_id, check=False)
            raise AssertionError(f"job {job_id} still queued after {timeout} s\n{self.log_text()}")
        show = self.run("scontrol", "show", "job", job_id, check=False)
        m = re.search(r"JobState=(\S+)", show.stdout)
        return m.group(1) if m else "UNKNOWN"


def _conf_text(root: Path, node: str, cpus: int, memory_mib: int, ports: tuple[int, int]) -> str:
    return f"""\
# Written by tests/slurm_cluster.py for a one-node test cluster.
ClusterName=hpcenvtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN
PartitionName=debug Default=YES Nodes=ALL State=UP MaxTime=INFINITE OverSubscribe=NO
"""


def _memory_mib() -> int:
    m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    total = int(m.group(1)) // 1024 if m else 2048
    return max(512, total // 2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop one daemon we started, by its PID: SIGTERM, then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _start_munged(root: Path, cluster: SlurmCluster) -> None:
    munged = _which("munged")
    assert munged
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        mungekey = _which("mungekey")
        if mungekey:
            subprocess.run([mungekey, "--create", f"--keyfile={key}"], check=True, timeout=30)
        else:
            subprocess.run(
                [_which("create-munge-key") or "create-munge-key"], check=True, timeout=30
            )
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_SOCKET.parent, "munge", "munge")
    for d in ("/var/lib/munge", "/var/log/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    log = root / "munged.log"
    cluster.logs["munged"] = log
    cluster.procs["munged"] = subprocess.Popen(
        [munged, "--foreground", "--force", f"--log-file={log}"],
        user="munge",
        group="munge",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.with_suffix(".err").open("wb"),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if munge_works():
            return
        if cluster.procs["munged"].poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError("munged did not come up")


def start_cluster(root: Path) -> SlurmCluster:
    """Start (or reuse munged and) start slurmctld + slurmd; raise with logs on failure."""
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    ports = (
        6817 if port_free(6817) else free_port(),
        6818 if port_free(6818) else free_port(),
    )
    for sub in ("state", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(_conf_text(root, node, cpus, _memory_mib(), ports))
    env = dict(os.environ, SLURM_CONF=str(conf))
    for key in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
        if key != "SLURM_CONF":
            del env[key]
    cluster = SlurmCluster(root=root, conf=conf, node=node, cpus=cpus, env=env)
    try:
        if not munge_works():
            _start_munged(root, cluster)
        for name, extra in (("slurmctld", ["-i"]), ("slurmd", [])):
            binary = _which(name)
            assert binary
            cluster.logs[name] = root / f"{name}.log"
            cluster.procs[name] = subprocess.Popen(
                [binary, "-D", "-f", str(conf), *extra],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=(root / f"{name}.out").open("wb"),
                stderr=subprocess.STDOUT,
            )
            cluster.logs[f"{name} stdout"] = root / f"{name}.out"
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            for name, proc in cluster.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} during startup")
            q = cluster.run("sinfo", "-h", "-o", "%T", timeout=10, check=False)
            state = q.stdout.strip()
            if state == "idle":
                return cluster
            if state in ("down", "drained", "down*"):
                cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
            time.sleep(0.5)
        raise RuntimeError(f"node not idle after {START_TIMEOUT_S:g} s (sinfo says {state!r})")
    except Exception as exc:
        logs = cluster.log_text()
        stop_cluster(cluster)
        raise RuntimeError(f"local SLURM failed to start: {exc}\n{logs}") from exc


def stop_cluster(cluster: SlurmCluster) -> None:
    """Cancel leftover jobs, then stop slurmd, slurmctld and munged: only those we started."""
    if "slurmctld" in cluster.procs and cluster.procs["slurmctld"].poll() is None:
        try:
            cluster.run("scancel", "--full", "-u", "root", timeout=15, check=False)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                q = cluster.run("squeue", "-h", timeout=10, check=False)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.5)
        except subprocess.SubprocessError:
            pass
    for name in ("slurmd", "slurmctld", "munged"):
        proc = cluster.procs.pop(name, None)
        if proc is not None:
            _stop(proc)


#: One cluster per test session, shared by every module that imports the fixture
#: (each import makes its own session fixture): started by the first, stopped by the last.
_SHARED: dict[str, Any] = {"cluster": None, "users": 0}


@pytest.fixture(scope="session", name="slurm")
def slurm_cluster_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    missing = missing_binaries()
    how = "apt-get install slurmctld slurmd slurm-client munge"
    require("slurm", not missing, f"missing {', '.join(missing)} ({how})")
    require("slurm", os.geteuid() == 0, "the test cluster runs its daemons as root")
    if _SHARED["cluster"] is None:
        root = Path(os.environ.get("HPCENV_SLURM_ROOT") or tmp_path_factory.mktemp("slurm"))
        _SHARED["cluster"] = start_cluster(root)
    cluster: SlurmCluster = _SHARED["cluster"]
    _SHARED["users"] += 1
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(cluster.conf))
        for key in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if key != "SLURM_CONF":
                mp.delenv(key)
        try:
            yield cluster
        finally:
            _SHARED["users"] -= 1
            if _SHARED["users"] == 0:
                _SHARED["cluster"] = None
                stop_cluster(cluster)
