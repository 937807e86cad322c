"""Credentials written into an index URL (``https://user:token@mirror/simple``) never
reach the committed lock header, the build report or the build log.

The lock runs real ``uv pip compile`` against the stand-in PEP 503 index on
127.0.0.1 (``buildkit.build_stand_in_index``, standing in for a private PyTorch
mirror; it ignores the credentials, so resolution succeeds with them in the URL).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.build import builder as build
from hpcenv.build import lockfiles as lock
from hpcenv.models.facts import Facts
from hpcenv.utils import redact
from hpcenv.utils.errors import BuildFailed
from support.buildkit import StandInIndex, build_stand_in_index, require_uv, stand_in_plan

PASSWORD = "s3cr3t-idx-pw"


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        (
            "uv --index https://alice:tok@mirror/simple x",
            "uv --index https://REDACTED@mirror/simple x",
        ),
        ("https://tok@h:8080/x https://a:b@c/", "https://REDACTED@h:8080/x https://REDACTED@c/"),
        ("'https://u:p@ss@h/x'", "'https://REDACTED@h/x'"),  # unencoded '@' in a password
        (shlex.quote("https://u:p'q@h/x"), "'https://REDACTED@h/x'"),  # quote in a password
        ("git+https://x:y@github.com/a/b.git@v1", "git+https://REDACTED@github.com/a/b.git@v1"),
    ],
)
def test_url_userinfo_is_masked(raw: str, masked: str) -> None:
    assert redact.text(raw) == masked
    assert redact.text(raw, {}) == masked


@pytest.mark.parametrize(
    "plain", ["http://h/a@b", "https://h/x?user=a@b", "file:///srv/a@b", "mailto:a@b", "a@b"]
)
def test_at_signs_outside_userinfo_are_left_alone(plain: str) -> None:
    assert redact.text(plain) == plain


def test_deep_masks_every_string_of_a_report() -> None:
    data = {"sources": ["--index", f"https://a:{PASSWORD}@m/x"], "n": 1, "t": ("x://u:p@h",)}
    assert redact.deep(data) == {
        "sources": ["--index", "https://REDACTED@m/x"],
        "n": 1,
        "t": ["x://REDACTED@h"],
    }


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInIndex]:
    require_uv()
    idx = build_stand_in_index(tmp_path_factory.mktemp("index"))
    try:
        yield idx
    finally:
        idx.stop()


@pytest.fixture
def offline_pypi(index: StandInIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PyPI replaced by the stand-in ``/simple/`` index; locks written under tmp."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"{index.url}/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("HPCENV_LOCKFILES", str(tmp_path / "lockfiles"))
    return tmp_path / "lockfiles"


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://alice:{PASSWORD}@", 1)


def test_lock_header_never_records_index_credentials(
    index: StandInIndex, offline_pypi: Path
) -> None:
    plan = stand_in_plan(_with_credentials(index.url))
    path = lock.compile_lock(plan, Facts(arch="x86_64"))
    text = path.read_text()
    assert PASSWORD not in text and "alice" not in text
    header = lock.read_header(path)
    assert "--index http://REDACTED@127.0.0.1:" in header["command"]
    assert "from http://REDACTED@127.0.0.1:" in header["torch"]
    assert lock.pinned(path)["torch"] == "2.9.1+cu126"  # resolved through that index
    assert lock.mismatch(path, plan, Facts(arch="x86_64")) is None  # masking keeps it valid


@pytest.mark.slow
@pytest.mark.slow
def test_build_report_and_log_never_record_index_credentials(
    offline_pypi: Path, hpcenv_home: Path
) -> None:
    """A build whose lock step fails (nothing listens on port 9): the report's sources,
    the logged uv command line and the error all mask the password."""
    require_uv()
    plan = stand_in_plan(f"http://alice:{PASSWORD}@127.0.0.1:9/whl")
    with pytest.raises(BuildFailed) as info:
        build.build(plan, Facts(arch="x86_64"))
    assert PASSWORD not in str(info.value)
    reports = list((hpcenv_home / "logs").glob("build-standin-*.json"))
    logs = list((hpcenv_home / "logs").glob("build-standin-*.log"))
    assert len(reports) == 1 and len(logs) == 1
    report, log = reports[0].read_text(), logs[0].read_text()
    assert "$ " in log and "pip compile" in log  # the command line was logged...
    assert PASSWORD not in log and PASSWORD not in report  # ...masked
    data = json.loads(report)
    assert "http://REDACTED@127.0.0.1:9/whl/cu126" in data["sources"]
    assert data["torch"]["from"] == "http://REDACTED@127.0.0.1:9/whl/cu126"
