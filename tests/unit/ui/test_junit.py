"""JUnit XML: well-formed, one testcase per probe plus one per failing rank, with
failure / error / skipped elements and counts CI tools read."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from hpcenv.models.results import RankResult, Status, gather
from hpcenv.ui import junit


def rr(k: int, status: Status, summary: str = "ok", remedy: str = "") -> RankResult:
    return RankResult(
        rank=k,
        host=f"nid{k}",
        status=status,
        summary=summary,
        remedy=remedy,
        metrics={"busbw_gbps_at_max": 1.5},
    )


def results() -> list:
    return [
        gather("torch", [rr(0, Status.PASS)], seconds=1.25),
        gather("gpu-health", [rr(0, Status.SKIP, "no GPU", "run on a GPU node")]),
        gather(
            "nccl", [rr(0, Status.PASS), rr(1, Status.FAIL, "#wrong 3 <&>", "NCCL_PROTO=^LL128")]
        ),
        gather("ofi", [rr(0, Status.ERROR, "crashed", "read the stderr tail")]),
    ]


def test_junit_is_well_formed_with_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "out" / "probes.xml"
    junit.write(path, results(), suite_name="hpcenv probes local")
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"torch", "gpu-health", "nccl", "nccl[rank 1@nid1]", "ofi"}
    assert cases["torch"].find("failure") is None and cases["torch"].get("time") == "1.250"
    skipped = cases["gpu-health"].find("skipped")
    assert skipped is not None and "run on a GPU node" in (skipped.get("message") or "")
    failure = cases["nccl"].find("failure")
    assert failure is not None and "#wrong 3 <&>" in (failure.get("message") or "")
    assert cases["nccl[rank 1@nid1]"].find("failure") is not None
    assert cases["ofi"].find("error") is not None
    assert suite.get("tests") == "5"
    assert suite.get("failures") == "2"
    assert suite.get("errors") == "1"
    assert suite.get("skipped") == "1"
    assert path.read_text().startswith("<?xml")
