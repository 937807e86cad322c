"""``uv export --frozen`` started early (``hpcenv.project.uv_export``): ``hpcenv audit``
starts it for its target before importing what judges the lock, and ``uv_lock.export``
takes that run's text, the same text (or error) a run at that moment gives; an export
for another project or selection, or one no audit took, is never handed out."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hpcenv.project import uv_export
from hpcenv.project.uv_export import DEFAULT_SELECTION, Selection
from hpcenv.tools import uv
from hpcenv.utils.errors import CommandFailed
from support import DATA, require

PRIME = DATA / "projects" / "prime-rl"


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every real ``uv export`` run, by its selection flags."""
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    runs: list[tuple[str, ...]] = []
    real = uv.project_export

    def counted(project: Path, *, selection: tuple[str, ...] = (), **kw: object) -> str:
        runs.append(tuple(selection))
        return real(project, selection=selection, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(uv, "project_export", counted)
    return runs


def test_an_export_started_early_is_taken_once_and_is_uvs_text(
    exports: list[tuple[str, ...]],
) -> None:
    with uv_export.early(PRIME / "uv.lock", DEFAULT_SELECTION):
        text = uv_export.run(PRIME, DEFAULT_SELECTION)
    assert exports == [()]
    assert text == uv.project_export(PRIME) and "torch==" in text


def test_a_project_directory_is_exported_early_as_its_lock(
    exports: list[tuple[str, ...]],
) -> None:
    with uv_export.early(PRIME, DEFAULT_SELECTION):
        uv_export.run(PRIME, DEFAULT_SELECTION)
    assert exports == [()]


def test_another_selection_is_run_then_and_an_untaken_export_is_dropped(
    exports: list[tuple[str, ...]],
) -> None:
    other = Selection(no_default_groups=True)
    with uv_export.early(PRIME / "uv.lock", DEFAULT_SELECTION):
        uv_export.run(PRIME, other)
    assert sorted(exports) == [(), ("--no-default-groups",)]
    uv_export.run(PRIME, DEFAULT_SELECTION)  # after the block: run again, not the early one
    assert len(exports) == 3


def test_an_early_export_that_failed_raises_what_uv_said(
    exports: list[tuple[str, ...]], tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1"\n')
    (tmp_path / "uv.lock").write_text("not a lock\n")
    with pytest.raises(CommandFailed) as direct:
        uv.project_export(tmp_path)
    with (
        uv_export.early(tmp_path / "uv.lock", DEFAULT_SELECTION),
        pytest.raises(CommandFailed) as early,
    ):
        uv_export.run(tmp_path, DEFAULT_SELECTION)
    assert str(early.value) == str(direct.value)
    assert early.value.returncode == direct.value.returncode


def test_a_symlinked_lock_or_one_without_its_project_is_not_exported_early(
    tmp_path: Path,
) -> None:
    """A link is checked for containment before anything reads it; a lock copied out of its
    project is exported from a temporary copy (``uv_lock.export``), not here."""
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copyfile(PRIME / "uv.lock", lone / "uv.lock")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (linked / "uv.lock").symlink_to(PRIME / "uv.lock")
    assert uv_export.lock_of(lone / "uv.lock") is None
    assert uv_export.lock_of(linked / "uv.lock") is None
    assert uv_export.lock_of(linked) is None
    assert uv_export.lock_of(PRIME / "pyproject.toml") is None
    assert uv_export.lock_of(PRIME) == PRIME / "uv.lock"
