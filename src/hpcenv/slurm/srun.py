"""The srun launcher: starts a probe's ranks across the allocation with one ``srun``.

Probes inside ``sbatch`` must run the way the job will: one rank per allocated GPU
(per task on a CPU allocation), started by ``srun`` across all nodes, with
MASTER_ADDR on the first host of the job's node list. ``srun --kill-on-bad-exit``
ends the whole step when a rank dies, and ``--wait`` bounds how long the other
ranks may outlive the first one to exit, so a broken node shows up as a named
failure in minutes instead of a job that hangs until its walltime.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcenv.kit.ports import free_port
from hpcenv.models.facts import SlurmFacts
from hpcenv.runner import probes as runner
from hpcenv.slurm.allocation import Layout, from_env, hostnames, layout
from hpcenv.tools import command
from hpcenv.utils.errors import BadInput

#: Variables a torchrun-style launcher sets; under srun the probe maps SLURM_* instead,
#: so stale values inherited from the job script must not leak into the ranks.
RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK")

#: Seconds srun lets the other ranks run after the first one exits (``srun --wait``).
DEFAULT_WAIT_S = 60
#: More tasks than a job step has: a task range srun never writes (see rank_failures).
MAX_TASKS = 1 << 20


def srun_argv(
    lay: Layout,
    argv: Sequence[str],
    *,
    ranks: int | None = None,
    wait_s: int = DEFAULT_WAIT_S,
    job_name: str | None = None,
    srun: str = "srun",
    pinned: bool = False,
) -> list[str]:
    """The srun command line that starts ``argv`` once per rank, all nodes at once.

    GPUs are not bound per task: every rank sees the node's GPUs and picks
    ``cuda:LOCAL_RANK`` (what torchrun does); binding would renumber them to 0.
    ``pinned``: the step runs on the layout's hosts exactly (``--nodelist``), for a
    step on some nodes of the allocation (the bad-node finder's pairs).
    """
    n = lay.ranks if ranks is None else ranks
    if n < 1 or n > lay.ranks:
        raise BadInput(f"{n} ranks asked for, the allocation has room for {lay.ranks}")
    nodes = min(len(lay.hosts), -(-n // lay.per_node))
    out = [
        srun,
        f"--ntasks={n}",
        f"--nodes={nodes}",
        f"--ntasks-per-node={min(n, lay.per_node)}",
        "--kill-on-bad-exit=1",
        f"--wait={wait_s}",
        "--export=ALL",
    ]
    if pinned:
        out.append(f"--nodelist={','.join(lay.hosts[:nodes])}")
    if job_name:
        out.append(f"--job-name={job_name}")
    return [*out, "--", *argv]


_TASK_EXIT = re.compile(
    r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<why>.+?)\s*$", re.M
)


def failed_tasks(srun_stderr: str) -> dict[int, str]:
    """Rank -> what srun said about it (``host: Exited with exit code 1``, ``Killed``).

    srun reports ``srun: error: node7: task 3: Exited with exit code 1`` (or
    ``tasks 0-3``); the first rank that failed is what the user needs to see,
    the others were usually killed by ``--kill-on-bad-exit`` afterwards.
    """
    out: dict[int, str] = {}
    for m in _TASK_EXIT.finditer(srun_stderr):
        for part in m.group("tasks").split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit():
                continue
            if int(hi or lo) - int(lo) >= MAX_TASKS:  # not a line srun writes
                continue
            for task in range(int(lo), int(hi or lo) + 1):
                out.setdefault(task, f"{m.group('host')}: {m.group('why')}")
    return out


_NODE_FAIL = re.compile(
    r"srun: error: Task launch for \S+ failed on node (?P<host>[^:\s]+): (?P<why>.+?)\s*$", re.M
)


#: srun names a task's deadly signal as strsignal(3) does: "Killed", "Segmentation fault".
_SIGNAL_NAMED = {text: int(s) for s in signal.Signals if (text := signal.strsignal(s))}


def signal_of(why: str) -> int | None:
    """The signal in what srun said about a task (``node3: Killed`` -> 9), else None."""
    return _SIGNAL_NAMED.get(why.rsplit(": ", 1)[-1].strip())


def failed_nodes(srun_stderr: str) -> dict[str, str]:
    """Host -> why srun could not start tasks there (``Task launch ... failed on node``)."""
    return {m.group("host"): m.group("why") for m in _NODE_FAIL.finditer(srun_stderr)}


class SrunLauncher:
    """``hpcenv.runner.probes.Launcher`` inside an allocation: one ``srun`` for all ranks.

    The environment goes to the ranks through ``--export=ALL`` from the srun
    process's own environment (never a shell string); RANK and friends are
    removed so each probe maps SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID itself.
    """

    def __init__(
        self,
        alloc: SlurmFacts,
        *,
        hosts: Sequence[str] | None = None,
        wait_s: int = DEFAULT_WAIT_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.alloc = alloc
        env_now = os.environ if env is None else env
        if hosts is None:
            hosts = hostnames(alloc.nodelist, env=env_now) if alloc.nodelist else alloc.hosts
        self.layout = layout(alloc, hosts)
        self.wait_s = wait_s
        self.srun = shutil.which("srun", path=env_now.get("PATH")) or "srun"
        self.master_addr = self.layout.hosts[0]
        self.pinned = False

    def on(self, hosts: Sequence[str], *, per_node: int | None = None) -> SrunLauncher:
        """A launcher for steps on ``hosts`` of this allocation only (``--nodelist``),
        ``per_node`` ranks on each (at most what the allocation has); this one is unchanged.
        """
        unknown = [h for h in hosts if h not in self.layout.hosts]
        if unknown or not hosts:
            raise BadInput(
                f"hosts {', '.join(unknown) or '(none)'} are not in this allocation "
                f"({', '.join(self.layout.hosts)})"
            )
        out = copy.copy(self)
        most = self.layout.per_node
        out.layout = Layout(
            hosts=tuple(hosts), per_node=min(per_node or most, most), gpus=self.layout.gpus
        )
        out.master_addr = out.layout.hosts[0]
        out.pinned = True
        return out

    @property
    def nodes(self) -> int:
        return len(self.layout.hosts)

    def default_ranks(self) -> int:
        return self.layout.ranks

    def hosts_for(self, ranks: int) -> list[str]:
        """The host each rank runs on (srun's block distribution)."""
        return [self.layout.host_of(k) for k in range(ranks)]

    def argv_for(self, argv: Sequence[str], ranks: int) -> list[str]:
        return srun_argv(
            self.layout, argv, ranks=ranks, wait_s=self.wait_s, srun=self.srun, pinned=self.pinned
        )

    def env_for(self, env: Mapping[str, str]) -> dict[str, str]:
        """The ranks' environment: no torchrun rank variables, MASTER_ADDR on the first
        host, and the runner's fresh MASTER_PORT (one found here when there is none).
        The launcher itself does not change: one launcher starts many probes."""
        out = {k: v for k, v in env.items() if k not in RANK_VARS}
        out["MASTER_ADDR"] = self.master_addr
        out["MASTER_PORT"] = env.get("MASTER_PORT") or str(free_port())
        return out

    def output_args(self, env: Mapping[str, str]) -> list[str]:
        """Rank k's stdout/stderr into the runner's files (``<probe>.rank<k>.stderr``)."""
        result_dir, name = env.get("HPCENV_RESULT_DIR"), env.get("HPCENV_PROBE_NAME")
        if not (result_dir and name):
            return []
        base = str(Path(result_dir) / name).replace("%", "%%")  # srun expands %t, %j...
        return [f"--output={base}.rank%t.stdout", f"--error={base}.rank%t.stderr"]

    def srun_log(self, env: Mapping[str, str]) -> Path | None:
        """Where srun's own messages go (``task 3: Exited with exit code 1``)."""
        result_dir, name = env.get("HPCENV_RESULT_DIR"), env.get("HPCENV_PROBE_NAME")
        return Path(result_dir) / f"{name}.srun.stderr" if result_dir and name else None

    def failed(self, env: Mapping[str, str]) -> dict[int, str]:
        """Rank -> what srun said about it, after the step ended: per task
        (``failed_tasks``), and for every rank of a node where launching failed."""
        log = self.srun_log(env)
        try:
            text = log.read_text(errors="replace") if log else ""
        except OSError:
            return {}
        out = failed_tasks(text)
        for host, why in failed_nodes(text).items():
            for k in range(self.layout.ranks):
                if self.layout.host_of(k) == host:
                    out.setdefault(k, f"{host}: task launch failed: {why}")
        return out

    def rank_exit_codes(
        self, env: Mapping[str, str], ranks: int, codes: Sequence[int | None]
    ) -> list[int | None]:
        """Per-rank exit codes from srun's one: the rank that exited non-zero gets its
        own code, a rank that died of a signal ``-signal`` (as ``subprocess`` says it);
        ranks srun killed because of it get ``None`` ("stopped"), so the report blames
        the rank that failed, not the ones taken down with it.

        srun reports the first failure first: a rank SIGKILLed from outside (the OOM
        killer, a node going down) is the cause even though "Killed" is also what the
        ranks stopped after it say; SIGKILL/SIGTERM after the first are collateral.
        """
        srun_code = codes[0] if codes else None
        if srun_code is None or srun_code == 0:
            return [srun_code] * ranks
        said = self.failed(env)
        if not said:
            return [srun_code] * ranks
        first = next(iter(said))
        out: list[int | None] = []
        for k in range(ranks):
            why = said.get(k)
            m = re.search(r"Exited with exit code (\d+)", why or "")
            sig = signal_of(why) if why else None
            if why is None:
                out.append(0)
            elif m:
                out.append(int(m.group(1)))
            elif sig is not None and k == first:
                out.append(-sig)
            elif sig in (signal.SIGKILL, signal.SIGTERM) or "CANCELLED" in why:
                out.append(None)
            elif sig is not None:  # Segmentation fault, Aborted...: a failure of its own
                out.append(-sig)
            else:
                out.append(srun_code)
        return out

    def wants_ray_cluster(self, env: Mapping[str, str]) -> bool:
        """The ray probe gets a Ray cluster over the allocation when it spans several
        nodes, or when asked (``HPCENV_RAY_ON_SLURM=1``)."""
        if env.get("HPCENV_PROBE_NAME") != "ray":
            return False
        return len(self.layout.hosts) > 1 or env.get("HPCENV_RAY_ON_SLURM") == "1"

    def start(
        self, argv: Sequence[str], env: Mapping[str, str], ranks: int
    ) -> list[subprocess.Popen[Any]]:
        """Start all ranks with one srun; its exit status is the job step's."""
        if self.wants_ray_cluster(env):
            return [self._start_with_ray(argv, env)]
        srun_argv_ = self.argv_for(argv, ranks)
        srun_argv_[1:1] = self.output_args(env)
        log = self.srun_log(env)
        out = log.with_suffix(".stdout") if log else None
        return [command.spawn(srun_argv_, env=self.env_for(env), stdout=out, stderr=log)]

    def _start_with_ray(self, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[Any]:
        """The ray probe, run by ``hpcenv.slurm.ray_cluster`` against a cluster over all hosts."""
        result_dir, name = Path(env["HPCENV_RESULT_DIR"]), env["HPCENV_PROBE_NAME"]
        # -I: hpcenv's own python ignores the probe's PYTHONPATH (the kit alone, for the
        # target environment), which the wrapper passes on to the probe unchanged
        wrapper = [
            sys.executable, "-I", "-m", "hpcenv.slurm.ray_cluster",
            "--hosts", ",".join(self.layout.hosts), "--python", argv[0],
            "--log-dir", str(result_dir),
            "--stdout", str(result_dir / f"{name}.rank0.stdout"),
            "--stderr", str(result_dir / f"{name}.rank0.stderr"),
            "--", *argv,
        ]  # fmt: skip
        log = self.srun_log(env)
        out = log.with_suffix(".stdout") if log else None
        return command.spawn(wrapper, env=self.env_for(env), stdout=out, stderr=log)


def launcher_for(env: Mapping[str, str] | None = None) -> SrunLauncher | None:
    """The srun launcher when this process runs inside an allocation with srun on PATH
    (the runner falls back to its local launcher on ``None``)."""
    env_now = os.environ if env is None else env
    alloc = from_env(env_now)
    if alloc is None or shutil.which("srun", path=env_now.get("PATH")) is None:
        return None
    return SrunLauncher(alloc, env=env_now)


def launcher_here(env: Mapping[str, str] | None = None) -> runner.Launcher:
    """srun over the allocation inside a SLURM job (with srun on PATH), else local ranks."""
    return launcher_for(env) or runner.LocalLauncher()
