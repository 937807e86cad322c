"""Print a shell completion script: eval "$(hpcenv completion bash)" in ~/.bashrc (zsh:
the same script through bashcompinit; fish: hpcenv completion fish | source). It completes
commands, their actions (profile init/check, knowledge update/check), options, choices,
profile names and probe names. The commands and options are written into the script once,
from hpcenv's own argparse parsers, so no keystroke starts Python: profile names are
listed by the shell from $HPCENV_ENVS, ./envs and the profiles hpcenv ships (the places
'hpcenv profiles' looks), plus the environments built under $HPCENV_HOME/venvs; probe
names come from the probe registry. Regenerate the script after upgrading hpcenv."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import shlex
from dataclasses import dataclass

from hpcenv.commands import print_text

SHELLS = ("bash", "zsh", "fish")

#: Positionals and option values that name a profile (or its built environment).
PROFILE_DESTS = frozenset({"profile", "profiles"})
PROFILE_OPTIONS = frozenset({"--env", "--profile"})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


@dataclass(frozen=True, kw_only=True)
class Command:
    """One command (or a command's action, ``profile init``) as the script completes it."""

    path: str  # "doctor", "profile init"
    options: tuple[str, ...]
    #: option -> what its value is: "profile", "file", or "choices:a,b,c"
    values: tuple[tuple[str, str], ...]
    #: what each positional is ("profile", "probe", "target", "file", "none"); the last
    #: one repeats when it takes several
    positionals: tuple[str, ...]
    actions: tuple[str, ...] = ()


def _kind_of_value(action: argparse.Action) -> str:
    if action.choices:
        return "choices:" + ",".join(str(c) for c in action.choices)
    if any(o in PROFILE_OPTIONS for o in action.option_strings):
        return "profile"
    return "file"


def _positional_kind(path: str, action: argparse.Action) -> str:
    if action.choices:
        return "choices:" + ",".join(str(c) for c in action.choices)
    if action.dest in PROFILE_DESTS or path == "profile check":
        return "profile"
    if path == "probe":
        return "probe"
    if path == "sbatch" and action.dest == "target":
        return "target"
    if path == "profile init":
        return "none"  # a new name
    return "file"


def _walk(path: str, parser: argparse.ArgumentParser) -> list[Command]:
    options: list[str] = []
    values: list[tuple[str, str]] = []
    positionals: list[str] = []
    below: list[Command] = []
    actions: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                actions.append(name)
                below += _walk(f"{path} {name}", sub)
        elif action.option_strings:
            options += action.option_strings
            if action.nargs != 0:
                values += [(o, _kind_of_value(action)) for o in action.option_strings]
        else:
            positionals.append(_positional_kind(path, action))
    here = Command(path=path, options=tuple(options), values=tuple(values),
                   positionals=tuple(positionals), actions=tuple(actions))  # fmt: skip
    return [here, *below]


def commands() -> list[Command]:
    """Every command module's parser, walked (the modules of ``hpcenv.commands``: the same
    ones ``cli.COMMANDS`` lists, each configured as ``cli`` configures it)."""
    import hpcenv.commands as package

    out: list[Command] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"hpcenv.commands.{info.name}")
        parser = argparse.ArgumentParser(prog=f"hpcenv {info.name}")
        if getattr(mod, "TAKES_COMMAND", False):
            mod.configure(parser, with_command=False)
        else:
            mod.configure(parser)
        out += _walk(info.name, parser)
    return out


def profile_dirs() -> list[str]:
    """The profile directories hpcenv looks in besides $HPCENV_ENVS and ./envs, which the
    shell reads itself when it completes (``profile/schema.envs_dirs``: the ones shipped)."""
    import os
    from pathlib import Path

    from hpcenv.profile import schema

    mine = {(Path.cwd() / "envs").resolve()}
    if os.environ.get("HPCENV_ENVS"):
        mine.add(Path(os.environ["HPCENV_ENVS"]).resolve())
    shipped = Path(schema.__file__).resolve().parents[1]
    found = [d.resolve() for d in schema.envs_dirs() if d.resolve() not in mine]
    found += [d.resolve() for d in (shipped / "_envs", shipped.parents[1] / "envs") if d.is_dir()]
    return [str(d) for d in dict.fromkeys(found)]


def _probe_names() -> list[str]:
    from hpcenv.kit import registry

    return [p.name for p in registry.PROBES]


def _case(pairs: list[tuple[str, str]], indent: str = "        ") -> str:
    return "\n".join(f"{indent}{shlex.quote(k)}) {v} ;;" for k, v in pairs)


def bash(cmds: list[Command], *, probes: list[str], dirs: list[str]) -> str:
    """The bash script (zsh runs it through bashcompinit)."""
    top = [c for c in cmds if " " not in c.path]
    subs = [(f"{c.path.rsplit(' ', 1)[0]}/{c.path.rsplit(' ', 1)[1]}", "return 0")
            for c in cmds if " " in c.path]  # fmt: skip
    subs += [(f"/{c.path}", "return 0") for c in top]
    valued = [(f"{c.path} {o}", f"REPLY={shlex.quote(k)}; return 0") for c in cmds
              for o, k in c.values]  # fmt: skip
    words = [(c.path, f"REPLY={shlex.quote(' '.join([*c.actions, *c.options]))}") for c in cmds]
    pos = [(c.path, f"REPLY={shlex.quote(' '.join(c.positionals))}") for c in cmds]
    names = " ".join(c.path for c in top)
    return f"""# hpcenv completion for bash (zsh: the same through bashcompinit).
# eval "$(hpcenv completion bash)" in ~/.bashrc, or save it as
# ~/.local/share/bash-completion/completions/hpcenv. Written by hpcenv completion: the
# commands and options of this hpcenv; no keystroke starts Python.

_hpcenv_profiles() {{
    local d f n; local -A seen=()
    for d in "${{HPCENV_ENVS:-}}" ./envs {" ".join(shlex.quote(d) for d in dirs)}; do
        [ -n "$d" ] && [ -d "$d" ] || continue
        for f in "$d"/*.toml; do
            [ -e "$f" ] || continue
            n=${{f##*/}}; n=${{n%.toml}}
            [[ -n ${{seen[$n]:-}} ]] || {{ seen[$n]=1; printf '%s\\n' "$n"; }}
        done
    done
    for f in "${{HPCENV_HOME:-$PWD/.hpcenv}}"/venvs/*; do
        n=${{f##*/}}
        [ -L "$f" ] && [[ -z ${{seen[$n]:-}} ]] && {{ seen[$n]=1; printf '%s\\n' "$n"; }}
    done
    return 0
}}

_hpcenv_is_sub() {{  # "$path/$word": a command or an action of one
    case "$1" in
{_case(subs)}
    esac
    return 1
}}

_hpcenv_value() {{  # "$path $option": REPLY is what its value is, if it takes one
    case "$1" in
{_case(valued)}
    esac
    return 1
}}

_hpcenv_words() {{
    REPLY='--help --version'
    case "$1" in
        '') REPLY={shlex.quote(names + " --help --version")} ;;
{_case(words)}
    esac
}}

_hpcenv_positionals() {{
    REPLY=''
    case "$1" in
{_case(pos)}
    esac
}}

_hpcenv_fill() {{  # complete "$cur" as kind $1
    local kind=$1
    case "$kind" in
        profile)
            COMPREPLY=($(compgen -W "$(_hpcenv_profiles)" -- "$cur"))
            [[ $cur == */* || $cur == .* ]] && {{ compopt -o filenames 2>/dev/null
                COMPREPLY+=($(compgen -f -- "$cur")); }} ;;
        probe) COMPREPLY=($(compgen -W {shlex.quote(" ".join(probes))} -- "$cur")) ;;
        target) COMPREPLY=($(compgen -W {shlex.quote(" ".join(["build", *probes]))} -- "$cur")) ;;
        choices:*) kind=${{kind#choices:}}; COMPREPLY=($(compgen -W "${{kind//,/ }}" -- "$cur")) ;;
        none) COMPREPLY=() ;;
        *) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}}

_hpcenv() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev='' path='' w i skip=0 npos=0 REPLY
    (( COMP_CWORD > 1 )) && prev=${{COMP_WORDS[COMP_CWORD-1]}}
    for (( i=1; i<COMP_CWORD; i++ )); do
        w=${{COMP_WORDS[i]}}
        if (( skip )); then skip=0; continue; fi
        if [[ $w == -- ]]; then  # your own command follows: complete it as bash would
            COMPREPLY=(); compopt -o default 2>/dev/null; return 0
        fi
        if [[ $w == -* ]]; then
            [[ $w != *=* ]] && _hpcenv_value "$path $w" && skip=1
            continue
        fi
        if _hpcenv_is_sub "$path/$w"; then path=${{path:+$path }}$w; else npos=$((npos + 1)); fi
    done
    if (( skip )) && _hpcenv_value "$path $prev"; then
        _hpcenv_fill "$REPLY"; return 0
    fi
    _hpcenv_words "$path"
    local words=$REPLY
    if [[ $cur == -* || -z $path ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur")); return 0
    fi
    _hpcenv_positionals "$path"
    local kinds=($REPLY)
    if (( ${{#kinds[@]}} == 0 )); then  # an action to choose (profile init|check)
        COMPREPLY=($(compgen -W "${{words%% -*}}" -- "$cur")); return 0
    fi
    (( npos >= ${{#kinds[@]}} )) && npos=$(( ${{#kinds[@]}} - 1 ))
    _hpcenv_fill "${{kinds[npos]}}"
}}
complete -F _hpcenv hpcenv
"""


def zsh(cmds: list[Command], *, probes: list[str], dirs: list[str]) -> str:
    return (
        "# hpcenv completion for zsh: the bash script through zsh's bashcompinit.\n"
        "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(cmds, probes=probes, dirs=dirs)
    )


def fish(cmds: list[Command], *, probes: list[str], dirs: list[str]) -> str:
    """fish: one ``complete`` line per command, action and option."""
    q = shlex.quote
    top = [c for c in cmds if " " not in c.path]
    lines = [
        "# hpcenv completion for fish: hpcenv completion fish | source",
        "function __hpcenv_profiles",
        "    for d in $HPCENV_ENVS ./envs " + " ".join(q(d) for d in dirs),
        "        for f in $d/*.toml; basename $f .toml; end",
        "    end",
        '    set -l home $HPCENV_HOME; test -n "$home"; or set home $PWD/.hpcenv',
        "    for f in $home/venvs/*; test -L $f; and basename $f; end",
        "end",
        "complete -c hpcenv -f",
        f"complete -c hpcenv -n __fish_use_subcommand -a {q(' '.join(c.path for c in top))}",
    ]
    for c in cmds:
        words = c.path.split()
        cond = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in words)
        if c.actions:
            chosen = f"{cond}; and not __fish_seen_subcommand_from {' '.join(c.actions)}"
            lines.append(f"complete -c hpcenv -n {q(chosen)} -a {q(' '.join(c.actions))}")
        values = dict(c.values)
        for o in c.options:
            flag = f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}"
            kind = values.get(o)
            arg = ""
            if kind == "profile":
                arg = " -r -f -a '(__hpcenv_profiles)'"
            elif kind and kind.startswith("choices:"):
                arg = f" -r -a {q(kind.removeprefix('choices:').replace(',', ' '))}"
            elif kind:
                arg = " -r -F"
            lines.append(f"complete -c hpcenv -n {q(cond)} {flag}{arg}")
        if "profile" in c.positionals:
            lines.append(f"complete -c hpcenv -n {q(cond)} -a '(__hpcenv_profiles)'")
        for kind in c.positionals:
            if kind.startswith("choices:"):
                choices = kind.removeprefix("choices:").replace(",", " ")
                lines.append(f"complete -c hpcenv -n {q(cond)} -a {q(choices)}")
        if "probe" in c.positionals or "target" in c.positionals:
            names = " ".join(probes + (["build"] if "target" in c.positionals else []))
            lines.append(f"complete -c hpcenv -n {q(cond)} -a {q(names)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    render = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell]
    print_text(render(commands(), probes=_probe_names(), dirs=profile_dirs()))
    return 0
