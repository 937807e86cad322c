"""``hpcenv`` command line: thin. Each subcommand is one module in ``hpcenv.commands``
(``configure(parser)``, ``run(args) -> int``, its docstring the command's description),
listed once in :data:`COMMANDS` with its one-line help; errors are caught here, once,
and become one line on stderr (masked: ``redact``) and the error's exit code.

Start-up: only the chosen command's module is imported. ``hpcenv --help`` and
``--version`` import none (the help lines come from :data:`COMMANDS`), so they cost
argparse and this module, not rich, packaging or the builder
(``tests/integration/cli/test_startup.py``).

SIGTERM and SIGHUP (a batch system's cancel, an SSH disconnect) are handled like
Ctrl-C: they raise ``KeyboardInterrupt`` where hpcenv is, so every ``finally`` and
shutdown runs (children and their sessions stopped, temporary directories removed),
then hpcenv says which signal ended it and exits with 128 + its number.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import signal
import sys
from collections.abc import Sequence

from hpcenv import __version__
from hpcenv.utils import modes
from hpcenv.utils.errors import HpcenvError, Interrupted

#: Every command in ``hpcenv --help``'s order, one line each: its name (its module is
#: ``hpcenv.commands.<name>``, imported only when the command is chosen) and its help.
#: A new command is a module in ``hpcenv/commands/`` and a line here.
COMMANDS: dict[str, str] = {
    "doctor": "facts -> plan -> build -> probes for a profile (default local), one report",
    "facts": "show this node's facts (driver, GPUs, network, SLURM); --json for the contract",
    "profiles": "list the cluster profiles and whether each validates",
    "show": "validate and print one profile (NAME or path); --schema lists every key",
    "profile": "write a profile from the cluster itself (init), or check one for drift (check)",
    "resolve": "choose the torch variant and flash-attn action for a node, with reasons",
    "plan": "show what a build of PROFILE would do on a node, and why",
    "audit": "check the torch a lock, venv or project file installs, and whether this node runs it",
    "archs": "show the SASS and PTX archs in libraries, wheels or venvs (no CUDA needed)",
    "lock": "write lockfiles/<profile>-<arch>.txt with uv pip compile (--check: verify only)",
    "build": "build (or update) a profile's environment; no-op when nothing changed",
    "preflight": "check this job's node against the profile (GPUs, scratch, logs, modules, ECC)",
    "env": "print the job environment of a profile (export lines for eval, or --json)",
    "run": "run CMD (after --) in a profile's environment; CMD's exit code is hpcenv's",
    "probe": "run probes (imports, torch, gpu-health, nccl, ofi, ray, vllm, ...) in an env",
    "sbatch": "render (and --submit) a job script: a probe, a build, or your command after --",
    "explain": "name what a failed job died of: the cause, the evidence, the fix",
    "report": "draw a JSON report (probe, doctor, a job's) as one HTML file: NCCL charts, pairs",
    "completion": "print a bash, zsh or fish completion script: commands, options, profiles",
    "knowledge": "regenerate hpcenv's torch/vLLM data from PyPI and PyTorch; check it is current",
}


def build_parser(only: str | None = None, *, with_command: bool = False) -> argparse.ArgumentParser:
    """The parser. With ``only`` that subcommand is configured from its module, the one
    module imported (``hpcenv facts --json`` pays for nothing else); without, every
    command is listed with its help from :data:`COMMANDS` and no module is imported
    (``hpcenv --help``, ``--version``, an unknown command's error).

    A module that takes a command after ``--`` (``TAKES_COMMAND``) is configured knowing
    whether one was given (``configure(parser, with_command=...)``): ``sbatch PROFILE
    TARGET`` needs its TARGET only without one, and argparse cannot make a positional
    optional and still find it after options."""
    parser = argparse.ArgumentParser(
        prog="hpcenv",
        description="Build and validate ML environments (torch, flash-attn, vLLM, Ray, NCCL) "
        "on HPC clusters: facts -> profile -> plan -> build -> probes -> report.",
    )
    parser.add_argument("--version", action="version", version=f"hpcenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if only is not None:  # the other commands' parsers would cost ~0.3 ms each, unused
        _configure(sub.add_parser(only, help=COMMANDS[only]), only, with_command=with_command)
        return parser
    for name, help_line in COMMANDS.items():
        sub.add_parser(name, help=help_line)
    return parser


def _configure(parser: argparse.ArgumentParser, name: str, *, with_command: bool) -> None:
    mod = importlib.import_module(f"hpcenv.commands.{name}")
    parser.description = mod.__doc__
    takes = getattr(mod, "TAKES_COMMAND", False)
    if takes:
        mod.configure(parser, with_command=with_command)
    else:
        mod.configure(parser)
    parser.set_defaults(_run=mod.run, _takes_command=takes)


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """hpcenv's own arguments, and the user's command after the first ``--`` (kept word
    for word, never parsed: ``hpcenv run P -- python train.py --name "my run"``)."""
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


#: The signal that ended the run (SIGINT unless a handler below saw another).
_received: list[int] = []


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP: unwind like Ctrl-C (the first one; later ones wait for the
    cleanup, which holds them back while it stops children)."""
    if not _received:
        _received.append(signum)
        raise KeyboardInterrupt


def _handle_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _interrupt)
        except ValueError:  # not the main thread (hpcenv called as a library)
            return


def _say(line: str) -> None:
    """One line on stderr (a newline in a name or value is written as ``\\n``)."""
    from hpcenv.utils import redact
    from hpcenv.utils.output import one_line, visible

    print(f"hpcenv: {one_line(visible(redact.text(line)))}", file=sys.stderr)


_seen = [0]  # output.json_printed when this main() began


def _json_error(args: argparse.Namespace | None, exc: HpcenvError) -> None:
    """``--json``: a JSON object on stdout for an error too, unless the command printed
    its own (audit's verdict with the error, plan's)."""
    from hpcenv.utils import output

    if args is None or not getattr(args, "json", False) or output.json_printed[0] > _seen[0]:
        return
    output.print_json(
        {"command": args.command, "ok": False, "error": str(exc), "exit_code": exc.exit_code}
    )


#: The commands that read, decide and print (a node's facts, a plan, a lock's audit): their
#: own work is well under a second, and longer only while they wait on a subprocess (uv
#: resolving a hand-written file, ``audit --allow-build``); hpcenv's importing and their
#: parsing make no cyclic garbage worth the collector's passes, so it is paused while they
#: run (:func:`_pause_gc`).
QUICK = frozenset({"facts", "profiles", "show", "resolve", "plan", "audit"})


def main(argv: Sequence[str] | None = None) -> int:
    modes.private_umask()  # nothing made from here on is writable by the group or others
    args = list(sys.argv[1:] if argv is None else argv)
    paused = bool(args) and args[0] in QUICK and _pause_gc(at_exit=argv is None)
    try:
        return _main(args)
    finally:
        modes.restore_umask()  # a caller in this process (a test) gets its umask back
        if paused:
            gc.enable()


def _pause_gc(*, at_exit: bool) -> bool:
    """For a :data:`QUICK` command: the cyclic GC paused while it runs (True: it was on,
    and ``main`` turns it back on for a caller in this process), and, when hpcenv is the
    program (``argv`` from the command line), everything left frozen at exit, so the
    interpreter's last collection does not walk it only to free memory the exit frees
    anyway. atexit handlers and ``finally`` blocks still run, and files are closed by
    their ``with``. Together ~15% of an audit of a lock (bench/bench_startup.py)."""
    if at_exit:
        atexit.register(gc.freeze)
    was = gc.isenabled()
    gc.disable()
    return was


def _main(argv: list[str]) -> int:
    argv, command_argv = split_command(argv)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    _handle_signals()
    _received.clear()
    from hpcenv.utils import output

    _seen[0] = output.json_printed[0]
    args: argparse.Namespace | None = None
    try:
        parser = build_parser(only, with_command=command_argv is not None)
        args = parser.parse_args(argv)
        if command_argv is not None and not args._takes_command:
            parser.error(f"'hpcenv {args.command}' takes no command after '--'")
        args.command_argv = command_argv
        code: int = args._run(args)
        if _received:  # its KeyboardInterrupt was swallowed (a __del__, an at-fork hook)
            signum = _received[0]
            _say(
                f"stopped by {signal.Signals(signum).name}, which arrived where it could not "
                f"interrupt; '{args.command}' finished (exit {code}) before it took effect"
            )
            return 128 + signum
        return code
    except (KeyboardInterrupt, Interrupted):
        signum = _received[0] if _received else signal.SIGINT
        what = "interrupted" if signum == signal.SIGINT else "stopped"
        _say(f"{what} by {signal.Signals(signum).name}; everything it started was stopped")
        return 128 + signum
    except HpcenvError as exc:
        _json_error(args, exc)
        _say(f"error: {exc}")
        return exc.exit_code
    except BrokenPipeError:  # `hpcenv facts --json | head`
        return 0
    except OSError as exc:  # a path hpcenv was given cannot be read or written
        from hpcenv.utils import fsio  # only here: the fast commands do not import it

        known = fsio.write_failure(exc)
        if known is not None:
            _say(f"error: {known}")
            return known.exit_code
        where = f": {exc.filename}" if exc.filename else ""
        _say(f"error: {exc.strerror or exc}{where}")
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
