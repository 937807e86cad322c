"""The ofi probe, run for real: fi_info providers, the plugin found on LD_LIBRARY_PATH
and its symbols read, and the NCCL/plugin API match.

The plugin and libnccl here are small libraries compiled by the test with gcc. They
stand in for aws-ofi-nccl and NCCL, which need a GPU cluster: the plugin exports the
``ncclNetPlugin_vN`` symbols, the NCCL stand-in exports ``ncclGetVersion`` returning
the version code a real libnccl.so.2 would.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support import require
from support.native import compile_so
from support.probe_env import load_probe

ofi = load_probe("ofi")


def plugin_source(versions: list[int]) -> str:
    return "\n".join(f"int ncclNetPlugin_v{v} = {v};" for v in versions)


def nccl_source(code: int) -> str:
    return f"int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}"


def run_ofi(tmp_path: Path, env: dict[str, str], config: dict[str, str], *args: str) -> object:
    spec = runner.ProbeSpec(
        name="ofi", python=Path(sys.executable), env=env, config=config, args=args, timeout_s=120
    )
    return runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path / "r")


def check(result: object, name: str) -> dict:
    ranks = result.ranks  # type: ignore[attr-defined]
    return next(c for c in ranks[0].details["checks"] if c["name"] == name)


@pytest.fixture
def libdir(tmp_path: Path) -> Path:
    d = tmp_path / "lib"
    d.mkdir()
    return d


def test_local_profile_passes_with_providers(tmp_path: Path) -> None:
    require("fi_info", shutil.which("fi_info") is not None, "libfabric-bin not installed")
    result = run_ofi(tmp_path, {"LD_LIBRARY_PATH": ""}, {"nccl_net": "any"})
    assert result.status is Status.PASS, result.summary
    providers = result.ranks[0].details["libfabric_providers"]
    assert "tcp" in providers or "sockets" in providers
    assert check(result, "plugin")["status"] == "skip"
    assert "expects none" in check(result, "plugin")["summary"]


def test_expected_provider_missing_fails(tmp_path: Path) -> None:
    require("fi_info", shutil.which("fi_info") is not None, "libfabric-bin not installed")
    result = run_ofi(tmp_path, {}, {"libfabric_provider": "cxi", "nccl_net": "any"})
    assert result.status is Status.FAIL
    assert "provider cxi missing" in result.summary
    assert "cxi" in result.remedy


def test_plugin_expected_but_missing_fails(tmp_path: Path, libdir: Path) -> None:
    result = run_ofi(tmp_path, {"LD_LIBRARY_PATH": str(libdir)}, {}, "--expect-net", "ofi")
    assert result.status is Status.FAIL
    assert "no NCCL net plugin found" in check(result, "plugin")["summary"]
    assert "aws-ofi-nccl" in result.remedy


def test_plugin_and_nccl_share_an_api_version(tmp_path: Path, libdir: Path) -> None:
    plugin = compile_so(libdir, plugin_source([7, 6, 5, 4, 3, 2]), "libnccl-net")  # 1.8.1
    compile_so(libdir, nccl_source(22703), "libnccl")  # NCCL 2.27.3 tries v10..v6
    (libdir / "libnccl.so").rename(libdir / "libnccl.so.2")
    result = run_ofi(tmp_path, {"LD_LIBRARY_PATH": str(libdir)}, {"nccl_net": "ofi"})
    c = check(result, "plugin")
    assert c["status"] == "pass", c
    details = result.ranks[0].details
    assert details["plugin"] == str(plugin)
    assert details["nccl_version"] == "2.27.3"
    assert details["shared_api_versions"] == [7, 6]
    assert result.ranks[0].facts["nccl_version"] == "2.27.3"


def test_no_shared_api_version_fails(tmp_path: Path, libdir: Path) -> None:
    compile_so(libdir, plugin_source([5, 4, 3]), "libnccl-net-ofi")
    compile_so(libdir, nccl_source(22807), "libnccl")  # NCCL 2.28.7 tries v11..v6
    (libdir / "libnccl.so").rename(libdir / "libnccl.so.2")
    env = {"LD_LIBRARY_PATH": str(libdir), "NCCL_NET_PLUGIN": "ofi"}
    result = run_ofi(tmp_path, env, {"nccl_net": "ofi"})
    assert result.status is Status.FAIL
    c = check(result, "plugin")
    assert "tries plugin API v11..v6" in c["summary"] and "v3..v5" in c["summary"]


def test_nccl_tries_table() -> None:
    assert ofi.nccl_tries("2.21.5") == [8, 7, 6, 5]
    assert ofi.nccl_tries("2.25.1") == [9, 8, 7, 6, 5]
    assert ofi.nccl_tries("2.27.3") == [10, 9, 8, 7, 6]
    assert ofi.nccl_tries("2.29.0") == [11, 10, 9, 8, 7, 6]
    assert ofi.nccl_tries("2.30.2") == [12, 11, 10, 9, 8, 7, 6]
    assert ofi.nccl_tries("2.18.1") is None
    table = ofi.load_table()
    assert all(row["source"] for row in table["nccl_tries"] + table["plugin_exports"])
