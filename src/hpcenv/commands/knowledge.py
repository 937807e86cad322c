"""Keep hpcenv's compatibility data current, read from the artifacts themselves.

'update' regenerates the GENERATED knowledge files: torch_pypi.toml (every torch release on
PyPI from 2.1 on, per CPU arch: the build PyPI carries, read from torch/version.py, and the
SASS/PTX in torch/lib/libtorch_cuda.so, all through HTTP range requests), vllm.toml (vLLM's
minimum compute capability from its sdists) and, with --index, torch_index.toml (the
variants a PyTorch index or site mirror publishes and their GPU code). Unchanged inputs give
byte-identical files. 'check' exits 7 with one line when PyPI has a torch or vLLM release
the data lacks. --json: one object (update: each file written; check: the line), an error
as cli's {"command", "ok": false, "error", "exit_code"}."""

from __future__ import annotations

import argparse

from hpcenv.commands import add_json_option, print_json, print_text


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("update", help="regenerate the generated data files from the artifacts")
    up.add_argument(
        "--pypi", default="https://pypi.org", metavar="URL", help="PyPI or a mirror of it"
    )
    up.add_argument(
        "--index",
        metavar="URL",
        help="a PyTorch index or site mirror base (e.g. https://download.pytorch.org/whl): "
        "also write torch_index.toml from it",
    )
    up.add_argument("--out", metavar="DIR", help="write here instead of hpcenv's own data")
    up.add_argument("--no-vllm", action="store_true", help="do not regenerate vllm.toml")
    up.add_argument(
        "--dependency-metadata",
        action="store_true",
        help="also regenerate dependency_metadata.toml (the requirements of packages whose "
        "setup.py imports torch, read from each release's sdist: uv resolves them unbuilt)",
    )
    add_json_option(up)
    check = sub.add_parser("check", help="exit 7 when PyPI has a release the data lacks")
    check.add_argument(
        "--pypi", default="https://pypi.org", metavar="URL", help="PyPI or a mirror of it"
    )
    add_json_option(check)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hpcenv.knowledge.refresh import update

    if args.action == "check":
        line = update.check(args.pypi)
        if args.json:
            print_json({"schema": 1, "current": True, "pypi": args.pypi, "summary": line})
        else:
            print_text(f"{line}\n")
        return 0
    from hpcenv.ui import progress, report

    out = Path(args.out) if args.out else None
    files = []
    with progress.Progress(report.err_console) as shown:
        found = update.update_all(
            pypi=args.pypi,
            index=args.index,
            out=out,
            vllm=not args.no_vllm,
            log=shown.note,
            expect=shown.task,
        )
        if args.dependency_metadata:
            from hpcenv.knowledge import build_isolation
            from hpcenv.knowledge.refresh import dependency_metadata as deps

            found = [
                *found,
                deps.update_dependency_metadata(
                    build_isolation.rows(), args.pypi, since=deps.SINCE, out=out, log=shown.note
                ),
            ]
    for written in found:
        files.append({"path": str(written.path), "rows": written.rows, "changed": written.changed})
        if not args.json:
            state = "changed" if written.changed else "unchanged"
            print_text(f"{written.path}: {written.rows} rows, {state}\n")
    if args.json:
        print_json({"schema": 1, "pypi": args.pypi, "index": args.index, "files": files})
    return 0
