"""The probes' one NCCL net plugin lookup (``_common.find_net_plugin``), used by both
the ofi and the nccl probe, on real files in a temporary library directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv import facts
from probe_env import load_probe

ofi = load_probe("ofi")
nccl = load_probe("nccl")
import _common  # noqa: E402 - on sys.path once load_probe has run


def test_both_probes_use_the_one_lookup() -> None:
    for probe in (ofi, nccl):
        assert not hasattr(probe, "find_plugin"), f"{probe.__name__} has its own copy again"
        assert probe._common.find_net_plugin is _common.find_net_plugin


def test_same_system_dirs_as_the_package() -> None:
    """hpcenv.facts keeps its own copy (probes cannot import hpcenv): they must agree.
    The nccl probe's old copy lacked /usr/lib/x86_64-linux-gnu."""
    assert _common.SYSTEM_LIB_DIRS == facts.SYSTEM_LIB_DIRS
    assert "/usr/lib/x86_64-linux-gnu" in _common.SYSTEM_LIB_DIRS


def test_lookup_order_and_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, system = tmp_path / "first", tmp_path / "system"
    first.mkdir()
    system.mkdir()
    monkeypatch.setattr(_common, "SYSTEM_LIB_DIRS", (str(system),))
    env = {"LD_LIBRARY_PATH": f"{first}:"}
    assert _common.find_net_plugin(env) is None
    (system / "libnccl-net.so").write_bytes(b"")
    assert _common.find_net_plugin(env) == str(system / "libnccl-net.so")
    (first / "libnccl-net.so").write_bytes(b"")
    assert _common.find_net_plugin(env) == str(first / "libnccl-net.so")  # path first
    (system / "libnccl-net-ofi.so").write_bytes(b"")
    named = {**env, "NCCL_NET_PLUGIN": "ofi"}
    assert _common.find_net_plugin(named) == str(system / "libnccl-net-ofi.so")
    assert _common.find_net_plugin({"NCCL_NET_PLUGIN": str(first / "libnccl-net.so")}) == str(
        first / "libnccl-net.so"
    )
    assert _common.find_net_plugin({"NCCL_NET_PLUGIN": str(first / "missing.so")}) is None
    # facts (the package's copy) finds the same ones
    monkeypatch.setattr(facts, "SYSTEM_LIB_DIRS", (str(system),))
    for e in (env, named):
        assert facts.find_net_plugin(e) == _common.find_net_plugin(e)
