"""Reports in job logs: when stdout is not a terminal (sbatch writes it to a file), the
probe and stage reports are one line per probe or stage with details indented beneath,
never a table squeezed into 80 columns; a terminal keeps the tables."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from hpcenv.models.results import ProbeResult, RankResult, Status
from hpcenv.ui import report

LONG = "values: gloo allreduce 1K..64M x 2 ranks, every element correct, " + "x" * 120


def _results() -> list[ProbeResult]:
    ok = RankResult(rank=0, host="node1", status=Status.PASS, summary=LONG)
    bad = RankResult(rank=1, host="node2", status=Status.FAIL, summary="hung", remedy="exclude")
    return [
        ProbeResult(name="nccl", status=Status.FAIL, summary=LONG, remedy="check node2",
                    ranks=(ok, bad), seconds=3.21),
        ProbeResult(name="vllm", status=Status.SKIP, summary="not installed", remedy="add it"),
    ]  # fmt: skip


def _printed(terminal: bool) -> str:
    buf = io.StringIO()
    out = report.MaskingConsole(file=buf, width=80, force_terminal=terminal, color_system=None)
    report.print_probe_results(_results(), title="probes in local", out=out)
    report.print_stages(
        [{"stage": "build", "status": "pass", "seconds": 0.4, "summary": LONG}],
        title="doctor: local",
        out=out,
    )
    return buf.getvalue()


def test_a_log_gets_one_line_per_probe_and_details_beneath() -> None:
    lines = _printed(terminal=False).splitlines()
    assert lines[0] == "probes in local"
    assert lines[1] == f"  nccl: fail (3.2s) {LONG}"  # whole, past 80 columns
    assert "      remedy: check node2" in lines
    assert "      rank 1 fail: node2: hung" in lines and "        remedy: exclude" in lines
    assert "  vllm: skip (0.0s) not installed" in lines and "      remedy: add it" in lines
    assert f"  build: pass (0.4s) {LONG}" in lines
    assert not any(c in "".join(lines) for c in "│┃━─")


def test_a_terminal_keeps_the_tables() -> None:
    text = _printed(terminal=True)
    assert "┃" in text or "│" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_the_probe_report_in_a_non_tty_reads_one_probe_per_line(probe_python: Path) -> None:
    """``hpcenv probe`` as make demo runs it, stdout a pipe (as in a job log)."""
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "probe", "imports", "torch", "vllm",
         "--env", str(probe_python.parent.parent)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("probes in "))
    probes = [
        line for line in lines[start + 1 :] if line.startswith("  ") and not line.startswith("    ")
    ]
    assert [p.split(":")[0].strip() for p in probes] == ["imports", "torch", "vllm"]
    assert probes[1].startswith("  torch: pass (") and "CPU matmul correct" in probes[1]
