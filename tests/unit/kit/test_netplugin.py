"""The one NCCL net plugin lookup (``hpcenv.kit.netplugin``), used by hpcenv's facts and by
the ofi and nccl probes, on real files in a temporary library directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.kit import netplugin


def test_system_dirs_cover_debian_and_rhel() -> None:
    """The nccl probe's old copy lacked /usr/lib/x86_64-linux-gnu."""
    assert "/usr/lib/x86_64-linux-gnu" in netplugin.SYSTEM_LIB_DIRS
    assert "/usr/lib64" in netplugin.SYSTEM_LIB_DIRS


def test_lookup_order_and_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, system = tmp_path / "first", tmp_path / "system"
    first.mkdir()
    system.mkdir()
    monkeypatch.setattr(netplugin, "SYSTEM_LIB_DIRS", (str(system),))
    find = netplugin.find_net_plugin
    env = {"LD_LIBRARY_PATH": f"{first}:"}
    assert find(env) is None
    (system / "libnccl-net.so").write_bytes(b"")
    assert find(env) == str(system / "libnccl-net.so")
    (first / "libnccl-net.so").write_bytes(b"")
    assert find(env) == str(first / "libnccl-net.so")  # path first
    (system / "libnccl-net-ofi.so").write_bytes(b"")
    named = {**env, "NCCL_NET_PLUGIN": "ofi"}
    assert find(named) == str(system / "libnccl-net-ofi.so")
    assert find({"NCCL_NET_PLUGIN": str(first / "libnccl-net.so")}) == str(first / "libnccl-net.so")
    assert find({"NCCL_NET_PLUGIN": str(first / "missing.so")}) is None
