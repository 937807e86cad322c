"""Network recipes as data (knowledge/network.toml, issue 26): every variable has a
source, the pick follows the node's libfabric providers, and the shipped isambard
profile reads its Slingshot block from the cxi recipe rather than keeping a copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.knowledge import network
from hpcenv.profile import schema as profile
from support import REPO

#: The Slingshot set as Isambard-AI's NCCL guide and HPE's shs-ccl-docs give it (copied
#: here from those two documents, the sources the recipe must agree with).
SLINGSHOT = {
    "NCCL_SOCKET_IFNAME": "hsn", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_CROSS_NIC": "1",
    "NCCL_MIN_NCHANNELS": "4", "NCCL_GDRCOPY_ENABLE": "1", "NCCL_NET_FORCE_FLUSH": "0",
    "FI_PROVIDER": "cxi", "FI_CXI_DEFAULT_CQ_SIZE": "131072", "FI_CXI_DEFAULT_TX_SIZE": "2048",
    "FI_CXI_DISABLE_NON_INJECT_MSG_IDC": "1", "FI_HMEM_CUDA_USE_GDRCOPY": "1",
    "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_MR_CACHE_MONITOR": "userfaultfd",
    "FI_CXI_RDZV_PROTO": "alt_read", "FI_CXI_RDZV_THRESHOLD": "0", "FI_CXI_RDZV_GET_MIN": "0",
    "FI_CXI_RDZV_EAGER_SIZE": "0", "FI_CXI_RX_MATCH_MODE": "hybrid",
}  # fmt: skip


def test_four_recipes_each_variable_with_a_source() -> None:
    recipes = network.recipes()
    assert list(recipes) == ["cxi", "efa", "verbs", "tcp"]
    for r in recipes.values():
        for v in (*r.always, *r.multi_node):
            assert v.source.strip(), f"{r.name}.{v.name} has no source"
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", v.name)
    assert {r.nccl_net for r in recipes.values()} == {"ofi", "ib", "socket"}


def test_cxi_recipe_is_the_slingshot_set() -> None:
    cxi = network.get("cxi")
    assert cxi is not None
    always = cxi.env("always")
    assert always.items() >= SLINGSHOT.items()
    multi = cxi.env("multi_node")
    assert multi == {"NCCL_NET": "AWS Libfabric", "NCCL_PROTO": "^LL128"}
    assert "NCCL_NET" not in always  # never on one node
    proto = next(v for v in cxi.multi_node if v.name == "NCCL_PROTO")
    assert "nccl/issues/2001" in proto.source


def test_verbs_is_ncclss_own_ib_transport_without_a_plugin() -> None:
    verbs = network.get("verbs")
    assert verbs is not None
    assert verbs.nccl_net == "ib" and verbs.modules == ()
    assert verbs.env("multi_node") == {"NCCL_NET": "IB"}
    assert "NCCL_IB_HCA" in verbs.to_set


@pytest.mark.parametrize(
    ("providers", "want"),
    [
        (["cxi", "tcp", "udp", "shm"], "cxi"),
        (["efa", "tcp", "shm"], "efa"),
        (["verbs;ofi_rxm", "verbs", "tcp", "shm"], "verbs"),
        (["tcp", "udp", "shm"], "tcp"),
        ([], "tcp"),
        (None, "tcp"),
    ],
)
def test_pick_follows_the_providers(providers: list[str] | None, want: str) -> None:
    assert network.pick(providers).name == want


def test_isambard_reads_its_block_from_the_cxi_recipe() -> None:
    text = (REPO / "envs" / "isambard.toml").read_text()
    assert 'recipe = "cxi"' in text
    block = text.split("[env]", 1)[1].split("[slurm]", 1)[0]
    assert not re.search(r"^FI_CXI_|^NCCL_", block, re.M)  # no copy
    p = profile.load("isambard")
    assert p.env_for(nodes=1).items() >= SLINGSHOT.items()
    assert "NCCL_NET" not in p.env_for(nodes=1)
    assert p.env_for(nodes=2)["NCCL_NET"] == "AWS Libfabric"
    assert p.env_for(nodes=2)["NCCL_PROTO"] == "^LL128"


def test_a_profile_value_wins_over_its_recipe(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[env]\nrecipe = "cxi"\n[env.always]\nNCCL_SOCKET_IFNAME = "hsn0"\nNCCL_NET = "Socket"\n'
    )
    p = profile.load_path(path)
    assert p.env_for(nodes=1)["NCCL_SOCKET_IFNAME"] == "hsn0"
    assert p.env_for(nodes=2)["NCCL_NET"] == "Socket"  # not reset by the recipe's multi_node
    assert p.env_for(nodes=2)["FI_PROVIDER"] == "cxi"


def test_an_unknown_recipe_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "site.toml"
    path.write_text('[profile]\nname = "site"\n\n[env]\nrecipe = "slingshot"\n')
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "(line 5): [env] recipe = 'slingshot' names no network recipe" in err
    assert "cxi, efa, verbs, tcp" in err
