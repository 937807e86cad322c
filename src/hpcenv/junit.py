"""JUnit XML for CI: one testcase per probe, plus one per failing rank of a multi-rank
probe, with ``failure``/``error``/``skipped`` elements.

CI systems (GitLab, Jenkins, GitHub test reporters) read this format; ReFrame writes
the same shape. Built with xml.etree, so text is escaped correctly.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from hpcenv.results import ProbeResult, RankResult, Status


def _outcome(case: ET.Element, status: Status, summary: str, remedy: str, text: str) -> None:
    message = f"{summary} -- {remedy}" if remedy else summary
    if status is Status.FAIL:
        ET.SubElement(case, "failure", message=message, type="fail").text = text
    elif status is Status.ERROR:
        ET.SubElement(case, "error", message=message, type="error").text = text
    elif status is Status.SKIP:
        ET.SubElement(case, "skipped", message=message)


def _rank_case(suite: ET.Element, classname: str, probe: str, r: RankResult) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=classname, name=f"{probe}[rank {r.rank}@{r.host}]", time="0"
    )
    _outcome(case, r.status, r.summary, r.remedy, r.stderr_tail or json.dumps(r.serialize()))


def to_xml(results: Sequence[ProbeResult], *, suite_name: str = "hpcenv probes") -> ET.Element:
    root = ET.Element("testsuites", name=suite_name)
    suite = ET.SubElement(root, "testsuite", name=suite_name)
    classname = "hpcenv.probes." + suite_name.replace(" ", "_")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total = 0.0
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname=classname, name=r.name, time=f"{r.seconds:.3f}"
        )
        _outcome(case, r.status, r.summary, r.remedy, json.dumps(r.serialize(), indent=1))
        ET.SubElement(case, "system-out").text = json.dumps(dict(r.metrics))
        cases = [r.status]
        if len(r.ranks) > 1:
            for rank in r.ranks:
                if rank.status.failed:
                    _rank_case(suite, classname, r.name, rank)
                    cases.append(rank.status)
        total += r.seconds
        for s in cases:
            counts["tests"] += 1
            counts["failures"] += s is Status.FAIL
            counts["errors"] += s is Status.ERROR
            counts["skipped"] += s is Status.SKIP
    for el in (root, suite):
        for k, v in counts.items():
            el.set(k, str(v))
        el.set("time", f"{total:.3f}")
    return root


def write(path: Path, results: Sequence[ProbeResult], *, suite_name: str = "hpcenv probes") -> None:
    tree = ET.ElementTree(to_xml(results, suite_name=suite_name))
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
