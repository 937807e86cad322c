"""The import check's answer, parsed at the boundary: the line ``hpcenv.kit.imports``
prints in the new environment becomes an ``ImportCheck`` or nothing."""

from __future__ import annotations

import json

import pytest

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
