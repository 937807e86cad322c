"""SLURM's compressed host lists, expanded by our own expander (and by scontrol)."""

from __future__ import annotations

import pytest

from hpcenv.models import hostlist
from hpcenv.utils.errors import BadInput


@pytest.mark.parametrize(
    ("nodelist", "hosts"),
    [
        ("node1", ["node1"]),
        ("a,b,c", ["a", "b", "c"]),
        ("nid[001-004,010]", ["nid001", "nid002", "nid003", "nid004", "nid010"]),
        ("gpu-[1-2]-[01-02]", ["gpu-1-01", "gpu-1-02", "gpu-2-01", "gpu-2-02"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("c[1,3],d[2-3]", ["c1", "c3", "d2", "d3"]),
        ("login,nid[9-10]", ["login", "nid9", "nid10"]),
        ("r[1-2]n[1,3]", ["r1n1", "r1n3", "r2n1", "r2n3"]),
        ("x[5]", ["x5"]),
    ],
)
def test_expand(nodelist: str, hosts: list[str]) -> None:
    assert hostlist.expand(nodelist) == hosts


@pytest.mark.parametrize("bad", ["nid[1-", "nid]1[", "nid[a-b]", "nid[4-1]", "nid[1-2-3]"])
def test_bad_input_is_bad_input(bad: str) -> None:
    with pytest.raises(BadInput, match="host list"):
        hostlist.expand(bad)
