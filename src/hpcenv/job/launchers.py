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
  ``--node_rank`` (no ssh between nodes, which many clusters forbid; DeepSpeed >= 0.15),
  ``--master_addr``, ``--master_port``;
- ``torchrun`` / ``python -m torch.distributed.run``: the rendezvous comes from the job's
  ``PET_*`` variables; ``--nproc-per-node`` (the GPUs or tasks per node) is added.

Options the user wrote win: only the missing ones are added, and what was added is said in
the log. ``plan`` is pure; ``main`` (``python -m hpcenv.job.launchers -- CMD``, run by
srun on every node) reads the node's rank from SLURM and ``exec``s the launcher.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from hpcenv.job import launch_config
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import print_text

KINDS = ("accelerate", "deepspeed", "torchrun")
#: accelerate options that choose how to distribute (any of them: no --multi_gpu added).
_ACCELERATE_MODES = (
    "--multi_gpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--tpu", "--cpu",
    "--use_xpu", "--config_file",
)  # fmt: skip


#: Launcher options that take no value (so the word after them is the script).
_FLAGS = frozenset(
    (*_ACCELERATE_MODES[:-1], "--no_ssh", "--no_local_rank", "--force_multi", "--same_network",
     "--standalone", "--debug", "--quiet", "--no_ssh_check", "--bind_cores_to_rank")
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


@dataclass(frozen=True, kw_only=True)
class Launch:
    """A command with what its launcher needs added."""

    kind: str  # one of KINDS, or "" for a command without a known launcher
    argv: tuple[str, ...]
    added: tuple[str, ...] = ()

    def describe(self) -> str:
        if not self.kind:
            return ""
        if not self.added:
            return f"{self.kind}: every option it needs was given"
        return f"{self.kind} gets {' '.join(self.added)}"


def kind_of(argv: Sequence[str]) -> tuple[str, int]:
    """The launcher at the head of ``argv`` and where its own options start."""
    argv = list(argv)
    if not argv:
        return "", 0
    head = PurePath(argv[0]).name
    if head == "accelerate" and argv[1:2] == ["launch"]:
        return "accelerate", 2
    if head in ("deepspeed", "torchrun"):
        return head, 1
    if head.startswith("python") and argv[1:3] == ["-m", "torch.distributed.run"]:
        return "torchrun", 3
    if head.startswith("python") and argv[1:3] == ["-m", "accelerate.commands.launch"]:
        return "accelerate", 3
    return "", 0


def _options(argv: Sequence[str], start: int) -> dict[str, str | None]:
    """The launcher's own options (before the script: the first word ending in .py, or
    what follows -m/--module/--no_python), spelled with underscores: value or None."""
    out: dict[str, str | None] = {}
    last: str | None = None  # the option still waiting for its value
    for word in argv[start:]:
        if word.endswith(".py"):
            break
        if not word.startswith("-"):
            if last is None:
                break  # the script (or program) itself
            out[last], last = word, None
            continue
        name, eq, value = word.partition("=")
        key = "--" + name.lstrip("-").replace("-", "_")
        out[key] = value if eq else None
        last = None if eq or key in _FLAGS else key
        if key in ("--module", "--no_python", "--m"):
            break
    return out


def _missing(given: Mapping[str, str | None], wanted: Sequence[tuple[str, str]]) -> list[str]:
    words: list[str] = []
    for option, value in wanted:
        if option not in given:
            words += [option, value] if value else [option]
    return words


def plan(
    argv: Sequence[str], alloc: Allocation, configured: frozenset[str] = frozenset()
) -> Launch:
    """``argv`` with what its launcher needs from ``alloc`` (see the module docstring);
    ``configured``: options its config file already sets (they count as given)."""
    kind, start = kind_of(argv)
    if not kind:
        return Launch(kind="", argv=tuple(argv))
    given = {**dict.fromkeys(configured), **_options(argv, start)}
    total = alloc.nodes * alloc.per_node
    if kind == "accelerate":
        wanted = [
            ("--num_machines", str(alloc.nodes)),
            ("--machine_rank", alloc.node_rank),
            ("--main_process_ip", alloc.master_addr),
            ("--main_process_port", alloc.master_port),
            ("--num_processes", str(total)),
        ]
        if total > 1 and not any(m in given for m in _ACCELERATE_MODES):
            wanted.append(("--multi_gpu", ""))
    elif kind == "deepspeed":
        wanted = [
            ("--hostfile", alloc.hostfile),
            ("--no_ssh", ""),
            ("--node_rank", alloc.node_rank),
            ("--master_addr", alloc.master_addr),
            ("--master_port", alloc.master_port),
        ]
        if not alloc.hostfile:
            wanted = wanted[1:]
        if "--launcher" in given or "--force_multi" in given:
            wanted = []  # the user chose how DeepSpeed reaches the nodes
    else:
        wanted = [("--nproc_per_node", str(alloc.per_node))]
        if "--nproc_per_node" in given or "--nproc-per-node" in given:
            wanted = []
    added = _missing(given, wanted)
    return Launch(kind=kind, argv=(*argv[:start], *added, *argv[start:]), added=tuple(added))


def check_fits(argv: Sequence[str], launch: str) -> None:
    """A launcher starts its own processes: once per node, never once per task."""
    kind, _ = kind_of(argv)
    if kind and launch == "task":
        raise BadInput(
            f"--per-task with {kind}: it starts its own processes on each node, so one "
            f"{kind} per task would start them again; leave out --per-task"
        )
    if kind and launch == "ray":
        raise BadInput(f"--ray with {kind}: run {kind} without --ray (Ray starts its own workers)")


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
        )
    except (KeyError, ValueError) as exc:
        raise BadInput(
            f"python -m hpcenv.job.launchers runs inside a job rendered by 'hpcenv sbatch' "
            f"(HPCENV_LAUNCH_* unset or wrong: {exc})"
        ) from exc


def main(argv: Sequence[str] | None = None) -> int:
    """On one node: add what the launcher needs, say it, and become the launcher."""
    words = list(sys.argv[1:] if argv is None else argv)
    words = words[1:] if words[:1] == ["--"] else words
    try:
        kind, start = kind_of(words)
        cfg = launch_config.read(words, kind, start, Path.cwd(), os.environ)
        launch = plan(words, from_environment(os.environ), launch_config.configured(cfg))
    except BadInput as exc:
        print_text(f"hpcenv: {exc}\n", err=True)
        return 2
    if launch.added:
        node = os.environ.get("SLURM_NODEID", "0")
        print_text(f"hpcenv: node {node}: {launch.describe()}\n", err=True)
    env = dict(os.environ)
    if launch.kind != "torchrun":  # the job's PET_* rendezvous is torchrun's: accelerate and
        for name in [n for n in env if n.startswith("PET_")]:  # DeepSpeed run torch's launcher
            del env[name]  # inside and would take it over their own (a second store, one port)
    os.execvpe(launch.argv[0], list(launch.argv), env)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
