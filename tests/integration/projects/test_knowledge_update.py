"""``hpcenv knowledge update`` / ``check`` against a stand-in PyPI and PyTorch index on
127.0.0.1 (tests/support/torch_standin.py)."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import re
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv import knowledge
from hpcenv.cli import main
from hpcenv.knowledge import listing, remote, vllm, wheels
from hpcenv.knowledge.refresh import update
from hpcenv.knowledge.refresh import vllm as vllm_refresh
from hpcenv.utils.errors import BadInput
from support import require
from support.torch_standin import StandIn, torch_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SASS_CU128 = (70, 75, 80, 86, 90, 100, 120)


def _populate(s: StandIn) -> None:
    f = s.files
    for py in ("cp311", "cp312"):
        s.add_pypi(torch_wheel(f, "2.9.1", python=py, cuda="12.8", sass=SASS_CU128))
        s.add_pypi(torch_wheel(f, "2.9.1", python=py, arch="aarch64", cuda=None))
    s.add_pypi(torch_wheel(f, "2.15.0", cuda="13.2", sass=(75, 80, 90, 100, 120), abi=None))
    s.add_pypi(torch_wheel(f, "1.7.1", cuda="10.2", sass=(70,)))  # older than the data covers
    s.add_index("cu126", torch_wheel(f, "2.9.1", label="cu126", cuda="12.6", sass=(70, 80, 90)))
    s.add_index(
        "cu130", torch_wheel(f, "2.9.1", label="cu130", cuda="13.0", sass=(75, 90), ptx=(120,))
    )
    s.add_index(
        "cu126",
        torch_wheel(
            f, "2.9.1", label="cu126", arch="aarch64", cuda="12.6", sass=(90,), bundled=True
        ),
    )


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    s = StandIn(tmp_path_factory.mktemp("standin"))
    _populate(s)
    yield s.start()
    s.stop()


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads the wheels itself (the wheel-facts cache is per test)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _rows(path: Path, table: str = "wheel") -> dict[tuple[str, str], dict[str, object]]:
    data = tomllib.loads(path.read_text())
    return {(r["version"], r["arch"]): r for r in data[table]}


def test_update_reads_the_wheels_by_range_and_writes_sources(
    standin: StandIn, tmp_path: Path
) -> None:
    before = len(standin.served.requests)
    written = update.update_pypi(standin.url, out=tmp_path)
    assert written.changed and written.rows == 3
    rows = _rows(written.path)
    assert set(rows) == {("2.9.1", "x86_64"), ("2.9.1", "aarch64"), ("2.15.0", "x86_64")}
    x86 = rows[("2.9.1", "x86_64")]
    assert x86["variant"] == "cu128" and x86["build"] == "2.9.1+cu128" and x86["cuda"] == "12.8"
    assert x86["sass"] == ["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    assert x86["ptx"] == [] and x86["pythons"] == ["3.11", "3.12"] and x86["cxx11abi"] is True
    assert x86["tags"] == ["cp311-cp311-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_28_x86_64"]
    wheel = standin.files / "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert x86["source"] == f"{standin.url}/files/{wheel.name}#sha256={standin.sha256(wheel)}"
    arm = rows[("2.9.1", "aarch64")]
    assert arm["variant"] == "cpu" and arm["sass"] == []
    assert rows[("2.15.0", "x86_64")]["cxx11abi"] is True  # no ABI flag: the new ABI
    # every wheel read through range requests, none downloaded whole
    asked = standin.served.requests[before:]
    wheels_asked = [(p, r) for p, r in asked if p.endswith(".whl")]
    assert wheels_asked and all(r is not None for _, r in wheels_asked)
    per_wheel = len(wheels_asked) / 3
    assert per_wheel < 12, wheels_asked


def test_update_is_idempotent(standin: StandIn, tmp_path: Path) -> None:
    first = update.update_pypi(standin.url, out=tmp_path)
    text = first.path.read_bytes()
    again = update.update_pypi(standin.url, out=tmp_path)
    assert not again.changed and again.path.read_bytes() == text


def test_a_server_without_ranges_is_downloaded_once_and_checked(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    s = StandIn(tmp_path_factory.mktemp("noranges"), ranges=False)
    _populate(s)
    s.start()
    try:
        written = update.update_pypi(s.url, out=tmp_path)
        rows = _rows(written.path)
        assert rows[("2.9.1", "x86_64")]["sass"] == [
            "7.0",
            "7.5",
            "8.0",
            "8.6",
            "9.0",
            "10.0",
            "12.0",
        ]
        assert s.served.full_gets(".whl") >= 3  # downloaded: no range support
        url = f"{s.url}/files/torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
        with pytest.raises(BadInput, match=r"sha256 .* differs"):
            wheels.read(url, sha256="0" * 64)
    finally:
        s.stop()


def test_range_file_reads_what_zipfile_asks(standin: StandIn) -> None:
    wheel = standin.files / "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    raw = remote.RangeFile(f"{standin.url}/files/{wheel.name}")
    data = wheel.read_bytes()
    assert raw.size == len(data)
    raw.seek(100)
    assert raw.read(50) == data[100:150]
    raw.seek(-10, io.SEEK_END)
    assert raw.read() == data[-10:]
    assert raw.read(5) == b""


def test_index_update_lists_variants_per_page(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A mirror with only <variant>/torch/ pages: variants from the pages asked about."""
    s = StandIn(tmp_path_factory.mktemp("mirror"))
    _populate(s)
    s.whole_page = False
    s.start()
    try:
        written = update.update_index(
            f"{s.url}/whl", variants=["cpu", "cu126", "cu128", "cu130"], out=tmp_path
        )
    finally:
        s.stop()
    plats = _rows(written.path, "platform")
    assert plats[("2.9.1", "x86_64")]["variants"] == ["cu126", "cu130"]
    assert plats[("2.9.1", "aarch64")]["variants"] == ["cu126"]
    assert "#sha256=" in str(plats[("2.9.1", "x86_64")]["source"])
    data = tomllib.loads(written.path.read_text())
    by = {(r["version"], r["arch"], r["variant"]): r for r in data["wheel"]}
    assert by[("2.9.1", "x86_64", "cu130")]["ptx"] == ["12.0"]
    assert by[("2.9.1", "x86_64", "cu130")]["ptx_isa"] == {"12.0": "8.7"}
    assert by[("2.9.1", "x86_64", "cu126")]["sass"] == ["7.0", "8.0", "9.0"]
    # an aarch64 CUDA wheel with its CUDA runtime inside (no nvidia-* dependency) is read
    # as the CUDA build its torch/version.py says, not guessed as CPU
    arm = by[("2.9.1", "aarch64", "cu126")]
    assert arm["bundles_cudart"] is True and arm["cuda"] == "12.6" and arm["sass"] == ["9.0"]


def test_index_with_a_mislabelled_wheel_is_one_clear_line(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    s = StandIn(tmp_path_factory.mktemp("liar"))
    s.add_index("cu126", torch_wheel(s.files, "2.9.1", label="cu126", cuda="12.8", sass=(90,)))
    s.start()
    try:
        with pytest.raises(
            BadInput, match=re.escape("labelled cu126 but its torch/version.py says CUDA 12.8")
        ):
            update.update_index(f"{s.url}/whl", out=tmp_path)
    finally:
        s.stop()


def test_unreachable_index_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unreachable"):
        listing.index_files("http://127.0.0.1:9/whl", timeout=2)


def test_update_refuses_to_write_through_a_symlink(standin: StandIn, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.toml"
    target.write_text("mine\n")
    (tmp_path / update.PYPI_FILE).symlink_to(target)
    with pytest.raises(BadInput, match="symlink"):
        update.update_pypi(standin.url, out=tmp_path)
    assert target.read_text() == "mine\n"


# --- the commands -------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_cli_update_and_check_against_the_standin(
    standin: StandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys, "knowledge", "update", "--pypi", standin.url, "--out", str(tmp_path), "--no-vllm"
    )
    assert code == 0 and "torch_pypi.toml: 3 rows, changed" in out
    code, out, _ = _cli(
        capsys, "knowledge", "update", "--pypi", standin.url, "--out", str(tmp_path), "--no-vllm"
    )
    assert code == 0 and "3 rows, unchanged" in out
    code, out, _ = _cli(
        capsys, "knowledge", "update", "--pypi", standin.url, "--index", f"{standin.url}/whl",
        "--out", str(tmp_path), "--no-vllm",
    )  # fmt: skip
    assert code == 0 and "torch_index.toml: 5 rows, changed" in out  # 2 platforms, 3 wheels
    code, out, _ = _cli(
        capsys, "knowledge", "update", "--pypi", standin.url, "--out", str(tmp_path), "--no-vllm",
        "--json",
    )  # fmt: skip
    said = json.loads(out)
    assert code == 0 and said["schema"] == 1 and said["pypi"] == standin.url
    assert said["index"] is None
    assert said["files"] == [{"path": str(tmp_path / "torch_pypi.toml"), "rows": 3,
                              "changed": False}]  # fmt: skip
    # hpcenv's own data has no 2.15.0-sized gap here, but the stand-in lists 2.9.1 and 2.15.0
    # only; check against a stand-in listing a release the data cannot have
    s = StandIn(tmp_path / "future")
    s.add_pypi(torch_wheel(s.files, "9.1.0", cuda="13.2", sass=(90,)))
    s.start()
    try:
        code, _, err = _cli(capsys, "knowledge", "check", "--pypi", s.url)
        # --json: cli's error object on stdout, the same line on stderr
        json_code, out, _ = _cli(capsys, "knowledge", "check", "--pypi", s.url, "--json")
    finally:
        s.stop()
    assert code == 7
    assert err.count("\n") == 1 and "torch 9.1.0" in err and "hpcenv knowledge update" in err
    said = json.loads(out)
    assert json_code == 7 and said["ok"] is False and said["exit_code"] == 7
    assert said["command"] == "knowledge" and "torch 9.1.0" in said["error"]


def test_update_shows_progress_on_a_terminal_and_few_lines_in_a_pipe(
    standin: StandIn, tmp_path: Path
) -> None:
    """Through a real pseudo-terminal (util-linux ``script``): rich's bar with counts; through
    a pipe: plain lines, none for work shorter than the interval, one per due read else."""
    import os
    import shlex
    import shutil
    import subprocess

    require("script", shutil.which("script") is not None, "apt-get install util-linux")
    argv = [sys.executable, "-m", "hpcenv", "knowledge", "update", "--pypi", standin.url,
            "--out", str(tmp_path), "--no-vllm"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "HPCENV_PROGRESS_INTERVAL": "3600"}
    env.pop("NO_COLOR", None)
    pty = subprocess.run(["script", "-qec", shlex.join(argv), "/dev/null"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert pty.returncode == 0, pty.stdout
    screen = pty.stdout
    assert "torch wheels on PyPI" in screen and "3/3" in screen and "━" in screen, screen
    assert "\x1b[" in screen  # drawn, not printed
    pipe = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert pipe.returncode == 0 and pipe.stderr == ""  # quicker than an interval: quiet
    env["HPCENV_PROGRESS_INTERVAL"] = "1e-9"  # every read is due: one line each
    pipe = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert pipe.returncode == 0, pipe.stderr
    said = pipe.stderr.splitlines()
    lines = [x for x in said if not x.endswith("(still running)")]  # its heartbeat, as due
    assert "\x1b" not in pipe.stderr
    assert [re.sub(r" \(.*", "", x) for x in lines[:3]] == [
        "torch wheels on PyPI: 1/3", "torch wheels on PyPI: 2/3", "torch wheels on PyPI: 3/3"
    ]  # fmt: skip
    assert "reading torch" in lines[0]
    assert re.fullmatch(r"torch wheels on PyPI: done, 3/3 in \d+\.\d s", lines[3]), lines


# The committed data against the real PyPI is not a test of this suite: a release upstream
# would stop every submission from landing. `make knowledge-check` (nox -s knowledge-check)
# and the weekly workflow (.github/workflows/knowledge.yml) run it; the stand-in above
# proves the check fails naming a release the data lacks.


# --- flash-attn ------------------------------------------------------------------------------


def _flash_attn_pypi(s: StandIn, monkeypatch: pytest.MonkeyPatch, versions: list[str]) -> None:
    """The stand-in PyPI also serves flash-attn's project JSON with ``versions`` (one sdist
    each, as PyPI lists flash-attn), and 404 for vLLM (a mirror without it)."""
    releases = {
        v: [{"filename": f"flash_attn-{v}.tar.gz", "packagetype": "sdist", "yanked": False}]
        for v in versions
    }
    served = s.page

    def page(path: str, accept: str) -> bytes | None:
        if path == "/pypi/flash-attn/json":
            return json.dumps({"info": {"name": "flash-attn"}, "releases": releases}).encode()
        return served(path, accept)

    monkeypatch.setattr(s, "page", page)


def test_check_fails_on_a_flash_attn_release_the_list_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    known = [w.version for w in knowledge.load().flash_attn.wheels]
    s = StandIn(tmp_path / "fa")
    _flash_attn_pypi(s, monkeypatch, [*known, "2.9.0", "2.9.1rc1", "1.0.9"])
    s.start()
    try:
        code, out, err = _cli(capsys, "knowledge", "check", "--pypi", s.url)
        assert code == 7, out
        assert err.count("\n") == 1
        assert "has flash-attn 2.9.0, which hpcenv's data lacks" in err
        assert "packages.toml" in err and "publish.yml" in err
        assert "2.9.1rc1" not in err and "1.0.9" not in err  # pre-release; older than the list
        monkeypatch.undo()
        _flash_attn_pypi(s, monkeypatch, known)
        code, out, err = _cli(capsys, "knowledge", "check", "--pypi", s.url)
        assert code == 0, err
        assert f"flash-attn {known[0]} to {known[-1]}" in out
        code, out, err = _cli(capsys, "knowledge", "check", "--pypi", s.url, "--json")
        said = json.loads(out)
        assert code == 0 and said["current"] is True and said["pypi"] == s.url
        assert said["schema"] == 1
        assert f"flash-attn {known[0]} to {known[-1]}" in said["summary"]
    finally:
        s.stop()


# --- vLLM ------------------------------------------------------------------------------------

CMAKE_0_20 = """
find_package(Torch REQUIRED)
if(DEFINED CMAKE_CUDA_COMPILER_VERSION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13.0)
  # family-specific targets (see: https://developer.nvidia.com/blog/)
  set(CUDA_SUPPORTED_ARCHS "7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0")
elseif(DEFINED CMAKE_CUDA_COMPILER_VERSION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
  set(CUDA_SUPPORTED_ARCHS "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;10.3;12.0;12.1")
else()
  set(CUDA_SUPPORTED_ARCHS "7.0;7.5;8.0;8.6;8.7;8.9;9.0")
endif()
"""


def test_vllm_minimum_is_read_per_cuda_branch() -> None:
    """vLLM 0.20.0's CMakeLists.txt (as in the sdist): 7.5 for CUDA >= 12.8 builds (PyPI's
    wheels), 7.0 only for a source build with an older CUDA."""
    low, older, found = vllm_refresh.minimums(CMAKE_0_20) or ("", None, [])
    assert (low, older) == ("7.5", "7.0")
    assert [f for f, _ in found] == [">=13.0", ">=12.8", "<12.8"]
    assert vllm_refresh.minimums('set(CUDA_SUPPORTED_ARCHS "7.0;7.5;8.0")')[:2] == ("7.0", None)  # type: ignore[index]


def _sdist(folder: Path, version: str, cmake: str) -> Path:
    path = folder / f"vllm-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in (("PKG-INFO", "Name: vllm\n"), ("CMakeLists.txt", cmake)):
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_vllm_update_from_sdists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = StandIn(tmp_path / "vllm")
    old = _sdist(
        s.files,
        "0.19.1",
        CMAKE_0_20.replace(
            '"7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1', '"7.0;7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1'
        ),
    )
    new = _sdist(s.files, "0.20.0", CMAKE_0_20)
    releases = {
        p.name.split("-")[1][: -len(".tar.gz")]: [
            {"filename": p.name, "url": f"../../files/{p.name}", "packagetype": "sdist",
             "digests": {"sha256": s.sha256(p)}}
        ]
        for p in (old, new)
    }  # fmt: skip
    monkeypatch.setattr(
        s, "page", lambda path, accept: json.dumps({"releases": releases}).encode()
        if path == "/pypi/vllm/json" else None
    )  # fmt: skip
    s.start()
    try:
        written = vllm_refresh.update_vllm(s.url, out=tmp_path, log=lambda _: None)
    finally:
        s.stop()
    data = tomllib.loads(written.path.read_text())
    by = {r["version"]: r for r in data["release"]}
    assert by["0.19.1"]["min_compute_capability"] == "7.0"
    assert by["0.20.0"]["min_compute_capability"] == "7.5"
    assert by["0.20.0"]["min_older_cuda"] == "7.0"
    assert str(by["0.20.0"]["source"]).endswith(f"#sha256={s.sha256(new)}")
    spans = vllm.ranges(data["release"])
    assert [(r.versions, r.min_compute_capability) for r in spans] == [
        (">=0.19.1,<0.20.0", "7.0"),
        (">=0.20.0", "7.5"),
    ]


def test_python_tags() -> None:
    assert update.python_of("cp311") == "3.11"
    assert update.python_of("cp313t") == "3.13t"


class _Hostile(http.server.BaseHTTPRequestHandler):
    """A server on 127.0.0.1 that answers every range request with the same 10 bytes of a
    file it says is 1 MB (``wrong``), or a 10-byte range with a body that goes on (``long``:
    256 MB, no length, until the client stops reading); after 40 requests it answers 404
    (so a client asking again and again ends). ``sent``: the bytes of body written."""

    mode = "wrong"
    seen = 0
    sent = 0

    def do_GET(self) -> None:
        type(self).seen += 1
        if type(self).seen > 40:
            self.send_error(404)
            return
        self.send_response(206)
        self.send_header("Content-Range", "bytes 0-9/1000000")
        if self.mode == "wrong":
            self.send_header("Content-Length", "10")
        self.end_headers()
        chunk = b"x" * (10 if self.mode == "wrong" else 1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(1 if self.mode == "wrong" else 256):
                self.wfile.write(chunk)
                type(self).sent += len(chunk)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("mode", ["wrong", "long"])
def test_a_server_answering_other_ranges_is_one_line_after_one_request(mode: str) -> None:
    """Before, a server answering another range than asked was asked again and again (for
    ever: a loop of requests), and a body longer than its range was read whole first."""
    handler = type("Handler", (_Hostile,), {"mode": mode, "seen": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.whl"
        with (
            pytest.raises(BadInput, match=r"x\.whl: .*(asked for bytes|range answer)"),
            remote.open_wheel(url),
        ):
            pass
        assert handler.seen <= 2
        server.shutdown()  # the handler has finished writing (or found the client gone)
        assert handler.sent < 64 << 20  # not read whole (before: all 256 MB)
    finally:
        server.shutdown()
        server.server_close()
