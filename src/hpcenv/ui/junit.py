"""JUnit XML for CI: one testcase per probe, plus one per failing rank of a multi-rank
probe, with ``failure``/``error``/``skipped`` elements.

CI systems (GitLab, Jenkins, GitHub test reporters) read this format; ReFrame writes
the same shape. Built with xml.etree, so text is escaped correctly; characters XML 1.0
cannot hold at all (the ANSI colour escapes of a rank's stderr, other control
characters) are removed first, ANSI sequences whole, so the file always parses. Text is
masked (``redact``) before it is escaped, and the file written through ``fsio``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from hpcenv.models.results import ProbeResult, RankResult, Status
from hpcenv.utils import fsio, redact
from hpcenv.utils.errors import BadInput

#: ANSI escape sequences: CSI (colours), OSC (window titles, links) and two-character ones.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: Characters XML 1.0 does not allow anywhere (not even as character references).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    """``text`` as XML 1.0 can hold it: ANSI sequences and other invalid characters
    removed, secrets masked."""
    return _NOT_XML.sub("", _ANSI.sub("", redact.text(text)))


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


def render(results: Sequence[ProbeResult], *, suite_name: str = "hpcenv probes") -> str:
    """The JUnit document as text (every text and attribute ``clean``)."""
    root = to_xml(results, suite_name=suite_name)
    for el in root.iter():
        if el.text:
            el.text = clean(el.text)
        for k, v in el.attrib.items():
            el.set(k, clean(v))
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def check_path(path: Path) -> Path:
    """Refuse a JUnit path that cannot be written before any probe runs."""
    if path.is_dir():
        raise BadInput(f"--junit {path}: is a directory; give a file name (e.g. {path}/junit.xml)")
    fsio.check_dir(path.parent)
    return path


def write(path: Path, results: Sequence[ProbeResult], *, suite_name: str = "hpcenv probes") -> None:
    fsio.write_text(path, render(results, suite_name=suite_name))
