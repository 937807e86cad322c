"""The smaller findings of the hardening issue (item 13), each on the real CLI or code:

- ``--env /path/to/python`` wrote the results next to the interpreter;
- JUnit XML was invalid when a rank's stderr held ANSI colour escapes;
- the imports probe skipped ``name @ URL`` requirements;
- arguments were checked after the slow work (``doctor --ranks 0`` after the build,
  ``--junit /tmp`` after all probes);
- rank files (written by the probes, in a results directory that may be shared) held
  secrets from the job's environment.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hpcenv.models.results import RankResult, Status, gather
from hpcenv.runner import probes as runner
from hpcenv.ui import junit
from support.buildkit import hpcenv as _cli
from support.probe_env import load_probe


def test_results_of_a_python_given_by_path_stay_under_hpcenv_home(
    probe_python: Path,
    hpcenv_home: Path,
) -> None:
    before = set(probe_python.parent.iterdir())
    done = _cli("probe", "imports", "--env", str(probe_python), "--json", env={})
    assert done.returncode in (0, 5), done.stderr
    results = Path(json.loads(done.stdout)["results_dir"])
    assert results.is_relative_to(hpcenv_home / "results"), results
    assert results.name.startswith(probe_python.parent.parent.name)  # the venv's name
    assert set(probe_python.parent.iterdir()) == before  # nothing beside the interpreter


def test_junit_is_valid_xml_whatever_a_rank_printed() -> None:
    tail = "\x1b[31mRuntimeError\x1b[0m: bad \x00\x07 bytes\x1b]0;title\x07 \ud800 end"
    ranks = [
        RankResult(rank=0, host="a", status=Status.PASS, summary="ok"),
        RankResult(rank=1, host="b", status=Status.ERROR, summary="crashed", stderr_tail=tail),
    ]
    text = junit.render([gather("nccl", ranks)])
    root = ET.fromstring(text.encode("utf-8", errors="surrogatepass"))  # parses
    body = "".join(root.itertext())
    assert "RuntimeError: bad  bytes  end" in body and "\x1b" not in text


def test_the_imports_probe_names_a_direct_url_requirement() -> None:
    probe = load_probe("imports")
    assert probe.dist_name("priv @ https://host.example/priv-1.0-py3-none-any.whl") == "priv"
    assert probe.dist_name("priv[cli] @ file:///srv/priv.whl") == "priv"
    assert probe.dist_name("ray[default]>=2.49") == "ray"
    assert probe.dist_name("https://host.example/priv.whl") is None
    assert probe.dist_name("./vendored/pkg") is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["probe", "imports", "--env", "local", "--junit", "/tmp"], "is a directory"),
        (["doctor", "--junit", "/tmp"], "is a directory"),
        (["doctor", "--ranks", "0"], "--ranks 0: must be 1 or more"),
    ],
)
def test_arguments_are_checked_before_any_slow_work(
    args: list[str], needle: str, hpcenv_home: Path
) -> None:
    done = _cli(*args, env={})
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert "1/4 facts" not in done.stderr  # the doctor did not start
    assert not hpcenv_home.exists()  # nothing built, no results directory


LEAKY_PROBE = """
import os
from hpcenv.kit import probe
from hpcenv.kit.status import Status

def body(ctx):
    ctx.check("env", Status.PASS, f"token {os.environ['HF_TOKEN']} and HF_TOKEN=abc")

probe.main("leaky", body)
"""


def test_rank_files_are_masked_by_the_probe_that_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_rankfileSECRET99")
    scripts = tmp_path / "probes"
    scripts.mkdir()
    (scripts / "leaky_probe.py").write_text(LEAKY_PROBE)
    spec = runner.ProbeSpec(name="leaky", python=Path(sys.executable), timeout_s=60)
    out = tmp_path / "results"
    result = runner.run_probe(
        spec, launcher=runner.LocalLauncher(), result_dir=out, script_dir=scripts
    )
    assert result.status is Status.PASS, result.summary
    written = {p.name: p.read_text() for p in out.iterdir()}
    assert "leaky.rank0.json" in written
    for name, text in written.items():
        assert "hf_rankfileSECRET99" not in text and "HF_TOKEN=abc" not in text, name
    assert "token REDACTED and HF_TOKEN=REDACTED" in written["leaky.rank0.json"]
