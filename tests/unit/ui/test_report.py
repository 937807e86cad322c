"""The people-facing probe table: every probe, its status, metrics and the remedy text
verbatim (rich markup in messages must not be eaten), failing ranks listed."""

from __future__ import annotations

import io

from hpcenv.models.results import RankResult, Status, gather
from hpcenv.ui import report


def test_table_shows_status_metrics_and_literal_remedy() -> None:
    ranks = [
        RankResult(
            rank=0,
            host="nid1",
            status=Status.PASS,
            summary="ok",
            metrics={"busbw_gbps_at_max": 21.5, "wrong": 0, "world_size": 2},
        ),
        RankResult(
            rank=1,
            host="nid2",
            status=Status.FAIL,
            summary="#wrong 3",
            remedy="set [env] NCCL_PROTO=^LL128",
        ),
    ]
    results = [
        gather("nccl", ranks, seconds=2.0),
        gather(
            "vllm",
            [
                RankResult(
                    rank=0,
                    host="nid1",
                    status=Status.SKIP,
                    summary="not installed",
                    remedy="add it to [packages]",
                )
            ],
        ),
    ]
    buf = io.StringIO()
    report.print_probe_results(
        results, out=report.MaskingConsole(file=buf, width=250, color_system=None)
    )
    text = buf.getvalue()
    assert "nccl" in text and "fail" in text and "skip" in text
    assert "busbw_gbps_at_max=21.5" in text
    assert "set [env] NCCL_PROTO=^LL128" in text
    assert "add it to [packages]" in text
    assert "rank 1" in text and "nid2: #wrong 3" in text


def _recorded_sweep() -> list[object]:
    """The real 2-rank sweep of tests/data/reports/nccl_2ranks.json as probe results."""
    import json

    from support import DATA

    data = json.loads((DATA / "reports" / "nccl_2ranks.json").read_text())
    r = data["results"][0]
    ranks = [RankResult.from_json(x, rank=x["rank"], host=x["host"]) for x in r["ranks"]]
    return [gather("nccl", ranks, seconds=r["seconds"])]


def test_a_terminal_shows_the_nccl_sweep_per_size() -> None:
    out = report.MaskingConsole(file=io.StringIO(), force_terminal=True, width=120)
    report.print_probe_results(_recorded_sweep(), out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "nccl allreduce sweep (vm)" in text
    rows = [line.split() for line in text.splitlines() if line.strip().endswith(" 0")]
    sizes = [row[0].split("m")[-1] for row in rows if len(row) >= 5]  # past colour codes
    assert len(rows) == 13 and sizes[0].endswith("1K") and sizes[-1].endswith("4M"), text
    assert "1.36" in text.splitlines()[-1]  # busbw at 4M, as the probe measured it


def test_a_log_gets_nccl_tests_lines_for_the_sweep() -> None:
    out = report.MaskingConsole(file=io.StringIO(), force_terminal=False, width=80)
    report.print_probe_results(_recorded_sweep(), out=out)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    at = lines.index("nccl allreduce sweep (vm)")
    assert lines[at + 1].split() == [
        "size",
        "time",
        "us",
        "algbw",
        "GB/s",
        "busbw",
        "GB/s",
        "#wrong",
    ]
    assert lines[at + 2].split()[0] == "1K" and lines[-1].split()[0] == "4M"
    assert lines[-1].split()[3] == "1.36" and len(lines) == at + 2 + 13
