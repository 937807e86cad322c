"""Parsing NCCL_DEBUG=INFO logs for the network NCCL used (line formats as NCCL's
src/plugin and aws-ofi-nccl print them: aws-ofi-nccl on Slingshot, the Socket fallback,
and NCCL_NET naming a network no plugin provides)."""

# ruff: noqa: E501  (recorded log lines are kept verbatim)

from __future__ import annotations

from hpcenv.kit import nccl_log as log

PLUGIN = """\
nid001001:81234:81234 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to hsn
nid001001:81234:81234 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v7)
nid001001:81234:81234 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.8.1-aws
nid001001:81234:81234 [0] NCCL INFO NET/OFI Using Libfabric version 1.15
nid001001:81234:81234 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)
nid001001:81234:81234 [0] NCCL INFO Using network AWS Libfabric
nid001001:81234:81299 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/AWS Libfabric/0/GDRDMA
nid001001:81234:81299 [0] NCCL INFO Channel 01/0 : 3[3] -> 4[0] [send] via NET/AWS Libfabric/1/GDRDMA
"""

SOCKET = """\
gpu-a01:5512:5512 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
gpu-a01:5512:5512 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>
gpu-a01:5512:5512 [0] NCCL INFO Using network Socket
gpu-a01:5512:5530 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
"""

FAILED = """\
nid001002:7001:7001 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
nid001002:7001:7001 [0] NCCL WARN Error: network AWS Libfabric not found.
nid001002:7001:7001 [0] NCCL INFO Failed to initialize any NET plugin
"""


def test_plugin_loaded_and_used() -> None:
    p = log.parse(PLUGIN)
    assert p["plugin"] == "AWS Libfabric"
    assert p["plugin_api"] == "v7"
    assert p["ofi_version"] == "1.8.1-aws"
    assert p["provider"] == "cxi"
    assert p["network"] == "AWS Libfabric"
    assert p["transports"] == ["NET/AWS Libfabric/0/GDRDMA", "NET/AWS Libfabric/1/GDRDMA"]
    assert p["gdrdma"] is True
    assert p["failed_any_plugin"] is False
    status, summary, remedy = log.judge(p, "ofi")
    assert status == "pass"
    assert "AWS Libfabric" in summary and "cxi" in summary and remedy == ""


def test_socket_fallback_fails_when_ofi_expected() -> None:
    p = log.parse(SOCKET)
    assert p["plugin"] is None
    assert p["plugin_missing"] == "libnccl-net.so."
    assert p["network"] == "Socket"
    assert p["gdrdma"] is False
    status, summary, remedy = log.judge(p, "ofi")
    assert status == "fail"
    assert "fell back to Socket" in summary and "libnccl-net.so" in summary
    assert "aws-ofi-nccl" in remedy
    # a profile that expects no particular network accepts the same log
    assert log.judge(p, "any")[0] == "pass"
    assert log.judge(p, "socket")[0] == "pass"


def test_failed_to_initialize_any_net_plugin() -> None:
    p = log.parse(FAILED)
    assert p["failed_any_plugin"] is True
    assert p["network"] is None
    assert p["warnings"] == ["Error: network AWS Libfabric not found."]
    status, summary, remedy = log.judge(p, "any")
    assert status == "fail"
    assert "Failed to initialize any NET plugin" in summary
    assert "NCCL_NET" in remedy


def test_no_network_line_is_an_error() -> None:
    assert log.judge(log.parse("nothing useful\n"), "any")[0] == "error"


def test_ib_expected_but_socket_used() -> None:
    assert log.judge(log.parse(SOCKET), "ib")[0] == "fail"
    ib = log.parse("h:1:1 [0] NCCL INFO Using network IB\n")
    assert log.judge(ib, "ib")[0] == "pass"
    assert log.judge(ib, "ofi")[0] == "fail"
