"""Print what this node is: arch, glibc, Python, CPUs, memory, NVIDIA driver and GPUs,
SLURM allocation, libfabric providers, NCCL net plugin, loaded modules. Never imports
torch. With --facts FILE, shows a recorded file instead."""

from __future__ import annotations

import argparse

from hpcenv.commands import add_facts_option, add_json_option, print_json


def configure(parser: argparse.ArgumentParser) -> None:
    add_json_option(parser)
    add_facts_option(parser)
    parser.add_argument(
        "--scratch",
        action="store_true",
        help="also list node-local scratch candidates ($TMPDIR, /local, /scratch, /srv/local*, "
        "/tmp): filesystem and free space (hpcenv profile init reads them)",
    )


def run(args: argparse.Namespace) -> int:
    from hpcenv.facts import collect as facts
    from hpcenv.models.facts import to_json

    found = facts.for_args(args.facts) if args.facts else facts.collect(with_scratch=args.scratch)
    if args.json:
        print_json(to_json(found))
    else:
        from hpcenv.ui import report

        report.print_facts(found)
    return 0
