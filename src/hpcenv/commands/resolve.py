"""Choose the torch build (version, CUDA variant, index) this node can really run, its
torchvision/torchaudio (the release pair, of that variant) and the flash-attn action,
with the reasons. Reads this host's facts, or --facts FILE. Exit
code 3 and one line when no variant can run; with --json the object then has
"backend": null and an "error". A range (>=2.9) picks the newest release that runs here.
A release hpcenv's data lacks is looked up on the PyTorch index and PyPI (a few seconds at
most): its variants only from the index's listing of it, its GPU code inferred from the
nearest known release, with a warning; offline (--offline) such a release is exit 3, never
a guess. A release with no wheel for the Python (--python, else the facts') or for the
node's glibc is exit 3 naming the fix; every fix named is one that runs here. Exit 2 is
only for a malformed spec or a --backend the release does not publish for this CPU arch."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from hpcenv.commands import add_facts_option, add_json_option, print_json
from hpcenv.decide import flashattn, torch_fit
from hpcenv.decide.companions import Companions
from hpcenv.decide.torch_choice import pair_of
from hpcenv.decide.torch_variant import index_base, raise_if_none
from hpcenv.facts import collect
from hpcenv.knowledge.lookup import Lookup, pypi_base
from hpcenv.models.facts import Facts
from hpcenv.models.plan import FlashAttnChoice
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.profile.schema import BACKEND, FlashAttnSection
from hpcenv.project.torch_wish import choice_for, runs_on
from hpcenv.utils.errors import BadInput, NoCompatibleBuild


def configure(parser: argparse.ArgumentParser) -> None:
    add_facts_option(parser)
    parser.add_argument("--torch", required=True, metavar="SPEC", help="e.g. '==2.9.1', '>=2.9'")
    parser.add_argument(
        "--backend", default="auto", metavar="PIN", help="'auto' (default), 'cpu' or 'cuNNN'"
    )
    parser.add_argument(
        "--index-url",
        metavar="URL",
        help="base of the PyTorch index (default: $HPCENV_TORCH_INDEX_URL or download.pytorch.org)",
    )
    parser.add_argument(
        "--python",
        metavar="X.Y",
        help="Python of the env (default: the facts' Python); torch must have a wheel for it",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="never look up a release hpcenv's data lacks (such a release is then exit 3)",
    )
    parser.add_argument(
        "--flash-attn-version",
        default=FlashAttnSection().version,
        metavar="VERSION",
        help="flash-attn version to decide for",
    )
    add_json_option(parser)


def torch_json(choice: TorchChoice) -> dict[str, Any]:
    """The ``torch`` object of the resolve contract (docs/design.md)."""
    out: dict[str, Any] = {
        "version": choice.version,
        "backend": choice.backend,
        "index_url": choice.index_url,
        "reasons": list(choice.reasons),
        "warnings": list(choice.warnings),
    }
    if choice.error:
        out["error"] = choice.error
    return out


def flash_json(fa: FlashAttnChoice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "action": fa.action,
        "cuda_archs": list(fa.cuda_archs),
        "reason": fa.reason,
        "version": fa.version,
    }
    if fa.action == "build":
        out |= {"max_jobs": fa.max_jobs, "nvcc_threads": fa.nvcc_threads}
    if fa.wheel_url:
        out["wheel_url"] = fa.wheel_url
    return out


def pair_json(pair: Companions | None) -> dict[str, Any] | None:
    """torchvision/torchaudio of the chosen torch's release pair, of its variant (None when
    nothing runs; a None version: none is published for that torch, ``notes`` say why)."""
    if pair is None:
        return None
    return {
        "torchvision": _labelled(pair, "torchvision"),
        "torchaudio": _labelled(pair, "torchaudio"),
        "source": pair.source,
        "notes": list(pair.reasons),
    }


def _labelled(pair: Companions, name: str) -> str | None:
    version = pair.version_of(name)
    return f"{version}+{pair.label}" if version and pair.label else version


def run(args: argparse.Namespace) -> int:
    if not BACKEND.match(args.backend):
        raise BadInput(
            f"--backend {args.backend!r} must be 'auto', 'cpu' or a CUDA variant like 'cu126'"
        )
    found = collect.for_args(args.facts)
    base = (args.index_url or index_base()).rstrip("/")
    lookup = None if args.offline else Lookup(index_base=base, pypi=pypi_base())
    choice = choice_for(found, args.torch, pin=args.backend, index_base=base, lookup=lookup)
    choice = _fits_node(choice, found, args.python)
    python = args.python or ".".join((found.python or "3.11").split(".")[:2])
    if choice.error:
        fa = FlashAttnChoice(
            action="skip", reason="no torch build can run on this node", version=None
        )
    else:
        fa = flashattn.decide(
            found, choice, mode="auto", version=args.flash_attn_version, python=python
        )
    pair = pair_of(choice.version, choice.backend) if choice.version and choice.backend else None
    if args.json:
        print_json(
            {
                "torch": torch_json(choice),
                "flash_attn": flash_json(fa),
                "companions": pair_json(pair),
            }
        )
    else:
        _print(choice, fa, found.source or "this host", pair)
    raise_if_none(choice)
    return 0


def _fits_node(choice: TorchChoice, found: Facts, python: str | None) -> TorchChoice:
    """The choice, or no build and the error when its release has no wheel for the Python
    (``--python``, else the facts') or the node's glibc (``torch_fit``)."""
    if choice.error or not choice.version or not found.arch:
        return choice
    try:
        torch_fit.check(
            choice.version,
            found.arch,
            python or found.python,
            found.glibc,
            where=found.source or "this host",
            python_where="--python" if python else f"the Python of {found.source or 'this host'}",
            runs=runs_on(found),
        )
    except NoCompatibleBuild as exc:
        return replace(choice, backend=None, error=str(exc))
    return choice


def _print(choice: TorchChoice, fa: FlashAttnChoice, source: str, pair: Companions | None) -> None:
    from rich.table import Table  # only here: --json does not pay for rich
    from rich.text import Text

    from hpcenv.ui import report

    table = Table(title=f"torch for {source}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("torch", Text(f"{choice.version} ({choice.backend or 'none runs'})"))
    table.add_row("index", Text(choice.index_url or "-"))
    for r in choice.reasons:
        table.add_row("because", Text(r))
    for w in choice.warnings:
        table.add_row("warning", Text(w, style="yellow"))
    for name in ("torchvision", "torchaudio") if pair else ():
        assert pair is not None
        version = _labelled(pair, name)
        said = f"{version} (torch {pair.torch}'s pair)" if version else pair.reason_of(name)
        table.add_row(name, Text(said or "-"))
    table.add_row("flash-attn", Text(f"{fa.action}: {fa.reason}"))
    report.console.print(table)
