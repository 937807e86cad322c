"""``hpcenv`` command line: thin. Each subcommand is one module in ``hpcenv.commands``
(``NAME``, ``HELP``, ``configure(parser)``, ``run(args) -> int``); errors are caught
here, once, and become one line on stderr (masked: ``redact``) and the error's exit code.

SIGTERM and SIGHUP (a batch system's cancel, an SSH disconnect) are handled like
Ctrl-C: they raise ``KeyboardInterrupt`` where hpcenv is, so every ``finally`` and
shutdown runs (children and their sessions stopped, temporary directories removed),
then hpcenv says which signal ended it and exits with 128 + its number.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from hpcenv import __version__, commands
from hpcenv.utils import modes
from hpcenv.utils.errors import HpcenvError, Interrupted


def _command_names() -> list[str]:
    """Subcommand module names, found without importing them."""
    here = Path(commands.__file__).parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def _command_modules(only: str | None = None) -> list[ModuleType]:
    names = [only] if only else _command_names()
    mods = [importlib.import_module(f"{commands.__name__}.{name}") for name in names]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 50), m.NAME))


def build_parser(only: str | None = None, *, with_command: bool = False) -> argparse.ArgumentParser:
    """The parser; with ``only`` just that subcommand's module is imported (fast start:
    ``hpcenv facts --json`` must not pay for importing every other command).

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
    for mod in _command_modules(only):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__)
        takes = getattr(mod, "TAKES_COMMAND", False)
        if takes:
            mod.configure(p, with_command=with_command)
        else:
            mod.configure(p)
        p.set_defaults(_run=mod.run, _takes_command=takes)
    return parser


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
    from hpcenv.utils import redact
    from hpcenv.utils.output import visible

    print(f"hpcenv: {visible(redact.text(line))}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv, command_argv = split_command(list(sys.argv[1:] if argv is None else argv))
    only = argv[0] if argv and argv[0] in _command_names() else None
    _handle_signals()
    modes.private_umask()  # nothing made from here on is writable by the group or others
    _received.clear()
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
