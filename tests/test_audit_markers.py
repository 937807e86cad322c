"""``hpcenv.project.markers``: PEP 508 markers with several active extras, uv's conflicts."""

from __future__ import annotations

import pytest

from hpcenv.project.audit import marker_environment
from hpcenv.project.markers import (
    Evaluator,
    MarkerError,
    encode_extra,
    encode_group,
    encode_project,
)

CU12 = "group-13-open-instruct-cuda12"
CU13 = "group-13-open-instruct-cuda13"
#: a real edge of open-instruct's uv.lock (accelerate -> torch 2.10.0+cu130)
EDGE = (
    "(platform_machine != 'x86_64' and sys_platform == 'linux') or (sys_platform == 'linux' "
    f"and extra == '{CU13}') or (sys_platform != 'linux' and extra == '{CU12}' and "
    f"extra == '{CU13}')"
)


def test_encoding_is_uvs() -> None:
    assert encode_group("open-instruct", "cuda12") == CU12
    assert encode_extra("nanochat", "gpu") == "extra-8-nanochat-gpu"
    assert encode_extra("My_Project", "GPU") == "extra-10-my-project-gpu"
    assert encode_project("prime-rl") == "project-8-prime-rl"


def test_several_extras_at_once() -> None:
    x86, arm = marker_environment("x86_64", "3.12.3"), marker_environment("aarch64", "3.12.3")
    assert not Evaluator(x86, [CU12])(EDGE)
    assert Evaluator(x86, [CU13])(EDGE)
    assert Evaluator(arm, [CU12])(EDGE)  # aarch64 takes cu130 whatever the group
    both = f"extra == '{CU12}' and extra == '{CU13}'"
    assert Evaluator(x86, [CU12, CU13])(both) and not Evaluator(x86, [CU12])(both)
    assert Evaluator(x86)(f"extra != '{CU12}' and extra != '{CU13}'")
    assert Evaluator(x86)(None) and Evaluator(x86)("")


def test_other_comparisons_go_to_packaging() -> None:
    ev = Evaluator(marker_environment("x86_64", "3.10.12"))
    assert ev("python_full_version < '3.11' and 'linux' == sys_platform")
    assert ev("platform_machine in 'x86_64 AMD64'") and not ev("'arm' in platform_machine")
    assert ev("platform_machine not in 'aarch64'")


@pytest.mark.parametrize(
    "bad", ["platform_machine ~~ 'x'", "(sys_platform == 'linux'", "extra ==", "and", "x == 'y'"]
)
def test_bad_markers_raise_marker_error(bad: str) -> None:
    with pytest.raises(MarkerError):
        Evaluator(marker_environment("x86_64", "3.12"))(bad)
