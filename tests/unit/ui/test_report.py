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
