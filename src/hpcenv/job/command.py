"""The job's command read as the shell would run it: the one reader sbatch, run and
preflight ask.

A researcher's command is rarely a bare launcher. What public training repos write:

- leading ``VAR=value`` words (``ACCELERATE_LOG_LEVEL=info accelerate launch ...``): the
  shell's environment for the command, never a program;
- ``env [-u NAME | --unset NAME] [VAR=value ...] CMD`` (the same, through ``env``);
- ``uv run [OPTIONS] -- CMD`` (or ``uv run CMD``): the project's environment around CMD;
- the launcher: ``accelerate launch``, ``deepspeed``, ``torchrun``, or the module forms
  ``python -m accelerate.commands.launch`` / ``deepspeed.launcher.runner`` /
  ``torch.distributed.run``;
- or the user's own spreader, ``srun``/``mpirun``/``mpiexec`` (``Command.spreader``): it
  starts the tasks itself, so the job runs it once (``hpcenv.job.containers`` reads the
  rest of its form: a container behind it).
- or a wrapper CLI that runs a launcher itself (``axolotl train``, ``llamafactory-cli
  train``, ``tune run``, ``trl sft``, ``composer``: knowledge/wrappers.toml): ``kind`` is
  the launcher it runs, ``wrapped`` its row, ``passes`` how the launcher's options reach it.

``read`` is pure: it returns a :class:`Command` naming each part by its position in the
words, so what runs is always exactly the user's words (with the environment applied).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from hpcenv.utils.output import shell_name

KINDS = ("accelerate", "deepspeed", "torchrun")
#: Launchers of the user's that spread the command over the allocation themselves.
SPREADERS = ("srun", "mpirun", "mpiexec")
#: ``python -m MODULE`` forms of the launchers.
MODULES = {
    "torch.distributed.run": "torchrun",
    "accelerate.commands.launch": "accelerate",
    "deepspeed.launcher.runner": "deepspeed",
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: A launcher's second spelling of one of its options, read as the first: DeepSpeed's
#: runner declares ``add_argument("--num_gpus", "--num_accelerators", type=int)``
#: (deepspeed/launcher/runner.py, every release from 0.12.6 to 0.19.8).
ALIASES = {"deepspeed": {"--num_accelerators": "--num_gpus"}}
#: accelerate options that choose how to distribute (any of them: no --multi_gpu added).
ACCELERATE_MODES = (
    "--multi_gpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--tpu", "--cpu",
    "--use_xpu", "--config_file",
)  # fmt: skip
#: Launcher options that take no value (so the word after them is the script).
FLAGS = frozenset(
    (*ACCELERATE_MODES[:-1], "--no_ssh", "--no_local_rank", "--force_multi", "--same_network",
     "--standalone", "--debug", "--quiet", "--no_ssh_check", "--bind_cores_to_rank",
     "--module", "--no_python", "--m", "--elastic_training", "--run_path")
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Command:
    """One command, its parts named by position in ``words`` (the user's, unchanged)."""

    words: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # VAR=value, in order (a later one wins)
    unset: tuple[str, ...] = ()  # env -u NAME
    program: int = 0  # where what runs begins: after the VAR=value and env words
    wrapper: tuple[str, ...] = ()  # uv run [OPTIONS] --, kept in what runs
    kind: str = ""  # the launcher (one of KINDS), "" when none is recognised
    start: int = 0  # where the launcher's own options begin (an index in words)
    #: a command wrapping a launcher (knowledge/wrappers.toml): its row's name, how the
    #: launcher's options reach it (``passes``), where the wrapper's own arguments begin
    wrapped: str = ""
    passes: str = ""
    body: int = 0
    #: where a launcher or wrapper seems to start behind words not read (0: none): ``uv run
    #: OPTIONS`` without ``--`` (uv's parser says where the command starts), ``env -i``,
    #: ``env 1X=2`` (run as written; ``_hidden``)
    hidden: int = 0

    @property
    def runs(self) -> tuple[str, ...]:
        """What is executed, the environment applied: the words after the prefixes."""
        return self.words[self.program :]

    @property
    def name(self) -> str:
        """The program's name (the launcher's, or the first word that runs)."""
        head = self.words[self.program + len(self.wrapper) :][:1]
        return PurePath(head[0]).name if head else ""

    @property
    def spreader(self) -> str:
        """``srun``/``mpirun``/``mpiexec`` when the command is one (it starts its tasks)."""
        return self.name if self.name in SPREADERS else ""

    @property
    def assigns_first(self) -> bool:
        """The first word is ``VAR=value``: run as is it would be taken for a program, so
        the job runs the words through ``env`` (what the shell does with them)."""
        return bool(self.words) and bool(_ASSIGNMENT.match(self.words[0]))

    @property
    def arguments(self) -> tuple[str, ...]:
        """The words the program itself reads (a trainer's flags and files): after the
        launcher's options and script, after a wrapper's subcommand (up to the launcher's
        ``--``), or after the program's name."""
        if self.wrapped and self.passes != "options":
            dashdash = self.passes == "dashdash" and self.words[self.start - 1 : self.start] == (
                "--",
            )
            end = self.start - 1 if dashdash else len(self.words)
            return self.words[self.body : end]
        if self.kind:
            return self.words[split_options(self.words, self.start)[1] + 1 :]
        return self.words[self.program + len(self.wrapper) + 1 :]

    @property
    def script(self) -> str:
        """The Python script the command runs (``launcher [opts] X.py``, ``python X.py``),
        "" when there is none (a module, a program)."""
        if self.wrapped and self.passes != "options":
            return ""  # the wrapper runs its own module
        if self.kind:
            at = split_options(self.words, self.start)[1]
            word = self.words[at] if at < len(self.words) else ""
        else:
            head = self.words[self.program + len(self.wrapper) :]
            python = bool(head) and PurePath(head[0]).name.startswith("python")
            word = head[1] if python and len(head) > 1 else ""
        return word if word.endswith(".py") else ""

    def options(self) -> dict[str, str | None]:
        """The launcher's own options (before its script), spelled with underscores; a
        wrapper's: every option (remaining), none (env), those after ``--`` and the options
        before it (dashdash: axolotl's click passes the ones it does not know on, so any of
        them may be the launcher's), its own spellings (the row's ``aliases``) as the
        launcher's."""
        if not self.kind or self.passes == "env":
            return {}
        found = launcher_options(self.words, self.start)
        if self.passes == "dashdash":  # click passes on the options it does not know too
            found = {**_loose_options(self.arguments), **found}
        renamed = dict(ALIASES.get(self.kind, {}))
        if self.wrapped:
            from hpcenv.knowledge import wrappers  # here: a plain command never loads it

            renamed.update(wrappers.by_name(self.wrapped).aliases)  # trl's --accelerate_config
        return {renamed.get(key, key): value for key, value in found.items()}

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this command's ``env -u`` and ``VAR=value`` applied."""
        out = {k: v for k, v in base.items() if k not in self.unset}
        out.update(self.env)
        return out


def is_name(word: str) -> bool:
    """``word`` is a shell variable name (``[A-Za-z_][A-Za-z0-9_]*``, ``output.shell_name``):
    one a script may write as ``"${NAME}"``."""
    return shell_name(word)


def _env_words(words: Sequence[str], i: int) -> tuple[int, list[str]] | None:
    """``env``'s own options from ``words[i]``: where they end and the names unset; None
    for an option other than ``-u``/``--unset`` (``env -i``, ``env -0``: then ``env`` is
    the program, run as written, and what follows is not read as a launcher)."""
    unset: list[str] = []
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if word == "--":
            return i + 1, unset
        if word in ("-u", "--unset") and i + 1 < len(words):
            unset.append(words[i + 1])
            i += 2
            continue
        name = word[2:] if word.startswith("-u") else word.partition("=")[2]
        if not (word.startswith(("-u", "--unset=")) and _NAME.fullmatch(name)):
            return None
        unset.append(name)
        i += 1
    return i, unset


def _uv_run(words: Sequence[str], i: int) -> int:
    """Where the command after ``uv run [OPTIONS] [--]`` starts; ``i`` when none does."""
    if PurePath(words[i]).name != "uv" or tuple(words[i + 1 : i + 2]) != ("run",):
        return i
    rest = list(words[i + 2 :])
    if "--" in rest:
        return i + 2 + rest.index("--") + 1
    if rest and not rest[0].startswith("-"):
        return i + 2
    return i  # options without '--': which word is the command is uv's to say


def _launcher(words: Sequence[str], at: int) -> tuple[str, int]:
    head = PurePath(words[at]).name if at < len(words) else ""
    after = list(words[at + 1 : at + 3])
    if head == "accelerate" and after[:1] == ["launch"]:
        return "accelerate", at + 2
    if head in ("deepspeed", "torchrun"):
        return head, at + 1
    if head.startswith("python") and after[:1] == ["-m"] and after[1:] and after[1] in MODULES:
        return MODULES[after[1]], at + 3
    return "", at


def read(argv: Sequence[str]) -> Command:
    """``argv`` read as the shell runs it (see the module docstring); pure."""
    words = tuple(argv)
    env: list[tuple[str, str]] = []
    unset: list[str] = []
    i = 0
    while i < len(words):
        if _ASSIGNMENT.match(words[i]):
            name, _, value = words[i].partition("=")
            env.append((name, value))
            i += 1
        elif (
            PurePath(words[i]).name == "env"
            and (read := _env_words(words, i + 1))
            and read[0] < len(words)  # a program after it (bare 'env' prints the environment)
        ):
            i, names = read
            unset += names
        else:
            break
    program = i
    at = _uv_run(words, i) if i + 1 < len(words) else i
    kind, start = _launcher(words, at)
    if not kind and (wrapped := _wrapped(words, at)) is not None:
        kind, start, name, passes, body = wrapped
        return Command(
            words=words, env=tuple(env), unset=tuple(unset), program=program,
            wrapper=words[program:at], kind=kind, start=start, wrapped=name, passes=passes,
            body=body,
        )  # fmt: skip
    return Command(
        words=words, env=tuple(env), unset=tuple(unset), program=program,
        wrapper=words[program:at], kind=kind, start=start,
        hidden=0 if kind else _hidden(words, at),
    )  # fmt: skip


def _hidden(words: tuple[str, ...], at: int) -> int:
    """Where a launcher or wrapper CLI appears behind words this reader does not read:
    ``uv run OPTIONS`` without ``--`` (``uv run --frozen accelerate launch ...``), ``env``
    with another option (``env -i``) or a NAME that is no shell name (``env 1X=2``); 0
    when none does."""
    if at >= len(words):
        return 0
    if PurePath(words[at]).name == "uv" and words[at + 1 : at + 2] == ("run",):
        first = at + 2
    elif PurePath(words[at]).name == "env" or "=" in words[at]:
        first = at + 1
    else:
        return 0
    for j in range(first, len(words)):
        if _launcher(words, j)[0] or _wrapped(words, j) is not None:
            return j
    return 0


def _wrapped(words: Sequence[str], at: int) -> tuple[str, int, str, str, int] | None:
    """A wrapper CLI at ``words[at]`` (knowledge/wrappers.toml): the launcher it runs ("" for
    none: axolotl's --launcher python), where the launcher's options are read, the row's
    name, how the options reach it, where the wrapper's own arguments begin."""
    from hpcenv.knowledge import wrappers  # here: a plain command never loads the table

    head = PurePath(words[at]).name if at < len(words) else ""
    sub = words[at + 1] if at + 1 < len(words) else ""
    row = wrappers.by_program(head, sub) if head else None
    if row is None:
        return None
    body = at + 1 + (1 if row.subcommands else 0)
    kind = row.launcher
    if row.launcher_option:  # axolotl --launcher torchrun (before its --)
        rest = list(words[body:])
        own = rest[: rest.index("--")] if "--" in rest else rest
        chosen = option_value(own, row.launcher_option) or ""
        kind = chosen if chosen in row.choices else kind
    if row.passes == "options":
        start = body
    elif row.passes == "dashdash":
        rest = list(words[body:])
        start = body + rest.index("--") + 1 if "--" in rest else len(words)
    elif row.passes == "remaining":
        start = body
    else:
        start = len(words)
    return kind if kind in (*KINDS, "composer") else "", start, row.name, row.passes, body


def option_value(words: Sequence[str], *names: str) -> str | None:
    """The value of the first of ``names`` in ``words`` (``--x V`` or ``--x=V``); None when
    absent or last without a value."""
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in names:
            if eq:
                return value
            return words[i + 1] if i + 1 < len(words) else None
    return None


def _loose_options(words: Sequence[str]) -> dict[str, str | None]:
    """Every ``--x``/``--x=V``/``--x V`` among ``words``, positionals skipped, spelled with
    underscores (what click's ``ignore_unknown_options`` may pass on)."""
    out: dict[str, str | None] = {}
    for i, word in enumerate(words):
        if not word.startswith("--") or word == "--":
            continue
        name, eq, value = word.partition("=")
        key = "--" + name.lstrip("-").replace("-", "_")
        after = words[i + 1] if i + 1 < len(words) else ""
        out[key] = value if eq else (after if after and not after.startswith("-") else None)
    return out


def launcher_options(argv: Sequence[str], start: int) -> dict[str, str | None]:
    """A launcher's own options from ``start``, spelled with underscores: value or None."""
    return split_options(argv, start)[0]


def split_options(argv: Sequence[str], start: int) -> tuple[dict[str, str | None], int]:
    """A launcher's own options from ``start`` and where its script begins (the first word
    ending in .py, or what follows -m/--module/--no_python)."""
    out: dict[str, str | None] = {}
    last: str | None = None  # the option still waiting for its value
    for i in range(start, len(argv)):
        word = argv[i]
        if word.endswith(".py"):
            return out, i
        if not word.startswith("-"):
            if last is None:
                return out, i  # the script (or program) itself
            out[last], last = word, None
            continue
        name, eq, value = word.partition("=")
        key = "--" + name.lstrip("-").replace("-", "_")
        out[key] = value if eq else None
        last = None if eq or key in FLAGS else key
        if key in ("--module", "--no_python", "--m"):
            return out, i + 1
    return out, len(argv)
