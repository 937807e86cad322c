"""Audit when the index a requirements file names cannot be reached (cluster nodes, CI)
or a package cannot be built here: the answer comes from the knowledge, never from the
absence of a resolution. The variant is the one the index URL names (``/whl/cu124``),
checked against what that release published for the node's CPU arch; a PyPI pin is PyPI's
build for the arch; every CUDA package named in the file is judged by name and pin, even
unpinned or unbuildable here; the report says what was not resolved.

The index is a port on 127.0.0.1 that refuses connections (stands in for
download.pytorch.org seen from a node without a route to it). The files are this test's
own, in the shape the issue reports.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.tools import uv
from support import FACTS, require

V100 = str(FACTS / "v100-supercloud.json")
GH200 = str(FACTS / "gh200-isambard.json")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require("uv", uv.available(), "uv not found")
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    port = _closed_port()
    (tmp_path / "requirements.txt").write_text(
        f"--index-url http://127.0.0.1:{port}/whl/cu124\ntorch==2.6.0\nflash-attn\nrich\n"
    )
    return tmp_path / "requirements.txt"


def _audit(target: Path, facts: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    rc = main(["audit", str(target), "--facts", facts, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_the_index_url_names_the_variant_and_unpinned_flash_attn_is_judged(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "a CPU-only build" (nothing resolved, no CUDA runtime seen) and flash-attn
    dropped without a word."""
    rc, out = _audit(offline, V100, capsys)
    assert (out["torch"], out["build"]) == ("2.6.0+cu124", "cu124")
    assert rc == 3 and out["ok"] is False
    assert "flash-attn (unpinned): flash-attn 2 needs compute capability >= 8.0" in out["message"]
    assert "not resolved" in out["resolved"] and "not judged (no pin): rich" in out["resolved"]
    assert any("unreachable" in w for w in out["warnings"])


def test_a_variant_the_release_never_published_for_the_arch_does_not_run(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: torch==2.6.0+cu124 "runs" on the GH200, though 2.6.0 published no aarch64
    cu124 build (hpcenv's torch data says which it did)."""
    rc, out = _audit(offline, GH200, capsys)
    assert rc == 3
    assert "no torch==2.6.0 published a cu124 build for aarch64" in out["error"]


def test_hand_written_flash_attn_is_audited_like_the_compiled_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 2 "Failed to build flash-attn" (its setup.py needs torch and nvcc),
    while the same pins compiled got "flash-attn 2 needs compute capability >= 8.0". Then
    (issue 31) the pins judged as written. Now (issue 40) uv is told flash-attn 2.5.8's
    requirements (knowledge/dependency_metadata.toml), so the file resolves with no build."""
    require("uv", uv.available(), "uv not found")
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        require("pypi", False, "pypi.org:443 unreachable")
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    (tmp_path / "requirements.txt").write_text("torch==2.1.2\nflash-attn==2.5.8\n")
    rc, out = _audit(tmp_path / "requirements.txt", V100, capsys)
    assert rc == 3, out
    assert (out["torch"], out["build"]) == ("2.1.2", "cu121")  # PyPI's x86_64 build
    assert "flash-attn 2.5.8: flash-attn 2 needs compute capability >= 8.0" in out["message"]
    assert out["resolved"].startswith("resolved from"), out["resolved"]


def test_every_exact_pin_is_judged_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: when nothing can be resolved, exact pins are judged as written whether torch
    is pinned or not. Before: exit 1 with uv's error, flash-attn's 8.0 never said."""
    require("uv", uv.available(), "uv not found")
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    req = tmp_path / "requirements.txt"
    req.write_text(
        f"--index-url http://127.0.0.1:{_closed_port()}/simple\nflash-attn==2.5.6\n"
        "numpy==1.26.4\nrich\n"
    )
    rc, out = _audit(req, V100, capsys)
    assert rc == 3 and out["torch"] is None
    assert out["packages"] == [
        "flash-attn 2.5.6: flash-attn 2 needs compute capability >= 8.0, the GPUs are 7.0"
    ]
    assert "its exact pins judged as written" in out["resolved"]
    assert "not judged (no pin): rich" in out["resolved"]


@pytest.mark.slow
def test_a_pin_without_a_wheel_for_the_arch_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: flash-attn's sdist cannot be built here (its setup.py imports torch), so the
    file is judged as written; triton 2.2.0 has only x86_64 wheels on PyPI and no sdist, so
    on the GH200 (aarch64) it is named as not installable. Before: exit 1 with uv's error."""
    require("uv", uv.available(), "uv not found")
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        require("pypi", False, "pypi.org:443 unreachable")
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    (tmp_path / "requirements.txt").write_text("flash-attn==2.5.6\ntriton==2.2.0\n")
    rc, out = _audit(tmp_path / "requirements.txt", GH200, capsys)
    assert rc == 3 and out["torch"] is None, out
    (triton,) = [p for p in out["packages"] if p.startswith("triton")]
    assert triton.startswith("triton 2.2.0 has no wheel for aarch64-manylinux_2_35, Python 3.12")
    assert "x86_64" in triton and triton.endswith("cannot be installed on this node")
    assert "flash-attn 2.5.6: runs here (compute capability >= 8.0)" in out["packages"]
