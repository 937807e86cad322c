"""A JAX job's command (``hpcenv sbatch PROFILE -- python train.py``): what
``jax.distributed.initialize()`` will read of SLURM, said in the job's header and log, and
whether the job's task layout lets it drive every GPU, decided before the queue.

``jax.distributed.initialize()`` with no arguments finds SLURM by itself
(``knowledge/jax_slurm.toml``, read from the jax wheels): the coordinator on the step's first
node at port ``61440 + SLURM_JOB_ID % 4096``, ``SLURM_NTASKS`` processes, ``SLURM_PROCID``
its rank, and ``local_device_ids = [SLURM_LOCALID]``: the i-th task of a node drives the
i-th GPU. So on G GPUs per node a job runs either

- one task per GPU (``--per-task``, G tasks per node, every task seeing the node's GPUs):
  each drives its own; or
- one task per node (the default: the command once per node): SLURM's local id 0 would
  give the process GPU 0 alone, so the job sets ``JAX_LOCAL_DEVICE_IDS=0,...,G-1`` on the
  nodes (read by jax 0.4.32 and later, before SLURM), and the process drives all G.

Anything else is refused (``BadInput``, exit 2) with the numbers and the fix: more tasks
than GPUs name GPUs that are not there, fewer leave GPUs idle, and SLURM binding each task
to its own GPU (``--gpus-per-task``) leaves task i asking for GPU i among one.

What marks a JAX job, from artifacts, never by running anything: the script the command
runs (read as data, bounded) imports jax (or flax, equinox, optax) or calls
``jax.distributed.initialize``; the job's venv has jax (its dist-info's METADATA: the
version). Only the script read says the program is JAX's, so only then is a layout refused;
jax in the venv alone (``python -m pkg``, a shell script, a script reaching jax through
its own modules) is said as a condition, and a bad layout is a warning. A call passing
its own ``coordinator_address``/``num_processes``/``process_id``/``local_device_ids`` (or
``cluster_detection_method="deactivate"``) is said to bypass SLURM for those. Nothing is
added to the command: what the job gives JAX is one variable, and only where the user gave
none.

``read`` reads; ``decide`` is pure; ``Verdict`` holds the words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcenv.job import command, launch_config, launchers
from hpcenv.knowledge import jax_slurm
from hpcenv.utils.errors import BadInput

#: How far after ``initialize(`` the call's arguments are read (a call is a line or two).
MAX_CALL = 2000
_CALL = re.compile(r"(?<![\w.])(?:jax\.distributed|distributed)\.initialize\s*\(")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_FROM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+jax\.distributed[ \t]+import[ \t]+[^\n]*\binitialize\b", re.M
)
_BARE_CALL = re.compile(r"(?<![.\w])initialize\s*\(")


@dataclass(frozen=True, kw_only=True)
class Call:
    """The script's ``jax.distributed.initialize(...)``, read as text."""

    where: str  # "train.py:12"
    given: tuple[str, ...] = ()  # the arguments it passes (positional ones by their name)
    deactivated: bool = False  # cluster_detection_method="deactivate"
    unread: bool = False  # *args/**kwargs: what it passes cannot be read


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What says the job is JAX's."""

    script: str = ""  # the file python runs ("" none)
    imports: tuple[str, ...] = ()  # its top-level imports that need jax
    call: Call | None = None
    version: str = ""  # jax in the venv (dist-info), "" when not there or not read
    venv: str = ""
    given_env: tuple[str, ...] = ()  # JAX_* variables the job already has (the user's)


@dataclass(frozen=True, kw_only=True)
class Layout:
    """The command's step: processes per node, GPUs per node, how each task sees GPUs."""

    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    binds: tuple[str, ...] = ()  # sbatch options binding each task to its own GPU


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The words for the job's header, log and notes, and what the nodes get."""

    says: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()


def read(
    cmd: command.Command, venv: Path | None, cwd: Path, environ: Mapping[str, str]
) -> Evidence | None:
    """The evidence of a JAX job: the script python runs (read as data) and jax in the venv
    the command runs in; None for a command run by a launcher, a wrapper or the user's own
    srun/mpirun (their world is theirs), or where nothing says JAX."""
    if cmd.kind or cmd.wrapped or cmd.spreader:
        return None
    k = jax_slurm.get()
    env = cmd.environ(environ)
    where = launchers.command_venv(cmd, {**env, "VIRTUAL_ENV": str(venv)} if venv else env, cwd)
    version = launchers.installed_version(where, "jax")
    text = launch_config.script_text(cwd / cmd.script) if cmd.script else ""
    imports = tuple(sorted(launch_config.top_imports(text) & set(k.imports)))
    call = find_call(text, _CONTROL.sub("?", cmd.script), k) if text else None
    if not (version or imports or call):
        return None
    given = tuple(sorted(n for n in (v for _, v in k.argument_env) if env.get(n)))
    return Evidence(
        script=_CONTROL.sub("?", cmd.script), imports=imports, call=call, version=version,
        venv=_CONTROL.sub("?", str(where)) if version else "", given_env=given,
    )  # fmt: skip


def find_call(text: str, script: str, k: jax_slurm.JaxSlurm) -> Call | None:
    """The first ``jax.distributed.initialize(`` (or ``distributed.initialize(``, or a bare
    ``initialize(`` imported from jax.distributed) outside a comment, and what it passes."""
    pattern = _CALL
    if _FROM_IMPORT.search(text):
        pattern = re.compile(f"{_CALL.pattern}|{_BARE_CALL.pattern}")
    for m in pattern.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "#" in text[line_start : m.start()]:
            continue
        line = text.count("\n", 0, m.start()) + 1
        words = _arguments(text[m.end() : m.end() + MAX_CALL])
        names = (*k.arguments, "cluster_detection_method")
        given: list[str] = []
        deactivated = unread = False
        for i, word in enumerate(words):
            if word.startswith("*"):
                unread = True
                continue
            name, eq, value = word.partition("=")
            if eq and re.fullmatch(r"\w+", name.strip()):
                name = name.strip()
            elif i < len(names):
                name, value = names[i], word
            else:
                continue
            if name == "cluster_detection_method":
                deactivated = value.strip().strip("'\"") == k.deactivate
            elif name in names and value.strip() != "None":
                given.append(name)
        return Call(
            where=f"{script}:{line}", given=tuple(given), deactivated=deactivated, unread=unread
        )
    return None


def _arguments(text: str) -> list[str]:
    """The call's arguments up to its closing parenthesis, split at its own commas."""
    words, depth, word, quote = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            words.append(word.strip())
            word = ""
            continue
        word += ch
    words.append(word.strip())
    return [w for w in words if w]


def _signal(e: Evidence) -> str:
    """Why the job is JAX's, in words."""
    venv = f"jax {e.version} in {e.venv}" if e.version else "no jax found in the venv here"
    if e.call is not None:
        return f"{e.call.where} calls jax.distributed.initialize() ({venv})"
    if e.imports:
        return f"{e.script} imports {', '.join(e.imports)} ({venv})"
    return f"jax {e.version} is in the job's venv {e.venv}"


def _reads(e: Evidence, k: jax_slurm.JaxSlurm) -> str:
    """What initialize() takes from SLURM, argument by argument, and what the call gives."""
    given = set(e.call.given if e.call else ())
    given |= {arg for arg, var in k.argument_env if var in e.given_env}
    parts = []
    for arg in k.arguments:
        if arg in given:
            continue
        how = " and ".join(f"{v.name} ({v.how})" for v in k.variables if v.fills == arg)
        parts.append(f"{arg} from {how}")
    if not parts:
        return (
            "the job gives jax.distributed.initialize() every value itself "
            f"({', '.join(k.arguments)}): SLURM detection is bypassed; hpcenv adds nothing"
        )
    said = f"jax.distributed.initialize() reads SLURM itself ({k.present} set): "
    said += ", ".join(parts)
    if given:
        said += f"; the job gives {', '.join(a for a in k.arguments if a in given)} itself: "
        said += "SLURM detection is bypassed for " + ("them" if len(given) > 1 else "it")
    return said + "; hpcenv adds nothing to the command"


def decide(e: Evidence, layout: Layout, k: jax_slurm.JaxSlurm | None = None) -> Verdict:
    """What the job says of JAX, and the variable it sets; ``BadInput`` (exit 2) for a
    layout initialize() cannot drive every GPU with, where the script says JAX."""
    k = k or jax_slurm.get()
    signal = _signal(e)
    call = e.call
    if call is not None and call.deactivated:
        return Verdict(
            says=(
                f"{signal}: cluster_detection_method='deactivate' bypasses SLURM detection; "
                "the script gives every value itself and hpcenv adds nothing",
            )
        )
    if call is not None and call.unread:
        note = f"{call.where} passes *args/**kwargs: what it gives is not read here"
        return Verdict(says=(signal, _reads(e, k), note))
    read_script = call is not None or bool(e.imports)
    head = signal if read_script else f"{signal}: if the command calls jax.distributed.initialize()"
    says = [head, _reads(e, k)]
    own_ids = "local_device_ids" in (call.given if call else ()) or (
        k.device_ids_env in e.given_env
    )
    g, t = layout.gpus_per_node, layout.tasks_per_node
    if not g:
        says.append(f"CPU nodes: {t} process(es) per node; local_device_ids picks no GPU")
        return Verdict(says=tuple(says))
    if own_ids:
        says.append(
            f"the job gives local_device_ids itself ({k.device_ids_env} or the call): each of "
            f"the {t} process(es) per node drives the GPUs it names"
        )
        return Verdict(says=tuple(says))
    problem, env, mode = _layout(e, layout, k)
    if problem and read_script:
        raise BadInput(f"{signal}: {problem}")
    if problem:
        return Verdict(says=tuple(says), warnings=(problem,))
    return Verdict(says=(*says, mode), env=env)


def _layout(
    e: Evidence, layout: Layout, k: jax_slurm.JaxSlurm
) -> tuple[str, tuple[tuple[str, str], ...], str]:
    """(what cannot work, "" when it can; the variables the nodes get; the layout in words)."""
    g, t = layout.gpus_per_node, layout.tasks_per_node
    fix = (
        f"give --ntasks-per-node={g} (one process per GPU) or --ntasks-per-node=1 (one per "
        "node, driving all its GPUs)"
    )
    if t > 1 and layout.binds:
        return (
            f"{layout.binds[0]} gives each of the {t} tasks per node its own GPU, numbered 0 "
            "inside the task, but jax.distributed.initialize() gives task i GPU SLURM_LOCALID=i "
            f"(CUDA_ERROR_INVALID_DEVICE from task 1 on); leave out {layout.binds[0]} (every "
            f"task sees the node's {g} GPUs) or pass local_device_ids=[0]",
            (),
            "",
        )
    if t == g:
        return "", (), f"one process per GPU: {t} tasks per node, task i drives GPU i of {g}"
    if t == 1:
        ids = ",".join(str(i) for i in range(g))
        since = ".".join(str(p) for p in k.device_ids_env_since)
        if e.version and launchers.version_tuple(e.version) < k.device_ids_env_since:
            return (
                f"jax {e.version} reads no {k.device_ids_env} (jax {since} on), so one process "
                f"per node would drive GPU 0 alone of {g} (SLURM_LOCALID=0); give --per-task "
                f"(one process per GPU: {g} tasks per node) or jax>={since}",
                (),
                "",
            )
        return (
            "",
            ((k.device_ids_env, ids),),
            f"one process per node on {g} GPUs: {k.device_ids_env}={ids} set on each node "
            f"(jax {since} and later read it), else SLURM_LOCALID=0 would give it GPU 0 alone",
        )
    if t > g:
        what = (
            f"tasks {g} to {t - 1} of each node would ask for GPUs that are not there "
            "(CUDA_ERROR_INVALID_DEVICE)"
        )
    else:
        what = f"GPUs {t} to {g - 1} of each node would stay idle"
    return (
        f"jax.distributed.initialize() gives each task the GPU numbered SLURM_LOCALID, so {t} "
        f"tasks per node on {g} GPUs per node cannot work: {what}; {fix}",
        (),
        "",
    )


def binding_options(args: Sequence[str], k: jax_slurm.JaxSlurm | None = None) -> tuple[str, ...]:
    """The raw sbatch arguments (``--sbatch-arg``) that bind each task to its own GPU."""
    k = k or jax_slurm.get()
    return tuple(a.partition("=")[0] for a in args if a.partition("=")[0] in k.binds_each_task)


__all__ = [
    "Call",
    "Evidence",
    "Layout",
    "Verdict",
    "binding_options",
    "decide",
    "find_call",
    "read",
]
