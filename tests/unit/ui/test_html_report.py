"""``ui/html_report``: what it reads from hpcenv's recorded reports (tests/data/reports),
and that the page it draws is escaped and self-contained. The page in a browser is
``tests/integration/probes/test_html_report.py``."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcenv.models import sweep
from hpcenv.ui import html_report
from support import DATA


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "reports" / name).read_text())
    return data


def test_series_per_node_and_per_pair_from_the_finder() -> None:
    found = sweep.series(_load("pairs_3node.json"))
    assert [s.label for s in found] == ["nccl node1", "nccl node2", "nccl node3",
                                        "nccl node2+node3", "nccl node1+node3",
                                        "nccl node1+node2"]  # fmt: skip
    assert [len(s.points) for s in found] == [11, 11, 11, 1, 1, 1]
    assert found[0].points[0].nbytes == 1024 and found[0].points[-1].nbytes == 1 << 20
    assert found[3].hosts == ("node2", "node3") and found[3].points[0].nbytes == 8 << 20


def test_the_matrix_is_symmetric_and_names_the_excluded_node() -> None:
    m = html_report.matrix(_load("pairs_3node.json"))
    assert m is not None and m.hosts == ("node1", "node2", "node3")
    assert m.excluded == {"node3"}
    assert m.busbw["node1", "node2"] == m.busbw["node2", "node1"] == 0.3221
    assert html_report.matrix(_load("nccl_2ranks.json")) is None


def test_the_expected_line_only_where_a_profile_declares_one() -> None:
    report = _load("nccl_2ranks.json")
    assert '<line class="expected"' not in html_report.render(report, title="t")
    page = html_report.render(report, title="t", expected_busbw_gbps=25.0)
    assert page.count('<line class="expected"') == 1 and "expected 25 GB/s" in page
    # the axis reaches the line even when every point is far below it
    assert re.search(r'font-size="11">50</text>', page)


def test_hostile_names_are_text_and_nothing_is_fetched_or_run() -> None:
    report = copy.deepcopy(_load("pairs_3node.json"))
    evil = '<script>alert(1)</script><img src="http://x/">'
    report["results"][0]["name"] = f"nccl {evil}"
    report["results"][1]["summary"] = evil
    report["pairs"]["nodes"][0]["host"] = evil
    report["explanation"]["cause"] = evil
    page = html_report.render(report, title=evil)
    assert "<script" not in page and "<img" not in page and 'src="http' not in page
    assert page.count("&lt;script&gt;") >= 5
    assert "default-src 'none'" in page  # a browser refuses any script or request anyway


def test_a_report_without_nccl_draws_no_chart_and_keeps_the_rest() -> None:
    report = {"status": "fail", "probes": [{"name": "torch", "status": "fail", "seconds": 1.5,
              "summary": "no CUDA", "remedy": "load the driver"}],
              "stages": [{"stage": "build", "seconds": 12.0, "summary": "built"}]}  # fmt: skip
    page = html_report.render(report, title="doctor")
    assert '<svg class="chart"' not in page
    assert "load the driver" in page and '<svg class="timings"' in page and "12.0 s" in page


def test_sizes_read_like_nccl_tests() -> None:
    assert [sweep.size_text(n) for n in (512, 1024, 3 << 19, 1 << 30)] == [
        "512B", "1K", "1.5M", "1G"
    ]  # fmt: skip


def test_a_report_that_is_not_an_object_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hpcenv.cli import main

    bad = tmp_path / "r.json"
    bad.write_text("[1, 2]")
    assert main(["report", str(bad), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"hpcenv: error: {bad}: a JSON object expected (hpcenv's --json report), not list\n"
    )
    bad.write_text("{not json")
    assert main(["report", str(bad), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hpcenv: error: {bad}: not JSON (line 1") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()
