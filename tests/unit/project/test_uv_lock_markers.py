"""Markers of a ``uv.lock``, evaluated by ``packaging`` (``hpcenv.project.uv_lock``).

uv's universal lock names conflicting extras and groups as extras
(``extra == 'group-13-open-instruct-cuda12'``). Which packages are installed comes from
``uv export --frozen`` (platform-only markers); the lock's own markers are still read for
the edges between installed packages (what torch pulls) and the fork that holds: each is
evaluated by ``packaging`` with each active conflict item in turn as ``extra``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.project.audit import marker_environment
from hpcenv.project.uv_lock import ConflictItem, _holds_with
from hpcenv.utils.errors import BadInput

CU12 = "group-13-open-instruct-cuda12"
CU13 = "group-13-open-instruct-cuda13"
#: a real edge of open-instruct's uv.lock (accelerate -> torch 2.10.0+cu130)
EDGE = (
    "(platform_machine != 'x86_64' and sys_platform == 'linux') or (sys_platform == 'linux' "
    f"and extra == '{CU13}') or (sys_platform != 'linux' and extra == '{CU12}' and "
    f"extra == '{CU13}')"
)
WHERE = Path("uv.lock")


def test_encoding_is_uvs() -> None:
    assert ConflictItem(package="open-instruct", group="cuda12").encoded == CU12
    assert ConflictItem(package="nanochat", extra="gpu").encoded == "extra-8-nanochat-gpu"
    assert ConflictItem(package="My_Project", extra="GPU").encoded == "extra-10-my-project-gpu"
    assert ConflictItem(package="prime-rl").encoded == "project-8-prime-rl"


def test_the_active_group_decides_the_edge() -> None:
    x86, arm = marker_environment("x86_64", "3.12.3"), marker_environment("aarch64", "3.12.3")
    assert not _holds_with(EDGE, x86, ("", CU12), WHERE)
    assert _holds_with(EDGE, x86, ("", CU13), WHERE)
    assert _holds_with(EDGE, arm, ("", CU12), WHERE)  # aarch64 takes cu130 whatever the group
    assert _holds_with(f"extra != '{CU12}' and extra != '{CU13}'", x86, ("",), WHERE)
    assert not _holds_with(f"extra != '{CU12}' and extra != '{CU13}'", x86, (CU12,), WHERE)


def test_other_comparisons_are_packagings() -> None:
    env = marker_environment("x86_64", "3.10.12")
    assert _holds_with("python_full_version < '3.11' and 'linux' == sys_platform", env, (), WHERE)
    assert _holds_with("platform_machine in 'x86_64 AMD64'", env, (), WHERE)
    assert not _holds_with("'arm' in platform_machine", env, (), WHERE)


@pytest.mark.parametrize(
    "bad", ["platform_machine ~~ 'x'", "(sys_platform == 'linux'", "extra ==", "and", "x == 'y'"]
)
def test_bad_markers_are_bad_input(bad: str) -> None:
    with pytest.raises(BadInput, match=r"uv\.lock: marker"):
        _holds_with(bad, marker_environment("x86_64", "3.12"), ("",), WHERE)


@pytest.mark.parametrize(
    ("arch", "python", "requires"),
    [("aarch64", "3.12.3", None), ("x86_64", "3.11", None), ("x86_64", None, ">=3.11, <3.14"),
     ("aarch64", None, None)],
)  # fmt: skip
def test_the_marker_environment_is_packagings_with_the_nodes_values(
    arch: str, python: str | None, requires: str | None
) -> None:
    """Read without packaging's ``default_environment`` when the Python is known (it imports
    ``platform``): the same values as packaging's environment with the node's put over it."""
    from packaging.markers import default_environment

    want = {k: str(v) for k, v in default_environment().items()}
    want.update(
        platform_machine=arch, sys_platform="linux", platform_system="Linux", os_name="posix",
        implementation_name="cpython", platform_python_implementation="CPython", extra="",
    )  # fmt: skip
    known = python or ("3.11" if requires else None)
    if known:
        full = ".".join([*known.split("."), "0", "0"][:3])
        want.update(
            python_version=".".join(known.split(".")[:2]),
            python_full_version=full,
            implementation_version=full,
        )
    assert marker_environment(arch, python, requires) == want
