"""The one wheel-fits-node rule (``hpcenv.models.wheel_fit``): whether a tag installs is
read from the node's (interpreter, abi) pairs and platforms, without building its ~1,800
tags; the answer is membership in ``node_tags`` (packaging's own tag lists) for every tag."""

from __future__ import annotations

import itertools

import pytest
from packaging.tags import Tag, parse_tag

from hpcenv.models.wheel_fit import _installs, node_tags, tags_fit, wheel_fits

PYTHONS = ("3.8", "3.10", "3.11", "3.12.3", "3.13", "3.13t", "3.14", "not-a-python")
ARCHES = ("x86_64", "aarch64")
GLIBCS = (None, "2.5", "2.17", "2.28", "2.34", "2.39", "junk")
NODES = list(itertools.product(PYTHONS, ARCHES, GLIBCS))

#: every tag any node installs, and tags none does (musl, macOS, other interpreters)
UNIVERSE = frozenset(
    set().union(*(node_tags(*n) for n in NODES))
    | {
        *parse_tag("cp312-cp312-musllinux_1_2_x86_64"),
        *parse_tag("cp312-cp312-macosx_11_0_arm64"),
        *parse_tag("pp310-pypy310_pp73-manylinux_2_17_x86_64"),
        *parse_tag("cp312-cp312-win_amd64"),
        *parse_tag("py2-none-any"),
        *parse_tag("cp39-abi3-manylinux_2_28_ppc64le"),
    }
)


@pytest.mark.parametrize(("python", "arch", "glibc"), NODES)
def test_installs_is_membership_in_the_nodes_tags(
    python: str, arch: str, glibc: str | None
) -> None:
    tags = node_tags(python, arch, glibc)
    assert {t for t in UNIVERSE if _installs(t, python, arch, glibc)} == tags


def test_real_wheels_fit_as_uv_installs_them() -> None:
    torch = "torch-2.9.1+cu128-cp312-cp312-manylinux_2_28_aarch64.whl"
    assert wheel_fits(torch, python="3.12", arch="aarch64", glibc="2.34")
    assert not wheel_fits(torch, python="3.12", arch="aarch64", glibc="2.17")
    assert not wheel_fits(torch, python="3.11", arch="aarch64", glibc="2.34")
    assert not wheel_fits(torch, python="3.12", arch="x86_64")
    vllm = "vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl"
    assert wheel_fits(vllm, python="3.13", arch="x86_64", glibc="2.28")
    assert not wheel_fits(vllm, python="3.13t", arch="x86_64", glibc="2.28")  # no abi3
    assert wheel_fits("six-1.17.0-py2.py3-none-any.whl", python="3.12", arch="aarch64")
    assert tags_fit(["cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"],
                    python="3.11", arch="x86_64", glibc="2.17")  # fmt: skip
    assert not wheel_fits("not-a-wheel.whl", python="3.12", arch="x86_64")


def test_a_tag_is_the_same_tag_however_written() -> None:
    assert _installs(Tag("CP312", "CP312", "LINUX_X86_64"), "3.12", "x86_64", None)
