"""The job's launch form: who spreads the command over the nodes, and in which container
it runs. The one reader ``hpcenv sbatch`` asks (``job/render.py``'s hooks).

Two things a researcher's command may already do that hpcenv must not do again:

- **its own launcher**: ``srun ...``, ``mpirun ...``, ``mpiexec ...`` spread the command
  over the allocation themselves. Inside hpcenv's per-node ``srun`` step (which holds the
  nodes, no ``--overlap``) the user's ``srun`` would wait for nodes that step holds; so the
  job runs it **once, from the batch step**, after the gate (``Form.from_batch``);
- **a container**: pyxis (``srun --container-image=IMAGE``), Apptainer/Singularity
  (``exec|run|shell [opts] IMAGE``), Podman/podman-hpc (``run [opts] IMAGE``), enroot
  (``start [opts] IMAGE``), found anywhere after the launcher (``srun apptainer exec ...``,
  ``mpirun singularity exec ...``). The command runs in the image, not in hpcenv's venv:
  the gate asks for what the image needs instead (the runtime on every node, the image
  file when it is a path; GPUs passed in: ``--nv``, CDI's ``--device nvidia.com/gpu=``,
  pyxis's and enroot's defaults); the job's variables (rendezvous, the profile's NCCL/OFI
  settings) reach inside the way that runtime passes them (``env_words``,
  ``env_exports``); the host's network libraries the profile's recipe needs (libfabric
  and the OFI plugin, found where the modules put them) are bound at the same paths.

How each runtime is spelled, passes GPUs, variables and binds is data:
``knowledge/containers.toml`` (with sources). ``read`` is pure; the job script's lines
are words for bash, every value quoted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import PurePath
from typing import Any

from hpcenv.job import command, environment
from hpcenv.knowledge import tables
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import shell_join, shell_quote

FILE = "containers.toml"
#: The job's rendezvous variables (job/render.py exports them; NODE_RANK per node).
RENDEZVOUS = (
    "MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "WORLD_SIZE", "GPUS_PER_NODE",
    "PET_NNODES", "PET_RDZV_BACKEND", "PET_RDZV_ID", "PET_RDZV_ENDPOINT",
    "HPCENV_CHAIN_LINK", "HPCENV_CHAIN_MAX",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """One runtime's row of ``containers.toml``."""

    name: str
    description: str
    programs: tuple[str, ...]
    subcommands: tuple[str, ...]
    gpu_flags: tuple[str, ...]  # "" : GPUs come by default
    value_options: frozenset[str]
    env: str  # inherit | prefix | flag
    env_flag: str = ""
    env_prefixes: tuple[str, ...] = ()
    env_variable: str = ""
    env_option: str = ""
    clean_flags: tuple[str, ...] = ()
    bind_flag: str = ""
    bind_options: tuple[str, ...] = ()
    bind_option: str = ""
    bind_variable: str = ""
    bind_aliases: tuple[str, ...] = ()  # the same list under the names other builds read
    bind_suffix: str = ""  # after SRC:DST in a bind (":ro": read-only)
    #: the container has a network of its own unless one of host_network is given (podman),
    #: or only when one of own_network_flags is (enroot, Apptainer)
    host_network: tuple[str, ...] = ()
    own_network_flags: tuple[str, ...] = ()
    image_option: str = ""
    gpu_gate: str = ""  # bash: what the runtime needs of a node to pass GPUs in
    gpu_gate_what: str = ""
    gpu_gate_source: str = ""
    #: GPU flag -> (gate, what, source) where that flag needs something else of the node
    flag_gates: tuple[tuple[str, tuple[str, str, str]], ...] = ()
    source: str = ""

    def gpu_gate_for(self, flag: str) -> tuple[str, str]:
        """The gate (bash) and its words for GPUs passed in by ``flag``."""
        for name, (gate, what, _) in self.flag_gates:
            if name == flag:
                return gate, what
        return self.gpu_gate, self.gpu_gate_what


def _strings(row: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in row.get(key, ()))


@cache
def runtimes() -> dict[str, Runtime]:
    """Every runtime of ``containers.toml`` by name."""
    data = tables.read(FILE)
    sources = {k: str(v) for k, v in data["sources"].items()}
    out = {}
    for name, row in data["runtime"].items():
        out[name] = Runtime(
            name=name,
            description=str(row["description"]),
            programs=_strings(row, "programs"),
            subcommands=_strings(row, "subcommands"),
            gpu_flags=_strings(row, "gpu_flags"),
            value_options=frozenset(_strings(row, "value_options")),
            env=str(row["env"]),
            env_flag=str(row.get("env_flag", "")),
            env_prefixes=_strings(row, "env_prefixes"),
            env_variable=str(row.get("env_variable", "")),
            env_option=str(row.get("env_option", "")),
            clean_flags=_strings(row, "clean_flags"),
            bind_flag=str(row.get("bind_flag", "")),
            bind_options=_strings(row, "bind_options"),
            bind_option=str(row.get("bind_option", "")),
            bind_variable=str(row.get("bind_variable", "")),
            bind_aliases=_strings(row, "bind_aliases"),
            bind_suffix=str(row.get("bind_suffix", "")),
            host_network=_strings(row, "host_network"),
            own_network_flags=_strings(row, "own_network_flags"),
            image_option=str(row.get("image_option", "")),
            gpu_gate=str(row.get("gpu_gate", "")),
            gpu_gate_what=str(row.get("gpu_gate_what", "")),
            gpu_gate_source=str(data["sources"][row["gpu_gate_source"]])
            if "gpu_gate_source" in row
            else "",
            flag_gates=tuple(
                (flag, (str(g["gpu_gate"]), str(g["gpu_gate_what"]), sources[g["gpu_gate_source"]]))
                for flag, g in row.get("flag_gates", {}).items()
            ),
            source=str(data["sources"][row["source"]]),
        )
    return out


@dataclass(frozen=True, kw_only=True)
class Form:
    """How the command is launched: its own launcher, its container (both may be "")."""

    launcher: str = ""  # srun | mpirun | mpiexec: runs once from the batch step
    runtime: str = ""  # a key of runtimes(), "" for none
    program: str = ""  # the runtime's word as written (apptainer, singularity, podman-hpc)
    image: str = ""
    #: where hpcenv's options go in the words (after ``run``/``exec``/``start``); -1: none
    insert_at: int = -1
    gpus: bool = False  # GPUs passed in (by a flag, or the runtime's default)
    gpu_flag: str = ""  # the flag of the runtime's gpu_flags that passed them ("": default)
    clean_env: bool = False  # --cleanenv / --containall: host variables do not pass
    user_binds: bool = False  # the user binds paths already (--bind, -v, --container-mounts)
    user_env_option: bool = False  # pyxis: the user gave --container-env
    own_network: bool = False  # a network namespace of its own: other nodes cannot reach it

    @property
    def from_batch(self) -> bool:
        return bool(self.launcher)

    @property
    def container(self) -> bool:
        return bool(self.runtime)

    def describe(self) -> str:
        """One line for the script's header and sbatch's notes ("" for hpcenv's own form):
        a control character of the image's word (a newline would end the header's comment
        and start a line of shell code) is shown as '?'."""
        return re.sub(r"[\x00-\x1f\x7f]", "?", self._describe())

    def _describe(self) -> str:
        parts = []
        if self.launcher:
            parts.append(
                f"your {self.launcher} runs once from the batch step, after the gate (never "
                "inside hpcenv's per-node srun, where it would wait for the nodes that step "
                "holds); NODE_RANK is not set (your launcher places the tasks: SLURM_NODEID, "
                "SLURM_PROCID)"
            )
        if self.runtime:
            gpus = "GPUs passed in" if self.gpus else "no GPU passed in"
            parts.append(
                f"in the container image {self.image or '?'} ({self.program}; {gpus}); "
                "hpcenv's venv is not used"
            )
        return "; ".join(parts)


def _name(word: str) -> str:
    return PurePath(word).name


def _option(word: str) -> tuple[str, bool]:
    """``--opt=value`` -> (``--opt``, True); ``--opt`` -> (``--opt``, False)."""
    name, eq, _ = word.partition("=")
    return (name, True) if eq else (word, False)


def _pyxis(words: Sequence[str], rt: Runtime) -> Form | None:
    """``srun ... --container-image[=]IMAGE ...``: srun's options until the program (the
    first word that is not an option nor the value of the bare option before it)."""
    image, binds, env = "", False, False
    bare = False  # the word before was an option that may take the next word as its value
    for i, word in enumerate(words[1:], start=1):
        if word == "--" or (not word.startswith("-") and not bare):
            break
        if not word.startswith("-"):
            bare = False
            continue
        name, inline = _option(word)
        bare = not inline and (word.startswith("--") or len(word) == 2)  # not -N2
        value = word.partition("=")[2] if inline else (words[i + 1] if i + 1 < len(words) else "")
        if name == rt.image_option:
            image = value
        elif name == rt.bind_option:
            binds = True
        elif name == rt.env_option:
            env = True
    if not image:
        return None
    return Form(
        runtime="pyxis", program="srun", image=image, gpus=True,
        user_binds=binds, user_env_option=env,
    )  # fmt: skip


def _subcommand_at(words: Sequence[str], rt: Runtime, i: int) -> int:
    """Where ``rt``'s subcommand follows its program at ``i``, past the program's global
    options (``podman --root DIR run``: a bare option's next word is its value unless it
    is a subcommand); -1 when none does."""
    bare = False
    for j in range(i + 1, len(words)):
        word = words[j]
        if word in rt.subcommands:
            return j
        if word.startswith("-"):
            bare = "=" not in word
        elif bare:
            bare = False
        else:
            return -1
    return -1


def _runtime_at(words: Sequence[str]) -> tuple[Runtime, int, int] | None:
    """The first ``PROGRAM [global options] SUBCOMMAND`` of a runtime in ``words``: the
    runtime, the program's index and the subcommand's."""
    for i, word in enumerate(words):
        for rt in runtimes().values():
            if rt.subcommands and _name(word) in rt.programs:
                sub = _subcommand_at(words, rt, i)
                if sub > 0:
                    return rt, i, sub
    return None


def _in_runtime(words: Sequence[str], rt: Runtime, at: int, sub: int) -> Form:
    """``PROGRAM [global options] SUBCOMMAND [options] IMAGE ...``: the program at ``at``,
    its subcommand at ``sub``."""
    start = sub + 1
    gpus = "" in rt.gpu_flags
    gpu_flag = ""
    clean = binds = False
    own_network = bool(rt.host_network)
    image = ""
    i = start
    while i < len(words):
        word = words[i]
        if word == "--" or not word.startswith("-"):
            if word == "--":
                i += 1
            image = words[i] if i < len(words) else ""
            break
        name, inline = _option(word)
        value = word.partition("=")[2] if inline else ""
        takes = name in rt.value_options and not inline
        if takes and i + 1 < len(words):
            value = words[i + 1]
        spelled = f"{name}={value}" if value else name
        if found := [
            f for f in rt.gpu_flags if f and (name == f or ("=" in f and spelled.startswith(f)))
        ]:
            gpus, gpu_flag = True, found[0]
        clean = clean or name in rt.clean_flags
        if spelled in rt.host_network:
            own_network = False
        own_network = own_network or name in rt.own_network_flags
        binds = binds or name in rt.bind_options
        i += 2 if takes else 1
    return Form(
        runtime=rt.name, program=_name(words[at]), image=image, insert_at=start, gpus=gpus,
        gpu_flag=gpu_flag, clean_env=clean, user_binds=binds, own_network=own_network,
    )  # fmt: skip


def read(cmd: command.Command) -> Form:
    """The launch form of ``cmd`` (see the module docstring); pure."""
    words = cmd.words[cmd.program + len(cmd.wrapper) :]
    offset = cmd.program + len(cmd.wrapper)
    launcher = cmd.spreader
    rts = runtimes()
    form = Form()
    if launcher == "srun":
        form = _pyxis(words, rts["pyxis"]) or form
    if not form.runtime and (found := _runtime_at(words)) is not None:
        form = _in_runtime(words, *found)
        form = Form(**{**form.__dict__, "insert_at": form.insert_at + offset})
    return Form(**{**form.__dict__, "launcher": launcher})


def check(form: Form, launch: str) -> None:
    """An own launcher or a container with hpcenv's other launch forms (BadInput, exit 2)."""
    if form.launcher and launch != "node":
        option = "--per-task" if launch == "task" else "--ray"
        raise BadInput(
            f"{option} with {form.launcher}: your {form.launcher} starts the tasks itself; "
            f"leave out {option} (the job runs it once, from the batch step)"
        )
    if form.runtime and launch == "ray":
        raise BadInput(
            f"--ray with a {form.program} command: the Ray cluster runs in hpcenv's venv, "
            "outside the image; run the command without --ray"
        )


def warnings(form: Form, gpus_per_node: int, nodes: int = 1) -> list[str]:
    """What the image will lack on this profile's nodes, said before the queue."""
    out = []
    if form.own_network and nodes > 1:
        out.append(
            f"{form.program} gives the container a network of its own: the rendezvous on the "
            f"first node (MASTER_ADDR:MASTER_PORT) is inside its container, and the ranks on "
            f"the other {nodes - 1} node(s) cannot reach it nor each other; add --network host "
            "(podman) or leave out --net"
        )
    if form.runtime and gpus_per_node and not form.gpus:
        rt = runtimes()[form.runtime]
        flags = " or ".join(f for f in rt.gpu_flags if f)
        out.append(
            f"{form.program} without {flags}: the container sees none of the node's "
            f"{gpus_per_node} GPU(s); add {rt.gpu_flags[0]} ({rt.source.split(' ')[0]})"
        )
    if form.runtime == "pyxis" and form.user_env_option:
        out.append(
            "srun --container-env given: pyxis then ignores PYXIS_CONTAINER_ENV, so where the "
            "image sets one of the job's variables (NCCL_*, FI_*, MASTER_ADDR...) its value "
            "wins; name them in your --container-env"
        )
    return out


def passed_names(profile_names: Sequence[str], form: Form) -> list[str]:
    """The job's variables that must reach inside: the rendezvous, then the profile's
    (NODE_RANK only where hpcenv starts the command on each node)."""
    names = [n for n in RENDEZVOUS if n != "NODE_RANK" or not form.from_batch]
    names += [n for n in profile_names if n not in names and n != "HPCENV_HOME"]
    return names


def gate_lines(form: Form, gpus_per_node: int = 0) -> list[str]:
    """The gate's checks for a container job, instead of the venv's (``gate`` and
    ``on_nodes`` are the job script's functions): the runtime, the image when it is a
    path, and, on a GPU profile where the command passes GPUs in, what the runtime needs
    of the node for that."""
    on = "\"$nodes\"' node(s)'"  # with the word before it: '<what> on '"$nodes"' node(s)'
    rt = runtimes()[form.runtime]
    gpu = []
    gate, what = rt.gpu_gate_for(form.gpu_flag)
    if gpus_per_node and form.gpus and gate:
        gpu = [f"gate {shell_quote(what + ' on ')}{on} on_nodes bash -c {shell_quote(gate)}"]
    if form.runtime == "pyxis":
        return [
            'gate "pyxis in srun (srun --help names --container-image)" '
            "bash -c 'srun --help 2>&1 | grep -q -e --container-image'",
            *gpu,
        ]
    check = (
        'command -v -- "$0" >/dev/null || { echo "$0: not found on $(hostname)" >&2; exit 127; }'
    )
    lines = [
        f"gate {shell_quote(form.program + ' on ')}{on} on_nodes bash -c "
        f"{shell_quote(check)} {shell_quote(form.program)}"
    ]
    if form.image.startswith(("/", "./", "../")) or form.image.endswith((".sif", ".sqsh")):
        lines.append(
            f"gate {shell_quote(f'image {form.image} on ')}{on} on_nodes test -e "
            f"{shell_quote(form.image)}"
        )
    return [*lines, *gpu]


#: bash: the directories of LD_LIBRARY_PATH holding libfabric or an NCCL net plugin, as
#: loaded by the profile's modules: the host's network stack, bound at the same paths.
#: Not one anybody can write (a library dropped there would run in every rank), nor a
#: relative one, nor one with a comma (runtimes split their bind lists on it): said.
_HOST_NET = (
    "hpcenv_net=()\n"
    'IFS=: read -r -a hpcenv_dirs <<< "${LD_LIBRARY_PATH:-}"\n'
    'for d in "${hpcenv_dirs[@]}"; do\n'
    '  [ -n "$d" ] || continue\n'
    '  compgen -G "$d/libfabric.so*" >/dev/null || compgen -G "$d/libnccl-net*.so*" >/dev/null '
    "|| continue\n"
    '  why=""\n'
    '  case $d in /*) ;; *) why="not an absolute path";; esac\n'
    '  case $d in *,*) why="has a comma";; esac\n'
    '  if [ -z "$why" ] && [ -n "$(find "$d" -maxdepth 0 -perm -0002 2>/dev/null)" ]; then\n'
    '    why="writable by others"\n'
    "  fi\n"
    '  if [ -n "$why" ]; then\n'
    '    echo "hpcenv: warning: $d on LD_LIBRARY_PATH: $why; not bound into the container" >&2\n'
    "    continue\n"
    "  fi\n"
    '  hpcenv_net+=("$d")\n'
    "done"
)


def env_lines(form: Form, names: Sequence[str], *, network: bool) -> list[str]:
    """Lines before the command is built: what the runtime reads from the environment
    (pyxis's PYXIS_CONTAINER_ENV, Apptainer's APPTAINERENV_*), and, for a profile whose
    network recipe needs an OFI plugin (``network``), the host's network library
    directories (``hpcenv_net``)."""
    if not form.runtime:
        return []
    environment.check_names(names)  # Apptainer's loop writes them as bare words
    rt = runtimes()[form.runtime]
    lines = ["", f"# --- the container ({form.program}): the job's variables reach inside"]
    lines.append(f"# ({rt.source})")
    if network:
        lines += _HOST_NET.splitlines()
    else:
        lines.append("hpcenv_net=()")
    if rt.env == "inherit" and rt.env_variable:
        lines.append(f"export {rt.env_variable}={shell_quote(','.join(names))}")
        if rt.bind_variable and not form.user_binds:
            lines.append(
                f'if [ "${{#hpcenv_net[@]}}" -gt 0 ]; then {_binds(rt)}; export '
                f'{rt.bind_variable}="$(IFS=,; echo "${{m[*]}}")"; fi'
            )
    elif rt.env == "prefix":
        # host variables pass unless --cleanenv; the prefixed copies pass either way
        lines.append(f"for v in {' '.join(n for n in names if n != 'NODE_RANK')}; do")
        exports = "; ".join(f'export "{p}$v=${{!v}}"' for p in rt.env_prefixes)
        lines.append(f'  if [ -n "${{!v+x}}" ]; then {exports}; fi')
        lines.append("done")
        for var in (rt.bind_variable, *rt.bind_aliases) if rt.bind_variable else ():
            lines.append(
                f'if [ "${{#hpcenv_net[@]}}" -gt 0 ]; then {_binds(rt)}; export '
                f'{var}="${{{var}:+${{{var}}},}}$(IFS=,; echo "${{m[*]}}")"; fi'
            )
    return lines


def _binds(rt: Runtime) -> str:
    """bash: ``m``, the host's network directories as ``rt``'s binds (SRC:DST[suffix])."""
    return f'm=(); for d in "${{hpcenv_net[@]}}"; do m+=("$d:$d{rt.bind_suffix}"); done'


def insert_lines(form: Form, names: Sequence[str], *, shift: int = 0) -> list[str]:
    """``cmd`` with hpcenv's options for a runtime that takes variables and binds only as
    options (podman ``-e NAME``/``-v``, enroot ``--env NAME``/``--mount``), put right after
    its subcommand: the user's words are unchanged around them. ``shift``: words the job
    put before the user's (``env`` before ``VAR=value``)."""
    if not form.runtime or form.insert_at < 0:
        return []
    rt = runtimes()[form.runtime]
    if rt.env != "flag":
        return []
    environment.check_names(names)
    words: list[str] = []
    for n in names:
        words += [rt.env_flag, n]
    k = form.insert_at + shift
    bind = shell_quote(rt.bind_flag)
    how = "read-only " if rt.bind_suffix == ":ro" else ""
    return [
        f"# {form.program} passes no host variable unless named: {rt.env_flag} NAME takes the",
        "# host's value (set on each node before the command starts); the host's network",
        f"# libraries are bound {how}at the same paths",
        "hpcenv_opts=()",
        f'for d in "${{hpcenv_net[@]}}"; do hpcenv_opts+=({bind} "$d:$d{rt.bind_suffix}"); done',
        f'cmd=("${{cmd[@]:0:{k}}}" {shell_join(words)} "${{hpcenv_opts[@]}}" "${{cmd[@]:{k}}}")',
    ]


def node_rank_exports(form: Form) -> str:
    """What the per-node wrapper exports besides NODE_RANK (Apptainer's prefixed copy,
    which passes with --cleanenv too)."""
    if form.runtime and runtimes()[form.runtime].env == "prefix":
        return " ".join(
            f'{p}NODE_RANK="$SLURM_NODEID"' for p in runtimes()[form.runtime].env_prefixes
        )
    return ""


__all__ = ["Form", "Runtime", "check", "read", "runtimes"]
