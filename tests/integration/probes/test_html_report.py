"""The HTML report in a real browser: ``hpcenv probe nccl --html`` on a real 2-rank sweep
(gloo on CPU torch) and ``hpcenv report`` of the bad-node finder's report recorded on the
3-node namespace cluster (tests/data/reports/README.md), opened in headless Chromium
(Debian's ``chromium``): the rendered DOM holds the charts, the series, the expected
busbw line and the pair matrix with the excluded node; the console is silent (the page's
Content-Security-Policy makes any script or fetch a console error, which the last test
proves the check sees); a screenshot is kept under the test's tmp dir."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import DATA, REPO, require
from support.browser import browser, console_of, open_page


def _hpcenv(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HPCENV_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hpcenv", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300, check=False)  # fmt: skip


@pytest.mark.slow
def test_probe_nccl_html_shows_the_sweep_in_chromium(probe_python: Path, tmp_path: Path) -> None:
    """On a real pseudo-terminal (util-linux ``script``): the probes' progress bar and the
    sweep's table on the screen, the page written beside it and drawn by Chromium."""
    browser()
    require("script", shutil.which("script") is not None, "apt-get install util-linux")
    prof = tmp_path / "t.toml"
    prof.write_text('[profile]\nname = "t"\n[probes]\nnccl_expect_busbw_gbps = 0.5\n')
    page = tmp_path / "nccl.html"
    argv = [sys.executable, "-m", "hpcenv", "probe", "nccl", "--env", str(probe_python),
            "--profile", str(prof), "--ranks", "2", "--nccl-sizes", "1K:1M", "--html", str(page)]
    env = {"HPCENV_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "TERM": "xterm", "COLUMNS": "160"}  # fmt: skip
    done = subprocess.run(["script", "-qec", shlex.join(argv), "/dev/null"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout)
    assert done.returncode == 0, screen
    assert "probes" in screen and "1/1" in screen and "━" in screen  # the progress bar
    assert "nccl allreduce sweep" in screen
    sweep = screen.split("nccl allreduce sweep", 1)[1].splitlines()
    assert [row.split()[0] for row in sweep[2:13]] == [
        "1K", "2K", "4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M"
    ]  # fmt: skip
    dom, console = open_page(page, tmp_path)
    assert console == []
    assert dom.count('<svg class="chart"') == 2
    assert 'data-metric="busbw"' in dom and 'data-metric="algbw"' in dom
    assert dom.count('<g class="series" data-series="nccl">') == 2
    assert dom.count("<circle") == 2 * 11  # 1K..1M, one per size, in each chart
    assert dom.count('<line class="expected"') == 1 and "expected 0.5 GB/s" in dom
    assert "<script" not in dom and "http://" not in dom.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.slow
def test_report_of_the_bad_node_finder_marks_the_excluded_node(tmp_path: Path) -> None:
    browser()
    page = tmp_path / "pairs.html"
    done = _hpcenv("report", str(DATA / "reports" / "pairs_3node.json"), "--html", str(page),
                   "--json", home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["excluded"] == ["node3"] and said["pair_matrix"] is True
    dom, console = open_page(page, tmp_path)
    assert console == []
    series = re.findall(r'<g class="series" data-series="([^"]+)">', dom)
    assert series[:6] == ["nccl node1", "nccl node2", "nccl node3",
                          "nccl node2+node3", "nccl node1+node3", "nccl node1+node2"]  # fmt: skip
    assert "<line class=\"expected\"" not in dom  # the recorded profile declared none
    matrix = dom.split('<table class="pairs">', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<th class="excluded">([^<]+)</th>', matrix) == ["node3", "node3"]
    assert matrix.count('class="pair excluded"') == 4  # node3's row and column
    assert re.search(r'class="pair"[^>]*>0\.322<', matrix)  # node1+node2, not excluded
    assert "What the job died of" in dom


@pytest.mark.slow
def test_the_console_check_sees_a_script_or_a_fetch(tmp_path: Path) -> None:
    """The check above could not fail if Chromium logged nothing: a report page with a
    script and an image added logs both as Content-Security-Policy refusals."""
    page = tmp_path / "tampered.html"
    done = _hpcenv("report", str(DATA / "reports" / "nccl_2ranks.json"), "--html", str(page),
                   home=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page.write_text(
        page.read_text().replace(
            "</body>", '<img src="http://127.0.0.1:9/x.png"><script>console.log(1)</script></body>'
        )
    )
    console = console_of(page, tmp_path)
    assert all("Content Security Policy" in c for c in console), console
    assert any("Loading the image" in c for c in console), console
    assert any("inline script" in c for c in console), console


def test_sbatch_html_without_wait_is_one_line_exit_2(tmp_path: Path) -> None:
    done = _hpcenv("sbatch", "local", "nccl", "--html", str(tmp_path / "r.html"), home=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "hpcenv: error: --html writes the finished job's report: use it with --wait\n"
    )
