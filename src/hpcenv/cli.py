"""``hpcenv`` command line: thin. Each subcommand is one module in ``hpcenv.commands``
(``NAME``, ``HELP``, ``configure(parser)``, ``run(args) -> int``); errors are caught
here, once, and become one line on stderr and the error's exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from hpcenv import __version__, commands
from hpcenv.errors import HpcenvError


def _command_names() -> list[str]:
    """Subcommand module names, found without importing them."""
    here = Path(commands.__file__).parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def _command_modules(only: str | None = None) -> list[ModuleType]:
    names = [only] if only else _command_names()
    mods = [importlib.import_module(f"{commands.__name__}.{name}") for name in names]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 50), m.NAME))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only`` just that subcommand's module is imported (fast start:
    ``hpcenv facts --json`` must not pay for importing every other command)."""
    parser = argparse.ArgumentParser(
        prog="hpcenv",
        description="Build and validate ML environments (torch, flash-attn, vLLM, Ray, NCCL) "
        "on HPC clusters: facts -> profile -> plan -> build -> probes -> report.",
    )
    parser.add_argument("--version", action="version", version=f"hpcenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in _command_modules(only):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__)
        mod.configure(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in _command_names() else None
    args = build_parser(only).parse_args(argv)
    try:
        code: int = args._run(args)
        return code
    except HpcenvError as exc:
        print(f"hpcenv: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `hpcenv facts --json | head` (before OSError, its base)
        return 0
    except OSError as exc:  # a path hpcenv was given cannot be read or written
        where = f": {exc.filename}" if exc.filename else ""
        print(f"hpcenv: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hpcenv: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
