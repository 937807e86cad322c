"""The torch ABI probe's answer, parsed at the boundary into the wheel cache's key."""

from __future__ import annotations

import json

import pytest

from hpcenv.build.flashattn import AbiKey
from hpcenv.utils.errors import BuildFailed

ANSWER = {
    "torch": "2.9.1+cu126",
    "torch_cuda": "12.6",
    "cxx11abi": True,
    "python_tag": "cp311",
    "arch": "aarch64",
}


def test_the_key_fields_are_the_strings_the_cache_digest_always_covered() -> None:
    """``str()`` of each value, in the probe's order: a wheel cached before keeps its key."""
    for answer in (ANSWER, {**ANSWER, "torch_cuda": None, "cxx11abi": False}):
        key = AbiKey.parse(json.dumps(answer), "/v")
        assert list(key.fields().items()) == [(k, str(v)) for k, v in answer.items()]


@pytest.mark.parametrize(
    "line", ["", "Traceback (most recent call last):", "[]", json.dumps({**ANSWER, "arch": 1})]
)
def test_another_answer_is_a_build_failure_naming_the_venv(line: str) -> None:
    with pytest.raises(BuildFailed, match=r"^/venv: the torch ABI probe printed"):
        AbiKey.parse(line, "/venv")
