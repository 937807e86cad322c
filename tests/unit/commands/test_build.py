"""``hpcenv build --project``'s words, read from the typed result of the project's install
(attributes, not keys of a dict)."""

from __future__ import annotations

from hpcenv.build.results import ProjectInstall
from hpcenv.commands.build import _project_lines
from hpcenv.project.install_set import Change


def test_a_project_build_says_what_it_decided() -> None:
    done = ProjectInstall(
        project="/p",
        selection="uv.lock: default groups",
        python="3.12",
        python_why="its .python-version",
        torch_before="2.9.1+cu130",
        variant="cu126",
        warnings=("torch 2.9.1 was resolved for 2.9.1+cu130",),
        changes=(
            Change(name="torch", before="2.9.1+cu130", after="torch==2.9.1+cu126", why="node"),
            Change(name="nvidia-cuda-runtime", before="13.0.96", after=None, why="cu13"),
        ),
        copy_skipped=("left out 3 files over 100 MB",),
        torch_after="2.9.1+cu126",
    )
    assert _project_lines(done) == [
        "  audited: uv.lock: default groups",
        "  python 3.12: its .python-version",
        "  torch 2.9.1+cu130 -> 2.9.1+cu126",
        "  torch: torch==2.9.1+cu126 (node)",
        "  nvidia-cuda-runtime: left out (cu13)",
        "  left out 3 files over 100 MB",
        "  warning: torch 2.9.1 was resolved for 2.9.1+cu130",
    ]
    assert _project_lines(None) == []
