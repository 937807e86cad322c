"""A real N-node SLURM cluster on this one machine, for the tests and for people.

One code path for both: ``python tests/support/cluster.py up --nodes 3 --slow node3`` (what
``nox -s cluster -- up ...`` runs) and the pytest fixture ``cluster`` (below) call ``up``
and ``down`` here. What ``up`` makes, all named with one instance prefix ``hc<4 hex>``
so that several clusters (other sessions' tests) never collide, and recorded in
``<root>/state.json`` so that ``down`` removes exactly that:

- two bridges in the host namespace: ``<p>e`` (the node network: 10.A.B.0/24, the
  host holds .254, where slurmctld listens) and ``<p>h`` (a second, "high-speed"
  network 10.A.B+1.0/24 the host has no address on);
- per node k: a network namespace ``<p>n<k>`` with ``eth0`` (10.A.B.k) and ``hsn0``
  (10.A.B+1.k), each a veth to its bridge;
- ``<root>/hosts``, bind-mounted over /etc/hosts for everything run on a node, names
  every node: ``node<k>`` on eth0, ``node<k>-hsn`` on hsn0, as real clusters name
  their networks;
- per node one ``slurmd -N node<k>`` started in that namespace with the hostname
  ``node<k>`` (``as_node``): its job steps (srun tasks, batch scripts) run there too, so
  a program on node k sees node k's hostname, interfaces and hosts;
- one ``munged`` on its own socket and key (``AuthInfo=socket=``) and one
  ``slurmctld``, in the host namespace;
- ``--gres gpu:TYPE:N``: every node declares that GRES (``GresTypes=gpu``, a
  ``gres.conf`` whose device files ``<root>/dev/nvidia<i>`` are links to /dev/null, as
  slurmd wants character devices): SLURM schedules GPU requests (``--gpus-per-node``,
  ``--gres=gpu:TYPE:N``) and sets ``CUDA_VISIBLE_DEVICES`` for GPUs this machine does
  not have; a fake ``nvidia-smi`` on the nodes (``Cluster.set_node_env``: PATH) stands
  in for their driver;
- ``--slow NODE``: a ``tc ... tbf`` qdisc on every link of that node, both directions
  (inside its namespace and on the host end of its veths), so traffic to or from it is
  capped at ``--rate`` (default 100 Mbit/s).

``up`` writes ``<root>/env.sh`` (``SLURM_CONF``, PATH); ``down`` cancels the jobs, stops
every daemon by the PID it recorded (checked against the process start time, so a
reused PID is never signalled), ends what still runs in the namespaces (``ip netns
pids``: only processes inside our namespaces), and removes the links, bridges,
namespaces, hosts files and the root. Nothing else on the machine is touched and
nothing is stopped by name.

A cluster the pytest fixture starts is owned by that pytest: its daemons die with it
(PR_SET_PDEATHSIG), and its state is also kept in ``/run/hpcenv-test-clusters``, so a
session killed before its cleanup (SIGKILL, a closed pipe) leaves only kernel objects,
which the next ``up`` removes (``reap``). A cluster of the command line has no owner: it
runs until ``down``. It needs root, iproute2 (``ip``, ``tc``), util-linux
``unshare``, and Debian's slurmctld, slurmd, slurm-client and munge.

    python tests/support/cluster.py up [--nodes 3] [--slow node3] [--rate 100mbit] [--gres gpu:t:4]
                               [--root DIR]
    . .hpcenv/cluster/env.sh && srun -N3 hostname
    python tests/support/cluster.py status | down [--root DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcenv.kit.children import die_with

DAEMONS = ("slurmctld", "slurmd", "munged", "mungekey")
CLIENTS = ("sinfo", "sbatch", "srun", "squeue", "scontrol", "scancel", "salloc", "munge")
TOOLS = ("ip", "tc", "unshare", "nsenter")
DEFAULT_ROOT = Path(".hpcenv") / "cluster"
DEFAULT_NODES = 3
DEFAULT_RATE = "100mbit"
#: Every cluster's state is also kept here (outside its root, which pytest may delete):
#: ``up`` reaps the clusters whose owner (the pytest that made them) has died.
REGISTRY = Path("/run/hpcenv-test-clusters")
START_TIMEOUT_S = 60.0
#: ``sh -c`` script run in a node's new mount and UTS namespaces: set the hostname, put
#: the cluster's hosts file over /etc/hosts (a private mount), exec argv. The node name,
#: the file and argv are arguments, never spliced into the script.
AS_NODE = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'


class ClusterError(Exception):
    """One line saying what is missing or what failed (with the logs when there are)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).is_file()), None
    )


def missing() -> list[str]:
    """What this machine lacks to run a cluster (root, binaries), as fixes to apply."""
    out = []
    if os.geteuid() != 0:
        out.append("root (network namespaces, bridges and the daemons need it)")
    tools = [t for t in (*DAEMONS, *CLIENTS, *TOOLS) if _which(t) is None]
    if tools:
        out.append(
            f"{', '.join(tools)} (apt-get install slurmctld slurmd slurm-client munge "
            "iproute2 util-linux)"
        )
    return out


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise ClusterError(
            f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}"
        )
    return done.stdout


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@dataclass(kw_only=True)
class Node:
    name: str
    netns: str
    eth0: str  # the node network (names resolve here; SLURM's NodeAddr)
    hsn0: str  # the second network
    veths: tuple[str, str]  # host ends: (eth0's, hsn0's)


@dataclass(kw_only=True)
class Daemon:
    name: str
    pid: int
    started: int | None  # /proc start time, to never signal a reused PID
    log: str


@dataclass(kw_only=True)
class State:
    """Everything ``up`` made, written to ``<root>/state.json`` as it is made."""

    prefix: str
    root: str
    conf: str = ""
    bridges: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    rate: str = DEFAULT_RATE
    controller: str = ""
    subnets: list[str] = field(default_factory=list)
    gres: str = ""  # "gpu:TYPE:N" on every node; "" none
    #: [pid, start time] of the process the cluster dies with (a pytest session); None
    #: for one started by the command line, which lives until 'down'
    owner: list[int] | None = None

    def save(self) -> None:
        text = json.dumps(asdict(self), indent=1)
        REGISTRY.mkdir(mode=0o700, exist_ok=True)
        for path in (Path(self.root) / "state.json", REGISTRY / f"{self.prefix}.json"):
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)

    @classmethod
    def load(cls, root: Path) -> State:
        return cls.load_file(root / "state.json")

    @classmethod
    def load_file(cls, path: Path) -> State:
        data = json.loads(path.read_text())
        data["nodes"] = [Node(**{**n, "veths": tuple(n["veths"])}) for n in data.get("nodes", [])]
        data["daemons"] = [Daemon(**d) for d in data.get("daemons", [])]
        return cls(**data)


@dataclass(kw_only=True)
class Cluster:
    """A running cluster: its conf, nodes and the environment its clients need."""

    state: State
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return Path(self.state.root)

    @property
    def conf(self) -> Path:
        return Path(self.state.conf)

    @property
    def nodes(self) -> list[str]:
        return [n.name for n in self.state.nodes]

    @property
    def node(self) -> str:
        """The first node (what the one-node tests call "the node")."""
        return self.nodes[0]

    def node_info(self, name: str) -> Node:
        return next(n for n in self.state.nodes if n.name == name)

    def run(
        self, *argv: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a client (sinfo, sbatch, ...) in the host namespace with the cluster's env."""
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check
        )

    def on(
        self, node: str, *argv: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on ``node``: inside its namespace, with its hostname and hosts."""
        return subprocess.run(
            as_node(self.node_info(node), self.root / "hosts", argv),
            env=self.env, capture_output=True, text=True, timeout=timeout, check=check,
        )  # fmt: skip

    def set_node_env(self, node: str, env: dict[str, str] | None) -> None:
        """Give every task on ``node`` these variables from now on (None: none), the way
        a node's own profile scripts would: through SLURM's TaskProlog."""
        self.node_info(node)  # a known node
        path = self.root / "nodeenv" / node
        if not env:
            path.unlink(missing_ok=True)
            return
        for key, value in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\n" in value:
                raise ClusterError(f"set_node_env: {key!r}={value!r} is not NAME=one-line value")
        path.write_text("".join(f"{k}={v}\n" for k, v in env.items()))

    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes sent and received per node and interface, read on the host end of each
        veth (what the host end receives is what the node sent)."""
        out: dict[str, dict[str, int]] = {}
        for n in self.state.nodes:
            for iface, veth in zip(("eth0", "hsn0"), n.veths, strict=True):
                stats = Path("/sys/class/net") / veth / "statistics"
                sent = int((stats / "rx_bytes").read_text())
                received = int((stats / "tx_bytes").read_text())
                out.setdefault(n.name, {})[iface] = sent + received
        return out

    def log_text(self, tail: int = 6000) -> str:
        parts = []
        for d in self.state.daemons:
            try:
                text = Path(d.log).read_text(errors="replace")
            except OSError:
                text = "(no log)"
            parts.append(f"----- {d.name} log ({d.log}) -----\n{text[-tail:]}")
        return "\n".join(parts)


def as_node(node: Node, hosts: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` run as on ``node``: in its network namespace, in a UTS namespace named
    after it, and in a private mount namespace where ``hosts`` is /etc/hosts.

    Not ``ip netns exec``: it remounts /sys for the namespace, which hides the cgroup
    mounts slurmd needs to start; /sys/class/net therefore shows the host's links
    (netlink, getifaddrs and ``ip`` inside the namespace show the node's own).
    """
    nsenter, unshare = _which("nsenter") or "nsenter", _which("unshare") or "unshare"
    return [nsenter, f"--net=/run/netns/{node.netns}", "--", unshare, "--mount", "--uts",
            "--propagation", "private", "--", "sh", "-c", AS_NODE, node.name, str(hosts),
            *argv]  # fmt: skip


def _subnets() -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """Two /24s in 10.0.0.0/8 that no interface or route of this host overlaps."""
    used = []
    for line in _run(["ip", "-4", "route", "show", "table", "all"]).splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("local", "broadcast", "unreachable", "prohibit", "blackhole"):
            word = line.split()[1]
        try:
            used.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    for _ in range(200):
        a, b = 200 + secrets.randbelow(54), 2 * secrets.randbelow(127)
        pair = (
            ipaddress.ip_network(f"10.{a}.{b}.0/24"),
            ipaddress.ip_network(f"10.{a}.{b + 1}.0/24"),
        )
        if not any(n.overlaps(u) for n in pair for u in used if u.prefixlen > 0):
            return pair
    raise ClusterError("no free pair of /24 subnets in 10.200-253.x.0; remove stale bridges")


def _memory_mib() -> int:
    m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    return int(m.group(1)) // 1024 if m else 2048


def _gres(text: str) -> tuple[str, str, int]:
    """``gpu:TYPE:N`` -> (gpu, TYPE, N)."""
    m = re.fullmatch(r"(gpu):([A-Za-z0-9_]+):(\d+)", text)
    if not m:
        raise ClusterError(f"--gres {text!r}: write it like gpu:tstgpu:4")
    return m[1], m[2], int(m[3])


def gres_conf_text(state: State) -> str:
    """gres.conf, and the stand-in device files it names (links to /dev/null)."""
    name, kind, count = _gres(state.gres)
    dev = Path(state.root) / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(count):
        (dev / f"nvidia{i}").symlink_to("/dev/null")
    return (
        "# Written by tests/support/cluster.py up: stand-in device files (no GPUs here)\n"
        f"Name={name} Type={kind} File={dev}/nvidia[0-{count - 1}]\n"
    )


def conf_text(state: State, *, cpus: int, memory_mib: int, ctld_port: int) -> str:
    root = state.root
    gres = f" Gres={state.gres}" if state.gres else ""
    nodes = "\n".join(
        f"NodeName={n.name} NodeAddr={n.eth0} CPUs={cpus} RealMemory={memory_mib}{gres} "
        "State=UNKNOWN"
        for n in state.nodes
    )
    return f"""\
# Written by tests/support/cluster.py up: a {len(state.nodes)}-node test cluster ({state.prefix}).
ClusterName={state.prefix}
SlurmctldHost={state.controller}
SlurmctldPort={ctld_port}
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
MpiDefault=none
{"GresTypes=gpu" if state.gres else "# no GresTypes"}
TaskProlog={root}/task_prolog.sh
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
{nodes}
PartitionName=debug Default=YES Nodes=ALL State=UP MaxTime=INFINITE OverSubscribe=NO
"""


#: SLURM's TaskProlog runs on the node before every task; the ``export NAME=value`` lines
#: it prints are set in the task's environment. Ours prints ``<root>/nodeenv/<node>``.
TASK_PROLOG = """\
#!/bin/sh
# Written by tests/support/cluster.py: per-node environment (Cluster.set_node_env).
f={nodeenv}/"$(hostname)"
[ -f "$f" ] || exit 0
while IFS= read -r line; do printf 'export %s\\n' "$line"; done < "$f"
"""


def hosts_text(state: State) -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    host, _, ctl_ip = state.controller.partition("(")
    lines.append(f"{ctl_ip.rstrip(')')} {host}")
    lines += [f"{n.eth0} {n.name}" for n in state.nodes]
    lines += [f"{n.hsn0} {n.name}-hsn" for n in state.nodes]
    return "\n".join(lines) + "\n"


def _tbf(rate: str) -> list[str]:
    """``tc`` arguments for a token bucket of ``rate`` (e.g. 100mbit) with a 10 ms burst."""
    m = re.fullmatch(r"(\d+)(k|m|g)bit", rate.lower())
    if not m:
        raise ClusterError(f"--rate {rate!r}: write it like 100mbit, 500kbit or 1gbit")
    bits = int(m.group(1)) * {"k": 10**3, "m": 10**6, "g": 10**9}[m.group(2)]
    burst = max(16 * 1024, bits // 8 // 100)
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]


def _network(state: State, count: int) -> None:
    """Bridges, namespaces, veths, addresses and hosts files; saved as they are made."""
    p = state.prefix
    node_net, hsn_net = _subnets()
    state.subnets = [str(node_net), str(hsn_net)]
    ctl_ip = str(node_net[254])
    state.controller = f"{socket.gethostname().split('.')[0]}({ctl_ip})"
    for br, addr in ((f"{p}e", f"{ctl_ip}/24"), (f"{p}h", None)):
        _run(["ip", "link", "add", br, "type", "bridge"])
        state.bridges.append(br)
        state.save()
        if addr:
            _run(["ip", "addr", "add", addr, "dev", br])
        _run(["ip", "link", "set", br, "up"])
    for k in range(1, count + 1):
        node = Node(
            name=f"node{k}", netns=f"{p}n{k}", eth0=str(node_net[k]), hsn0=str(hsn_net[k]),
            veths=(f"{p}{k}e", f"{p}{k}h"),
        )  # fmt: skip
        _run(["ip", "netns", "add", node.netns])
        state.nodes.append(node)
        state.save()
        inns = ["ip", "netns", "exec", node.netns]
        _run([*inns, "ip", "link", "set", "lo", "up"])
        for iface, veth, br, addr in (
            ("eth0", node.veths[0], f"{p}e", node.eth0),
            ("hsn0", node.veths[1], f"{p}h", node.hsn0),
        ):
            peer = f"{veth}x"
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
            _run(["ip", "link", "set", peer, "netns", node.netns])
            _run([*inns, "ip", "link", "set", peer, "name", iface])
            _run([*inns, "ip", "addr", "add", f"{addr}/24", "dev", iface])
            _run([*inns, "ip", "link", "set", iface, "up"])
            _run(["ip", "link", "set", veth, "master", br])
            _run(["ip", "link", "set", veth, "up"])
    (Path(state.root) / "hosts").write_text(hosts_text(state))


def throttle(state: State, node: str, rate: str) -> None:
    """Cap every link of ``node`` at ``rate``, both directions (tbf on each end)."""
    n = next((x for x in state.nodes if x.name == node), None)
    if n is None:
        names = ", ".join(x.name for x in state.nodes)
        raise ClusterError(f"--slow {node}: no such node; the cluster has {names}")
    tbf = _tbf(rate)
    for iface, veth in zip(("eth0", "hsn0"), n.veths, strict=True):
        _run(["ip", "netns", "exec", n.netns, "tc", "qdisc", "replace", "dev", iface, "root",
              *tbf])  # fmt: skip
        _run(["tc", "qdisc", "replace", "dev", veth, "root", *tbf])
    if node not in state.slow:
        state.slow.append(node)
    state.rate = rate
    state.save()


def _spawn(
    state: State, cluster: Cluster, name: str, argv: list[str], log: Path, *, detach: bool
) -> None:
    proc = subprocess.Popen(
        argv,
        env=cluster.env,
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=detach,
        # not detached: the daemons die with this process, however it ends
        preexec_fn=None if detach else die_with(os.getpid()),  # noqa: PLW1509 - prctl only
    )
    cluster.procs[name] = proc
    state.daemons.append(Daemon(name=name, pid=proc.pid, started=_start_time(proc.pid),
                                log=str(log)))  # fmt: skip
    state.save()


def client_env(conf: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment SLURM clients need for this cluster: SLURM_CONF, and nothing of
    an allocation this process may be running in."""
    env = dict(os.environ if base is None else base)
    for key in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
        del env[key]
    env["SLURM_CONF"] = str(conf)
    return env


def _munge_works(cluster: Cluster) -> bool:
    sock = str(cluster.root / "munge" / "munge.socket")
    try:
        cred = subprocess.run(["munge", "-n", "-S", sock], capture_output=True, text=True,
                              timeout=10, check=True).stdout  # fmt: skip
        subprocess.run(["unmunge", "-S", sock], input=cred, capture_output=True, text=True,
                       timeout=10, check=True)  # fmt: skip
    except (subprocess.SubprocessError, OSError):
        return False
    return True


def _daemons(state: State, cluster: Cluster, *, detach: bool) -> None:
    root = cluster.root
    key_dir, sock_dir = root / "munge-key", root / "munge"
    key_dir.mkdir(mode=0o700)
    sock_dir.mkdir(mode=0o755)
    _run([_which("mungekey") or "mungekey", "--create", f"--keyfile={key_dir / 'munge.key'}"])
    munged = [
        _which("munged") or "munged", "--foreground", "--force",
        f"--socket={sock_dir / 'munge.socket'}", f"--key-file={key_dir / 'munge.key'}",
        f"--pid-file={sock_dir / 'munged.pid'}", f"--seed-file={key_dir / 'munged.seed'}",
    ]  # fmt: skip
    _spawn(state, cluster, "munged", munged, root / "log" / "munged.log", detach=detach)
    deadline = time.monotonic() + 20
    while not _munge_works(cluster):
        if time.monotonic() > deadline or cluster.procs["munged"].poll() is not None:
            raise ClusterError("munged did not come up")
        time.sleep(0.2)
    conf = str(cluster.conf)
    ctld = [_which("slurmctld") or "slurmctld", "-D", "-i", "-f", conf]
    _spawn(state, cluster, "slurmctld", ctld, root / "log" / "slurmctld.out", detach=detach)
    for node in state.nodes:
        slurmd = [_which("slurmd") or "slurmd", "-D", "-N", node.name, "-f", conf]
        log = root / "log" / f"slurmd-{node.name}.out"
        argv = as_node(node, root / "hosts", slurmd)
        _spawn(state, cluster, f"slurmd-{node.name}", argv, log, detach=detach)


def _wait_idle(cluster: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode} during startup")
        q = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10, check=False)
        states = dict(line.split() for line in q.stdout.splitlines() if len(line.split()) == 2)
        if set(states) == set(cluster.nodes) and all(s == "idle" for s in states.values()):
            return
        for name, s in states.items():
            if s.rstrip("*") in ("down", "drained", "draining"):
                cluster.run("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
        time.sleep(0.5)
    raise ClusterError(f"nodes not idle after {START_TIMEOUT_S:g} s (sinfo says {states})")


def write_env_sh(cluster: Cluster) -> Path:
    """``env.sh``: what a shell sources to use the cluster (and nothing secret)."""
    bindir = Path(sys.executable).parent
    path_dirs = [str(bindir)] if (bindir / "hpcenv").exists() else []
    lines = [
        f"# Written by tests/support/cluster.py up ({cluster.state.prefix}, nodes "
        f"{', '.join(cluster.nodes)}; slow: {', '.join(cluster.state.slow) or 'none'}).",
        "# Source it to use the test cluster: . " + shlex.quote(str(cluster.root / "env.sh")),
        f"export SLURM_CONF={shlex.quote(str(cluster.conf))}",
        f"export HPCENV_CLUSTER_ROOT={shlex.quote(str(cluster.root))}",
        "unset SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST SLURM_NTASKS",
        'export PATH="'
        + "".join(f"{shlex.quote(d)}:" for d in [*path_dirs, "/usr/sbin"])
        + '$PATH"',
    ]
    out = cluster.root / "env.sh"
    out.write_text("\n".join(lines) + "\n")
    return out


def up(
    root: Path,
    *,
    nodes: int = DEFAULT_NODES,
    slow: Sequence[str] = (),
    rate: str = DEFAULT_RATE,
    detach: bool = False,
    gres: str = "",
) -> Cluster:
    """Start the cluster under ``root`` (which must not hold one); on failure everything
    made so far is removed and the error carries the daemon logs.

    ``detach``: daemons in their own sessions, outliving this process (the CLI's ``up``);
    the fixture keeps them as its children.
    """
    lacking = missing()
    if lacking:
        raise ClusterError(f"the test cluster needs {'; '.join(lacking)}")
    if nodes < 1 or nodes > 250:
        raise ClusterError(f"--nodes {nodes}: must be between 1 and 250")
    _tbf(rate)  # check it before anything is made
    if gres:
        _gres(gres)
    reap()
    root = root.absolute()
    if (root / "state.json").exists():
        raise ClusterError(f"{root} holds a cluster already; run 'down' first")
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "run", "log", "nodeenv",
                *(f"spool/node{k}" for k in range(1, nodes + 1))):  # fmt: skip
        (root / sub).mkdir(parents=True, exist_ok=True)
    prolog = root / "task_prolog.sh"
    prolog.write_text(TASK_PROLOG.format(nodeenv=shlex.quote(str(root / "nodeenv"))))
    prolog.chmod(0o755)
    state = State(prefix=f"hc{secrets.token_hex(2)}", root=str(root), rate=rate, gres=gres)
    if not detach:
        me = os.getpid()
        state.owner = [me, _start_time(me) or 0]
    state.conf = str(root / "slurm.conf")
    state.save()
    cluster = Cluster(state=state, env=client_env(Path(state.conf)))
    try:
        _network(state, nodes)
        for node in slow:
            throttle(state, node, rate)
        cpus = max(2, os.cpu_count() or 1)
        memory = max(512, _memory_mib() // (2 * nodes))
        Path(state.conf).write_text(conf_text(state, cpus=cpus, memory_mib=memory,
                                              ctld_port=_free_port()))  # fmt: skip
        if gres:  # slurmd and slurmctld read it beside slurm.conf
            (root / "gres.conf").write_text(gres_conf_text(state))
        _daemons(state, cluster, detach=detach)
        _wait_idle(cluster)
    except (ClusterError, OSError, subprocess.SubprocessError) as exc:
        logs = cluster.log_text()
        down(root, cluster=cluster)
        raise ClusterError(
            f"the test cluster ({state.prefix}) failed to start: {exc}\n{logs}"
        ) from exc
    write_env_sh(cluster)
    return cluster


def _signal(d: Daemon, sig: int) -> bool:
    """Signal a daemon we started, only while its PID is still that process."""
    if d.started is None or _start_time(d.pid) != d.started:
        return False
    try:
        os.kill(d.pid, sig)
    except ProcessLookupError:
        return False
    return True


def running(d: Daemon) -> bool:
    """The daemon still runs: its PID is that process (same start time), not a zombie."""
    return _alive(d, None)


def _alive(d: Daemon, proc: subprocess.Popen[bytes] | None) -> bool:
    if proc is not None:
        return proc.poll() is None
    state = Path(f"/proc/{d.pid}/stat")
    try:
        fields = state.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return _start_time(d.pid) == d.started and fields[0] != "Z"


def _stop(d: Daemon, proc: subprocess.Popen[bytes] | None) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not _alive(d, proc) or not _signal(d, sig):
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive(d, proc):
            time.sleep(0.1)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _netns_pids(netns: str) -> list[int]:
    out = _run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def down(root: Path, *, cluster: Cluster | None = None) -> list[str]:
    """Remove the cluster recorded under ``root``; what could not be removed (empty: all)."""
    root = root.absolute()
    try:
        state = cluster.state if cluster is not None else State.load(root)
    except (OSError, ValueError) as exc:
        raise ClusterError(f"no cluster recorded in {root}/state.json ({exc})") from exc
    return _remove(state, cluster.procs if cluster is not None else {})


def reap() -> list[str]:
    """Remove the clusters whose owner has died (a pytest session killed before its
    cleanup): their daemons died with it, their namespaces and links did not. Clusters
    of the command line (no owner) and of live sessions are left alone."""
    reaped = []
    for path in sorted(REGISTRY.glob("hc*.json")) if REGISTRY.is_dir() else []:
        try:
            state = State.load_file(path)
        except (OSError, ValueError, TypeError):
            continue
        if state.owner is None or _start_time(state.owner[0]) == state.owner[1]:
            continue
        _remove(state, {})
        reaped.append(state.prefix)
    return reaped


def _cancel_jobs(state: State, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    env = client_env(Path(state.conf))
    ctld = next((d for d in state.daemons if d.name == "slurmctld"), None)
    if ctld is None or not _alive(ctld, procs.get("slurmctld")):
        return
    try:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True,
                       timeout=15, check=False)  # fmt: skip
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            q = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True,
                               timeout=10, check=False)  # fmt: skip
            if q.returncode != 0 or not q.stdout.strip():
                break
            time.sleep(0.5)
    except (subprocess.SubprocessError, OSError):
        pass  # a controller that does not answer is stopped below all the same


def _remove(state: State, procs: dict[str, subprocess.Popen[bytes]]) -> list[str]:
    """Stop the daemons and remove everything ``state`` records; what is left."""
    _cancel_jobs(state, procs)
    order = {"slurmctld": 1, "munged": 2}
    for d in sorted(state.daemons, key=lambda d: order.get(d.name, 0)):
        _stop(d, procs.get(d.name))
    left = []
    for node in state.nodes:  # job steps that outlived their slurmd: ours, by namespace
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = _netns_pids(node.netns)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if pids:
                time.sleep(1.0)
        if _netns_pids(node.netns):
            left.append(f"processes in {node.netns}")
    for node in state.nodes:
        for veth in node.veths:
            _run(["ip", "link", "del", veth], check=False)
        _run(["ip", "netns", "del", node.netns], check=False)
    for br in state.bridges:
        _run(["ip", "link", "del", br], check=False)
    names = set(_run(["ip", "-o", "link", "show"], check=False).split())
    left += [x for n in state.nodes for x in n.veths if f"{x}:" in names or f"{x}@" in names]
    left += [b for b in state.bridges if f"{b}:" in names]
    netns = _run(["ip", "netns", "list"], check=False).split()
    left += [n.netns for n in state.nodes if n.netns in netns]
    if not left:
        shutil.rmtree(state.root, ignore_errors=True)
        (REGISTRY / f"{state.prefix}.json").unlink(missing_ok=True)
    return left


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tests/support/cluster.py", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start a cluster and write <root>/env.sh")
    p_up.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    p_up.add_argument("--slow", action="append", default=[], metavar="NODE",
                      help="throttle this node's links (repeatable)")  # fmt: skip
    p_up.add_argument("--rate", default=DEFAULT_RATE, help="the slow node's cap (tbf rate)")
    p_up.add_argument("--gres", default="", metavar="gpu:TYPE:N",
                      help="GPUs SLURM schedules on every node (a stand-in)")  # fmt: skip
    for p in (p_up, sub.add_parser("down", help="stop and remove everything up made"),
              sub.add_parser("status", help="the nodes, as sinfo sees them")):  # fmt: skip
        p.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "up":
            cluster = up(args.root, nodes=args.nodes, slow=args.slow, rate=args.rate,
                         detach=True, gres=args.gres)  # fmt: skip
            print(f"cluster {cluster.state.prefix} up: {', '.join(cluster.nodes)} "
                  f"(slow: {', '.join(cluster.state.slow) or 'none'}); "
                  f". {cluster.root / 'env.sh'}")  # fmt: skip
        elif args.cmd == "down":
            left = down(args.root)
            if left:
                print(f"cluster down, but these are left: {', '.join(left)}", file=sys.stderr)
                return 1
            print(f"cluster in {args.root} removed")
        else:
            state = State.load(args.root.absolute())
            env = client_env(Path(state.conf))
            subprocess.run(["sinfo", "-N", "-l"], env=env, check=False)
    except ClusterError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"cluster: nothing recorded in {args.root} ({exc.strerror})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
