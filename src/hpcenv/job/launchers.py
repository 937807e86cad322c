"""The launcher at the head of a job's command, and what each node's copy needs from the
allocation.

``hpcenv sbatch PROFILE -- CMD`` starts CMD once per node. A launcher there must be told
which node it is and where the others are, or every node starts as machine 0 of 1:

- ``accelerate launch``: ``--num_machines``, ``--machine_rank``, ``--main_process_ip``,
  ``--main_process_port``, ``--num_processes`` (the job's GPUs, or its tasks on CPU
  nodes), and ``--multi_gpu`` when nothing else says how to distribute (no config file
  naming a ``distributed_type``, no ``--use_deepspeed``/``--use_fsdp``/...): without it
  accelerate runs one process per node, each its own world;
- ``deepspeed``: a hostfile of the allocation (``host slots=N``), ``--no_ssh`` with
  ``--node_rank`` (no ssh between nodes, which many clusters forbid), ``--master_addr``,
  ``--master_port``; a DeepSpeed older than 0.15 (read from the job's venv, no import) has
  neither flag, so each node runs its per-node launcher, ``python -u -m
  deepspeed.launcher.launch --world_info=... --node_rank=N``, instead of the runner;
- ``torchrun`` / ``python -m torch.distributed.run``: the rendezvous comes from the job's
  ``PET_*`` variables; ``--nproc-per-node`` (the GPUs or tasks per node) is added; on more
  than one node ``--standalone`` (one node's own rendezvous on localhost) is left out, and
  said, so the job's rendezvous holds; on one node it stays.

A wrapper CLI (knowledge/wrappers.toml: axolotl, llamafactory-cli, ``tune run``, trl,
composer) gets what its launcher needs the way the wrapper passes it on: the launcher's
options after ``--`` or anywhere in its words, or the variables it reads (``Launch.env``).

The command is read by ``hpcenv.job.command`` (``VAR=value``, ``env -u``, ``uv run --``
before the launcher are kept, and applied on the node). Options the user wrote win: only
the missing ones are added, and what was added is said in the log. ``plan`` is pure;
``main`` (``python -m hpcenv.job.launchers -- CMD``, run by srun on every node) reads the
node's rank from SLURM and ``exec``s the launcher.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from hpcenv.job import command, launch_config
from hpcenv.knowledge import wrappers
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import print_text

KINDS = command.KINDS
#: The first DeepSpeed whose runner has ``--no_ssh`` and ``--node_rank``: the 0.15.0 sdist's
#: deepspeed/launcher/runner.py adds both (0.14.4's has neither;
#: tests/integration/job/test_deepspeed_parsers.py runs the real parsers of 0.12.6 to the
#: newest). Older ones get their per-node launcher.
NO_SSH_SINCE = (0, 15, 0)
#: runner options of an old DeepSpeed its per-node launch module takes as they are.
_LAUNCH_CARRIES = ("--module", "--no_python", "--no_local_rank", "--bind_cores_to_rank")
_LAUNCH_CARRIES_VALUE = ("--bind_core_list", "--enable_each_rank_log")
#: runner options that choose nodes or GPUs an old DeepSpeed's launch module cannot take.
_RUNNER_ONLY = (
    "--hostfile", "--H", "--include", "--i", "--exclude", "--e", "--launcher",
    "--launcher_args", "--force_multi", "--autotuning", "--elastic_training", "--ssh_port",
    "--save_pid", "--min_elastic_nodes", "--max_elastic_nodes",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Allocation:
    """What a launcher on one node needs to know about the job (strings, so a script can
    render shell references such as ``$SLURM_NODEID``)."""

    nodes: int
    node_rank: str
    per_node: int  # processes per node: the GPUs the job takes there, else its tasks
    master_addr: str
    master_port: str
    hostfile: str = ""  # deepspeed: the allocation as 'host slots=N' lines
    hosts: tuple[str, ...] = ()  # the nodes, first to last (an old DeepSpeed's world info)


@dataclass(frozen=True, kw_only=True)
class Launch:
    """A command with what its launcher needs added."""

    kind: str  # one of KINDS, or "" for a command without a known launcher
    argv: tuple[str, ...]
    added: tuple[str, ...] = ()
    replaced: bool = False  # the launcher itself replaced (an old DeepSpeed's launch module)
    dropped: tuple[str, ...] = ()  # the user's options left out, each with why
    name: str = ""  # a wrapper CLI running the launcher (knowledge/wrappers.toml)
    env: tuple[tuple[str, str], ...] = ()  # variables the wrapper reads, set on the node

    def describe(self) -> str:
        if not self.kind:
            return ""
        who = f"{self.name} ({self.kind})" if self.name else self.kind
        if self.replaced:
            said = f"{who} runs on each node as {' '.join(self.added)}"
        elif self.env:
            said = f"{who} gets {' '.join(f'{k}={v}' for k, v in self.env)}"
        elif not self.added:
            said = f"{who}: every option it needs was given"
        else:
            said = f"{who} gets {' '.join(self.added)}"
        return said + "".join(f"; without {d}" for d in self.dropped)


def _missing(given: Mapping[str, str | None], wanted: Sequence[tuple[str, str]]) -> list[str]:
    words: list[str] = []
    for option, value in wanted:
        if option not in given:
            words += [option, value] if value else [option]
    return words


def version_tuple(version: str) -> tuple[int, ...]:
    """``0.14.4`` (or ``0.14.4+cu121``) as numbers; () when unknown."""
    m = re.match(r"(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def installed_version(venv: Path | None, dist: str) -> str:
    """The version of ``dist`` installed in ``venv``, from its dist-info METADATA (no
    import); "" when the venv or the distribution is not there."""
    if venv is None:
        return ""
    for meta in sorted(venv.glob(f"lib/python*/site-packages/{dist}-*.dist-info/METADATA")):
        head = meta.read_text(errors="replace")[:4096]
        m = re.search(r"^Version:\s*(\S+)", head, re.M)
        if m:
            return m.group(1)
    return ""


def command_venv(cmd: command.Command, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """The venv the command's Python really runs in: ``uv run``'s project environment
    (``--project DIR``, else the first directory from ``--directory``/the working directory
    up holding a pyproject.toml; ``$UV_PROJECT_ENVIRONMENT``, relative to the project, else
    its ``.venv``; ``--active`` keeps ``$VIRTUAL_ENV``), else ``$VIRTUAL_ENV``. What uv's
    docs say of project discovery and UV_PROJECT_ENVIRONMENT (docs.astral.sh/uv, "Project
    environments"); a workspace member's shared root .venv is not followed."""
    env = cmd.environ(environ)
    active = env.get("VIRTUAL_ENV")
    words = cmd.wrapper
    if not (words[:2] and PurePath(words[0]).name == "uv" and words[1:2] == ("run",)):
        return Path(active) if active else None
    opts = command.launcher_options(words, 2)
    if "--active" in opts and active:
        return Path(active)
    start = cwd / (opts.get("--directory") or ".")
    given = opts.get("--project")
    project = start / given if given else None
    if project is None:
        project = next(
            (d for d in (start, *start.parents) if (d / "pyproject.toml").is_file()), None
        )
    if project is None:
        return Path(active) if active else None
    return project / (env.get("UV_PROJECT_ENVIRONMENT") or ".venv")


def plan(
    cmd: command.Command,
    alloc: Allocation,
    configured: frozenset[str] = frozenset(),
    *,
    deepspeed: str = "",
) -> Launch:
    """``cmd`` with what its launcher needs from ``alloc`` (see the module docstring);
    ``configured``: options its config file already sets (they count as given);
    ``deepspeed``: the DeepSpeed version installed ("" unknown: the newest's flags)."""
    kind, start = cmd.kind, cmd.start
    argv = cmd.words
    if not kind:
        return Launch(kind="", argv=argv)
    given = {**dict.fromkeys(configured), **cmd.options()}
    if cmd.wrapped and cmd.passes != "options":
        return _through_wrapper(cmd, alloc, given)
    if kind == "accelerate":
        wanted = _accelerate_wanted(alloc, given)
    elif kind == "deepspeed":
        if "--launcher" in given or "--force_multi" in given:
            wanted = []  # the user chose how DeepSpeed reaches the nodes
        elif deepspeed and version_tuple(deepspeed) < NO_SSH_SINCE and alloc.nodes > 1:
            return _old_deepspeed(cmd, alloc, given, deepspeed)
        else:
            wanted = [
                ("--hostfile", alloc.hostfile),
                ("--no_ssh", ""),
                ("--node_rank", alloc.node_rank),
                ("--master_addr", alloc.master_addr),
                ("--master_port", alloc.master_port),
            ]
            if not alloc.hostfile:
                wanted = wanted[1:]
    else:
        wanted = [("--nproc_per_node", str(alloc.per_node))]
        if "--standalone" in given and alloc.nodes > 1:
            return _without_standalone(cmd, alloc, _missing(given, wanted))
    added = _missing(given, wanted)
    return Launch(
        kind=kind, argv=(*argv[:start], *added, *argv[start:]), added=tuple(added),
        name=cmd.wrapped,
    )  # fmt: skip


def _accelerate_wanted(alloc: Allocation, given: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """What accelerate launch needs on each node (the module docstring's list)."""
    total = alloc.nodes * alloc.per_node
    wanted = [
        ("--num_machines", str(alloc.nodes)),
        ("--machine_rank", alloc.node_rank),
        ("--main_process_ip", alloc.master_addr),
        ("--main_process_port", alloc.master_port),
        ("--num_processes", str(total)),
    ]
    if total > 1 and not any(m in given for m in command.ACCELERATE_MODES):
        wanted.append(("--multi_gpu", ""))
    return wanted


def _through_wrapper(
    cmd: command.Command, alloc: Allocation, given: Mapping[str, str | None]
) -> Launch:
    """A wrapper CLI (knowledge/wrappers.toml) given what its launcher needs: variables it
    reads (``env``; the command's own VAR=value win), or the launcher's options after
    ``--`` (``dashdash``) or anywhere (``remaining``), appended to the words."""
    row = wrappers.by_name(cmd.wrapped)
    if cmd.passes == "env":
        own_options = command.launcher_options(cmd.words, cmd.body)
        per_node = alloc.per_node  # the wrapper's own count wins (composer -n 2)
        for option in row.per_node_options:
            per_node = _count(own_options, option, per_node, who=row.program[0])
        values = {
            "nodes": str(alloc.nodes), "node_rank": alloc.node_rank,
            "per_node": str(per_node), "world": str(alloc.nodes * per_node),
            "master_addr": alloc.master_addr, "master_port": alloc.master_port,
        }  # fmt: skip
        own = {name for name, _ in cmd.env}
        env = tuple(
            (name, template.format(**values)) for name, template in row.env if name not in own
        )
        return Launch(kind=cmd.kind, argv=cmd.words, name=row.name, env=env)
    if cmd.kind == "accelerate":
        wanted = _accelerate_wanted(alloc, given)
    else:  # torchrun: the rendezvous from the job's PET_* variables
        wanted = [("--nproc_per_node", str(alloc.per_node))]
    added = _missing(given, wanted)
    dashdash = cmd.passes == "dashdash" and cmd.words[cmd.start - 1 : cmd.start] != ("--",)
    users = cmd.words
    dropped: tuple[str, ...] = ()
    if cmd.kind == "torchrun" and "--standalone" in given and alloc.nodes > 1:
        users = (*users[: cmd.start], *_no_standalone(users[cmd.start :]))
        dropped = (_standalone_dropped(alloc),)
    words = (*users, *(["--"] if dashdash and added else []), *added)
    return Launch(kind=cmd.kind, argv=words, added=tuple(added), name=row.name, dropped=dropped)


def _without_standalone(cmd: command.Command, alloc: Allocation, added: list[str]) -> Launch:
    """torchrun's ``--standalone`` on several nodes: its ``run`` replaces the rendezvous
    with ``localhost:0`` and a random id (torch/distributed/run.py, ``if args.standalone``),
    so each node would wait alone for the others until ``RendezvousTimeoutError``. The word
    is left out; the job's ``PET_*`` rendezvous (c10d on the first node) takes its place."""
    _, script = command.split_options(cmd.words, cmd.start)
    options = _no_standalone(cmd.words[cmd.start : script])
    return Launch(
        kind="torchrun",
        argv=(*cmd.words[: cmd.start], *added, *options, *cmd.words[script:]),
        added=tuple(added),
        dropped=(_standalone_dropped(alloc),),
        name=cmd.wrapped,
    )


def _no_standalone(options: Sequence[str]) -> tuple[str, ...]:
    """torchrun's options without ``--standalone`` (a flag: no value follows it)."""
    return tuple(w for w in options if w.partition("=")[0] not in ("--standalone", "-standalone"))


def _standalone_dropped(alloc: Allocation) -> str:
    return (
        f"--standalone (on {alloc.nodes} nodes each node would rendezvous alone on "
        "localhost; the job's c10d rendezvous on the first node replaces it)"
    )


def _count(
    given: Mapping[str, str | None], option: str, default: int, *, who: str = "deepspeed"
) -> int:
    """A count the user gave ``who`` (``default`` when absent); BadInput (exit 2) naming
    it when it is not a whole number above 0 (DeepSpeed's ``type=int`` would traceback)."""
    value = given.get(option)
    if not value:
        return default
    if not (value.isascii() and value.isdigit() and len(value) <= 9 and int(value) > 0):
        shown = option[1:] if len(option) == 3 else option  # --n is composer's -n
        raise BadInput(f"{who} {shown} {value[:40]!r}: not a count; give a whole number above 0")
    return int(value)


def world_info(hosts: Sequence[str], slots: int) -> str:
    """DeepSpeed's ``--world_info``: urlsafe base64 of ``{host: [gpu ids]}`` (its runner's
    ``encode_world_info``)."""
    info = {host: list(range(slots)) for host in hosts}
    return base64.urlsafe_b64encode(json.dumps(info).encode()).decode()


def _old_deepspeed(
    cmd: command.Command, alloc: Allocation, given: Mapping[str, str | None], version: str
) -> Launch:
    """DeepSpeed before ``--no_ssh``: each node runs ``python -u -m
    deepspeed.launcher.launch`` itself (what the runner runs on one node), told the world
    of the allocation and its node rank; the runner's ssh/pdsh never starts."""
    refused = [o for o in _RUNNER_ONLY if o in given]
    if refused:
        raise BadInput(
            f"deepspeed {version} {refused[0]}: before 0.15 DeepSpeed has no --no_ssh, so "
            "hpcenv starts its per-node launcher (deepspeed.launcher.launch), which takes no "
            f"{refused[0]}; leave it out (the allocation chooses the nodes) or use "
            "deepspeed>=0.15"
        )
    slots = _count(given, "--num_gpus", alloc.per_node)
    hosts = alloc.hosts[: _count(given, "--num_nodes", alloc.nodes)]
    _, script = command.split_options(cmd.words, cmd.start)
    head = cmd.words[cmd.start - 3] if cmd.words[cmd.start - 2 : cmd.start - 1] == ("-m",) else ""
    carried = [o for o in _LAUNCH_CARRIES if o in given]
    carried += [f"{o}={given[o]}" for o in _LAUNCH_CARRIES_VALUE if given.get(o)]
    added = (
        head or "python", "-u", "-m", "deepspeed.launcher.launch",
        f"--world_info={world_info(hosts or ['<host>'], slots)}",
        f"--node_rank={alloc.node_rank}",
        f"--master_addr={given.get('--master_addr') or alloc.master_addr}",
        f"--master_port={given.get('--master_port') or alloc.master_port}",
        *carried,
    )  # fmt: skip
    launcher_at = cmd.program + len(cmd.wrapper)
    return Launch(
        kind="deepspeed",
        argv=(*cmd.words[:launcher_at], *added, *cmd.words[script:]),
        added=added,
        replaced=True,
    )


def check_fits(cmd: command.Command, launch: str, nodes: int = 1) -> None:
    """A launcher starts its own processes: once per node, never once per task; a wrapper
    told to run one plain process cannot span nodes; a launcher hidden behind ``uv run``'s
    options (no ``--``) cannot be given the node's rank."""
    kind = cmd.kind
    if cmd.hidden and nodes > 1:
        words, name = cmd.words, cmd.words[cmd.hidden]
        at = max(
            (i for i in range(cmd.program + 1) if PurePath(words[i]).name in ("env", "uv")),
            default=cmd.program,
        )
        said = f"{' '.join(words[at : cmd.hidden])[:80]} {name}: "
        if PurePath(words[at]).name == "uv":
            raise BadInput(
                f"{said}which word starts the command among uv's options is uv's to say, so "
                f"a {name} there on {nodes} nodes would not be given its node rank; end uv's "
                "options with '--' before the command: uv run [OPTIONS] -- CMD"
            )
        raise BadInput(
            f"{said}hpcenv reads before the command only NAME=value (a shell name: letters, "
            f"digits, _), env -u NAME and uv run [OPTIONS] --, so a {name} behind other words "
            f"on {nodes} nodes would not be given its node rank; write the prefix so"
        )
    if cmd.wrapped and not kind and nodes > 1:
        raise BadInput(
            f"{cmd.wrapped} without a launcher (--launcher python) runs one process, so on "
            f"{nodes} nodes each would train alone; use --launcher accelerate or torchrun"
        )
    who = cmd.wrapped or kind
    if kind and launch == "task":
        raise BadInput(
            f"--per-task with {who}: it starts its own processes on each node, so one "
            f"{who} per task would start them again; leave out --per-task"
        )
    if kind and launch == "ray":
        raise BadInput(f"--ray with {who}: run {who} without --ray (Ray starts its own workers)")


def from_environment(env: Mapping[str, str]) -> Allocation:
    """The allocation as the job script exported it on this node (``HPCENV_LAUNCH_*``)."""
    try:
        return Allocation(
            nodes=int(env["HPCENV_LAUNCH_NODES"]),
            node_rank=env.get("SLURM_NODEID", "0"),
            per_node=int(env["HPCENV_LAUNCH_PER_NODE"]),
            master_addr=env["MASTER_ADDR"],
            master_port=env["MASTER_PORT"],
            hostfile=env.get("HPCENV_LAUNCH_HOSTFILE", ""),
            hosts=_hosts(env.get("HPCENV_LAUNCH_HOSTFILE", "")),
        )
    except (KeyError, ValueError) as exc:
        raise BadInput(
            f"python -m hpcenv.job.launchers runs inside a job rendered by 'hpcenv sbatch' "
            f"(HPCENV_LAUNCH_* unset or wrong: {exc})"
        ) from exc


def _hosts(hostfile: str) -> tuple[str, ...]:
    """The hosts of the job's hostfile (``host slots=N`` lines), in order."""
    if not hostfile or not os.path.isfile(hostfile):
        return ()
    with open(hostfile, encoding="utf-8", errors="replace") as f:
        return tuple(line.split()[0] for line in f.read(1 << 20).splitlines() if line.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """On one node: add what the launcher needs, say it, and become the launcher."""
    words = list(sys.argv[1:] if argv is None else argv)
    words = words[1:] if words[:1] == ["--"] else words
    try:
        cmd = command.read(words)
        cfg = launch_config.read(cmd, Path.cwd(), os.environ)
        venv = command_venv(cmd, os.environ, Path.cwd()) if cmd.kind == "deepspeed" else None
        version = installed_version(venv, "deepspeed")
        alloc = from_environment(os.environ)
        given = launch_config.configured(cfg, alloc.nodes)
        launch = plan(cmd, alloc, given, deepspeed=version)
    except BadInput as exc:
        print_text(f"hpcenv: {exc}\n", err=True)
        return 2
    if launch.added or launch.dropped or launch.env:
        node = os.environ.get("SLURM_NODEID", "0")
        print_text(f"hpcenv: node {node}: {launch.describe()}\n", err=True)
    env = cmd.environ(os.environ)  # VAR=value and env -u before the launcher, applied
    env.update(launch.env)  # what a wrapper reads (the command's own VAR=value kept)
    if launch.kind not in (
        "torchrun",
        "composer",
    ):  # the job's PET_* rendezvous is torchrun's: accelerate and
        for name in [n for n in env if n.startswith("PET_")]:  # DeepSpeed run torch's launcher
            del env[name]  # inside and would take it over their own (a second store, one port)
    runs = launch.argv[cmd.program :]  # never a VAR=value word as the program
    os.execvpe(runs[0], list(runs), env)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
