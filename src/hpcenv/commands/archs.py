"""Show the GPU code binaries carry, read from their fatbin sections without a CUDA
toolkit, a GPU or importing them: SASS and PTX per compute capability (X.Y, with the
arch-specific 'a' or family 'f' suffix), entries per arch, and which archs the library
was built for ("full") versus a few special kernels ("partial"). PATH is a shared
library, a wheel (its .so members are read one at a time; the wheel is never unpacked),
a venv or a site-packages directory (every .so, grouped by the distribution that
installed it). Exit 2 on a path that cannot be read."""

from __future__ import annotations

import argparse

from hpcenv.commands import add_json_option, print_json


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="shared library, wheel, venv or site-packages directory",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from hpcenv.binaries import archs

    found = archs.scan_paths(args.paths)
    if args.json:
        print_json(found.to_json())
        return 0
    from rich.table import Table
    from rich.text import Text

    from hpcenv.ui import report

    table = Table(title=f"GPU code in {', '.join(args.paths)}", title_justify="left")
    table.caption = "SASS/PTX: compute capabilities (a: arch-specific, f: family)"
    for col in ("distribution", "library", "SASS", "PTX", "entries"):
        table.add_column(col, overflow="fold")
    for f in found.files:
        code = f.code
        sass = Text(", ".join(code.full_sass) or "-")
        if code.partial_sass:
            sass.append(f"  (+ few: {', '.join(code.partial_sass)})", style="dim")
        ptx = Text(", ".join(f"{a} (ISA {code.ptx_isa[a]})" for a in code.ptx) or "-")
        table.add_row(
            str(f.dist) if f.dist else "-",
            f.label,
            sass,
            ptx,
            str(len(code.entries)),
        )
    report.console.print(table)
    report.console.print(
        f"{len(found.files)} of {found.libraries} shared libraries carry GPU code"
        + ("" if found.libraries else " (no shared library found)")
    )
    for _path, error in found.errors:  # each error names its file
        report.err_console.print(Text(f"could not read: {error}", style="yellow"), soft_wrap=True)
    return 0
