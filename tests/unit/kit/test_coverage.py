"""``hpcenv.kit.coverage``: which code runs on which GPU, and which archs a library was
built for. The library-level rule is checked on the translation-unit arch sets of two
real libraries (``tests/data/fatbin/units.json``: torch 2.13.0's ``libtorch_cuda.so`` and
cuSPARSELt 0.8.1, read from their PyPI wheels; origin and sha256 recorded there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcenv.kit.coverage import (
    covers,
    library_archs,
    parse_arch,
    ptx_runs,
    sass_runs,
    sm_name,
    sorted_archs,
)
from support import DATA

UNITS = json.loads((Path(DATA) / "fatbin" / "units.json").read_text())


@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        ("8.0", "8.0", True),
        ("8.0", "8.6", True),  # same major, later minor
        ("8.6", "8.0", False),  # never backwards
        ("8.0", "9.0", False),  # never across majors
        ("9.0a", "9.0", True),
        ("9.0a", "9.1", False),  # arch-specific: exactly that GPU
        ("10.0a", "10.3", False),
        ("10.0f", "10.3", True),  # family: same major, later minor
        ("10.0f", "10.0", True),
        ("10.3f", "10.0", False),
        ("10.0f", "12.0", False),
        ("12.0f", "12.1", True),
    ],
)
def test_sass_rule(arch: str, cap: str, runs: bool) -> None:
    assert sass_runs(arch, cap) is runs


@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        ("8.0", "12.0", True),  # plain PTX JITs for any later GPU
        ("9.0", "8.9", False),
        ("9.0a", "9.0", True),
        ("9.0a", "10.0", False),
        ("10.0f", "10.3", True),
        ("10.0f", "12.0", False),  # family PTX stays in the family
    ],
)
def test_ptx_rule(arch: str, cap: str, runs: bool) -> None:
    assert ptx_runs(arch, cap) is runs


def test_covers_prefers_sass_and_needs_jit_for_ptx() -> None:
    assert covers("8.9", ["7.5", "8.0", "8.6", "9.0"], ["9.0"], ptx_jit=True) == "sm_86"
    assert covers("9.0", ["8.0", "9.0", "9.0a"], [], ptx_jit=False) == "sm_90a"
    assert covers("10.3", ["10.0f"], [], ptx_jit=False) == "sm_100f"
    assert covers("12.0", ["8.0", "9.0"], ["8.0", "9.0"], ptx_jit=True) == "PTX 9.0"
    assert covers("12.0", ["8.0", "9.0"], ["9.0"], ptx_jit=False) is None
    assert covers("7.0", ["7.5", "8.0"], ["8.0"], ptx_jit=True) is None  # V100 on cu128+
    assert covers("10.0", [], ["9.0a"], ptx_jit=True) is None


def test_spellings() -> None:
    assert parse_arch("sm_90a") == parse_arch("9.0a") == parse_arch("compute_90a") == (9, 0, "a")
    assert parse_arch("sm_100f") == (10, 0, "f")
    assert parse_arch("121") == (12, 1, "")
    assert sm_name("10.3f") == "sm_103f"
    in_order = ["8.6", "9.0", "9.0f", "9.0a", "10.0"]
    assert sorted_archs(["9.0a", "10.0", "9.0", "8.6", "9.0f"]) == in_order
    with pytest.raises(ValueError, match="not a GPU arch"):
        parse_arch("hopper")
    with pytest.raises(ValueError, match="not a compute capability"):
        sass_runs("9.0", "nine")


def units_of(lib: str, kind: str) -> list[list[str]]:
    out = []
    for count, archs in UNITS[lib]["units"]:
        mine = [a.split(" ", 1)[1] for a in archs if a.startswith(kind + " ")]
        out += [mine] * count
    return [u for u in out if u]


def test_torch_special_kernels_are_partial() -> None:
    full, partial = library_archs(units_of("torch-2.13.0", "sass"))
    assert full == ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    assert partial == ["8.9", "9.0a", "10.0a", "10.3f", "12.0a", "12.1a"]
    # the counts the rule saw are the library's own
    assert UNITS["torch-2.13.0"]["sass"]["8.9"] == 1
    assert UNITS["torch-2.13.0"]["sass"]["10.0a"] == 59


def test_per_arch_kernel_library_keeps_its_older_archs() -> None:
    """cuSPARSELt: 560 entries for 10.0, 41 for 8.0 in units of their own: 8.0 is real."""
    full, partial = library_archs(units_of("nvidia-cusparselt-cu12-0.8.1", "sass"))
    assert {"8.0", "8.6", "8.9", "9.0a", "10.0", "12.0"} <= set(full)
    assert {"9.0", "10.3", "12.1"} == set(partial)  # fewer than half of their major's best


def test_one_unit_riding_along_is_partial() -> None:
    """A library built for 7.5/8.0 with one unit also built for 9.0a: a 9.0 GPU has only
    that unit's kernels."""
    units = [["7.5", "8.0"]] * 40 + [["7.5", "8.0", "9.0a"]]
    assert library_archs(units) == (["7.5", "8.0"], ["9.0a"])
    # the example: one sm_89 kernel in a library built for 8.0 and 9.0
    assert library_archs([["8.0", "9.0"]] * 30 + [["8.9"]]) == (["8.0", "9.0"], ["8.9"])


def test_even_builds_are_all_full() -> None:
    assert library_archs([["7.0", "8.0", "9.0"]] * 7) == (["7.0", "8.0", "9.0"], [])
    assert library_archs([]) == ([], [])
