"""What NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET) says about the network.

Pure text parsing, tested on recorded lines (tests/unit/kit/test_nccl_log.py): whether a net
plugin was loaded (and which API version), the libfabric provider aws-ofi-nccl
selected, the network NCCL finally used (``Using network X``), the channel
transports (``via NET/AWS Libfabric/0/GDRDMA``), and the hard failure ``Failed to
initialize any NET plugin``. ``judge`` turns that and the profile's expectation
into a status, summary and remedy.
"""

from __future__ import annotations

import re
from typing import Any

from hpcenv.kit.status import Status

PLUGIN_LOADED = re.compile(r"NET/Plugin\s*:?\s*Loaded net plugin (.+?) \((v\d+)\)")
PLUGIN_MISSING = re.compile(r"NET/Plugin\s*:?\s*(Could not find:?\s*(\S+)|No plugin found)")
OFI_VERSION = re.compile(r"NET/OFI Initializing aws-ofi-nccl (\S+)")
OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is (\S+)")
USING_NETWORK = re.compile(r"Using network (.+?)\s*$")
VIA_NET = re.compile(r"via (NET/.+?/\d+(?:/[A-Za-z_]+)*)(?=\s|$)")
FAILED_ANY = re.compile(r"Failed to initialize any NET plugin")
WARN = re.compile(r"NCCL WARN (.+)$")

OFI_NAMES = ("AWS Libfabric", "Libfabric", "OFI")


def parse(text: str) -> dict[str, Any]:
    """Facts from an NCCL INFO log (any number of ranks' lines mixed)."""
    out: dict[str, Any] = {
        "plugin": None,
        "plugin_api": None,
        "plugin_missing": None,
        "ofi_version": None,
        "provider": None,
        "network": None,
        "transports": [],
        "gdrdma": False,
        "failed_any_plugin": False,
        "warnings": [],
    }
    for line in text.splitlines():
        if m := PLUGIN_LOADED.search(line):
            out["plugin"], out["plugin_api"] = m.group(1).strip(), m.group(2)
        elif m := PLUGIN_MISSING.search(line):
            out["plugin_missing"] = m.group(2) or "no plugin found"
        if m := OFI_VERSION.search(line):
            out["ofi_version"] = m.group(1)
        if m := OFI_PROVIDER.search(line):
            out["provider"] = m.group(1).rstrip(".,")
        if m := USING_NETWORK.search(line):
            out["network"] = m.group(1).strip()
        for m in VIA_NET.finditer(line):
            if m.group(1) not in out["transports"]:
                out["transports"].append(m.group(1))
        if FAILED_ANY.search(line):
            out["failed_any_plugin"] = True
        if m := WARN.search(line):
            out["warnings"].append(m.group(1).strip())
    out["gdrdma"] = any(t.endswith("/GDRDMA") for t in out["transports"])
    return out


def is_ofi(network: str | None) -> bool:
    return bool(network) and any(n.lower() in network.lower() for n in OFI_NAMES)  # type: ignore[union-attr]


def judge(parsed: dict[str, Any], expect: str) -> tuple[Status, str, str]:
    """(status, summary, remedy) for the network NCCL used, given the expected one.

    ``expect``: ``ofi``, ``ib``, ``socket`` or ``any`` (the profile's nccl_net).
    """
    net = parsed["network"]
    if parsed["failed_any_plugin"]:
        return (
            Status.FAIL,
            "NCCL: Failed to initialize any NET plugin",
            "NCCL_NET names a network no plugin provides: unset NCCL_NET on single-node "
            "runs, or load the plugin module (e.g. brics/aws-ofi-nccl) so libnccl-net.so "
            "is on LD_LIBRARY_PATH",
        )
    if net is None:
        return (
            Status.ERROR,
            "NCCL printed no 'Using network' line",
            "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and read the log",
        )
    via = f" via {', '.join(parsed['transports'])}" if parsed["transports"] else ""
    plugin = (
        f"plugin {parsed['plugin']} ({parsed['plugin_api']})" if parsed["plugin"] else "no plugin"
    )
    provider = f", provider {parsed['provider']}" if parsed["provider"] else ""
    summary = f"NCCL used network {net}{via} ({plugin}{provider})"
    if expect == "ofi" and not is_ofi(net):
        why = (
            f"the plugin was not found ({parsed['plugin_missing']})"
            if parsed["plugin_missing"]
            else "the plugin did not initialise"
        )
        return (
            Status.FAIL,
            f"{summary}: expected the OFI plugin, NCCL fell back to {net} because {why}",
            "load the aws-ofi-nccl module (Isambard: brics/aws-ofi-nccl or brics/nccl) so "
            "libnccl-net.so is on LD_LIBRARY_PATH, or set NCCL_NET_PLUGIN to its path; "
            "check FI_PROVIDER=cxi",
        )
    if expect == "ib" and net != "IB":
        fix = "check the IB HCAs (ibv_devinfo), NCCL_IB_HCA"
        return (Status.FAIL, f"{summary}: expected IB", fix)
    if expect == "socket" and net != "Socket":
        return (Status.FAIL, f"{summary}: expected Socket", "unset NCCL_NET_PLUGIN / NCCL_NET")
    return (Status.PASS, summary, "")
