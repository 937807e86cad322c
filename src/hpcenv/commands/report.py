"""Turn a JSON report of hpcenv (``probe --json``, ``probe --pairs --json``, ``doctor
--json``, a job's report.json from ``sbatch --wait``, ``build --json``) into one
self-contained HTML file: the NCCL sweeps as charts (busbw and algbw against message
size, per node and per pair), the bad-node finder's pair matrix, the probe table, the
build's timings, the job's explanation. Inline SVG, no script, nothing fetched."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcenv.commands import add_json_option, print_json, print_text


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS.json", help="a JSON report hpcenv wrote")
    parser.add_argument("--html", metavar="FILE", required=True, help="write the HTML report here")
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="draw this profile's probes.nccl_expect_busbw_gbps as the expected busbw "
        "(default: the report's own profile when it names one that loads)",
    )
    add_json_option(parser)


def expected_busbw(name: str | None) -> float | None:
    """The profile's declared expected busbw (GB/s), or None (none declared, none named)."""
    if not name:
        return None
    from hpcenv.profile import schema as profile

    value = profile.load(name).probes.nccl_expect_busbw_gbps
    return value or None


def _own_profile(report: Mapping[str, Any]) -> str | None:
    """The profile the report names (``doctor``'s ``profile``), when it loads; a report
    from another machine may name one this checkout does not have: no line, then."""
    from hpcenv.profile import schema as profile
    from hpcenv.utils.errors import HpcenvError

    name = report.get("profile")
    if not isinstance(name, str) or not name:
        return None
    try:
        profile.load(name)
    except HpcenvError:
        return None
    return name


def write_html(
    path: Path, report: Mapping[str, Any], *, title: str, expected: float | None
) -> dict[str, Any]:
    """Write the page (``expected``: the profile's expected busbw, GB/s); what it drew,
    for ``--json`` and the one line on stderr. Shared by ``probe``, ``doctor`` and
    ``sbatch --wait`` (``--html``)."""
    from hpcenv.models import sweep
    from hpcenv.ui import html_report

    expected = expected or None
    html_report.write(path, report, title=title, expected_busbw_gbps=expected)
    m = html_report.matrix(report)
    return {
        "html": str(path),
        "nccl_series": [s.label for s in sweep.series(report)],
        "pair_matrix": bool(m and m.hosts),
        "excluded": sorted(m.excluded) if m else [],
        "probes": len(sweep.results_of(report)),
        "expected_busbw_gbps": expected,
    }


def run(args: argparse.Namespace) -> int:
    from hpcenv.ui import html_report
    from hpcenv.utils import fsio
    from hpcenv.utils.errors import BadInput

    path = Path(args.results)
    data = fsio.load_json(path, "results file", "give a file hpcenv wrote with --json")
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a JSON object expected (hpcenv's --json report), not "
                       f"{type(data).__name__}")  # fmt: skip
    html_report.check_path(Path(args.html))
    expected = expected_busbw(args.profile or _own_profile(data))
    done = write_html(Path(args.html), data, title=f"hpcenv report: {path.name}", expected=expected)
    if args.json:
        print_json({"schema": 1, "results": str(path), **done})
    else:
        drew = ", ".join(done["nccl_series"]) or "no NCCL sweep"
        print_text(f"wrote {done['html']} ({drew}; {done['probes']} probe results)\n")
    return 0
