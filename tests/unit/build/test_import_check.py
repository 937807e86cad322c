"""The import check's answer, parsed at the boundary: the line ``hpcenv.kit.imports``
prints in the new environment becomes an ``ImportCheck`` or nothing.

``groups``: which packages each import process of the build's check takes. torch beside the
others is faster (2 CPUs, torch, numpy and ray: 3.3-4.5 s against 4.2-5.2 s), but numpy
went to both processes and was compiled and imported twice (torch's own import loads it:
0.3-0.45 s more CPU); it now goes with torch."""

from __future__ import annotations

import json

import pytest

from hpcenv.build import import_check
from hpcenv.build.import_check import ImportCheck, parse


def test_the_kits_line_becomes_an_import_check() -> None:
    line = json.dumps(
        {"python": "3.11.9", "torch": None, "imports": {"numpy": "numpy"}, "failed": {}}
    )
    assert parse(line) == ImportCheck(python="3.11.9", imports={"numpy": "numpy"})


@pytest.mark.parametrize(
    "line",
    [
        "Segmentation fault",
        "[1]",
        '{"python": "3.11", "torch": null, "imports": {}}',  # no "failed"
        '{"python": "3.11", "torch": null, "imports": {"x": 1}, "failed": {}}',
        '{"python": 3, "torch": null, "imports": {}, "failed": {}}',
    ],
)
def test_anything_else_is_no_answer(line: str) -> None:
    assert parse(line) is None


LOADED = frozenset({"numpy"})


def test_what_torch_loads_goes_with_torch_beside_the_others() -> None:
    got = import_check.groups(["torch", "numpy", "ray"], 2, LOADED)
    assert got == [["torch", "numpy"], ["ray"]]


def test_one_cpu_imports_everything_in_one_process_torch_first() -> None:
    got = import_check.groups(["numpy", "torch", "ray"], 1, LOADED)
    assert got == [["torch", "numpy", "ray"]]


def test_nothing_but_what_torch_loads_is_one_process() -> None:
    assert import_check.groups(["torch", "numpy"], 64, LOADED) == [["torch", "numpy"]]
    assert import_check.groups([], 64, LOADED) == [["torch"]]


def test_numpy_is_known_to_come_with_torch() -> None:
    assert "numpy" in import_check.with_torch()  # knowledge/packages.toml


def test_a_set_without_torch_imports_its_names_alone() -> None:
    assert import_check.groups(["jax", "numpy"], 64, LOADED, torch=False) == [["jax", "numpy"]]
