"""packaging's answers kept between runs of one audit (``utils/answers.py``): a second run in
the same scope computes nothing it computed before; outside a scope everything is computed;
an error is never kept; an entry someone else could have written is not believed; another
scope (another lock) starts empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcenv.utils import answers


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hpcenv" / "answers"


class _Count:
    """A computation that counts how often it ran (stands in for packaging's)."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.runs = 0

    def __call__(self) -> object:
        self.runs += 1
        return self.answer


def test_outside_a_scope_every_answer_is_computed(cache: Path) -> None:
    compute = _Count(True)
    assert answers.remembered("marker", ("m",), compute) is True
    assert answers.remembered("marker", ("m",), compute) is True
    assert compute.runs == 2
    assert not cache.exists()


def test_a_second_run_of_a_scope_computes_nothing_it_answered_before(cache: Path) -> None:
    first, second = _Count(True), _Count(("torch", None, ("2.9.1",)))
    with answers.kept("lock-a"):
        assert answers.remembered("marker", ("m", (("k", "v"),)), first) is True
        assert answers.remembered("requirement", ("torch @ x",), second) == second.answer
        assert answers.remembered("marker", ("m", (("k", "v"),)), first) is True
    assert (first.runs, second.runs) == (1, 1)
    assert len(list(cache.glob("*.marshal"))) == 1
    never = _Count(False)
    with answers.kept("lock-a"):  # the next run: read back, not asked again
        assert answers.remembered("marker", ("m", (("k", "v"),)), never) is True
        assert answers.remembered("requirement", ("torch @ x",), never) == second.answer
        assert answers.remembered("marker", ("other",), never) is False  # a new question
    assert never.runs == 1
    with answers.kept("lock-b"):  # another lock's scope starts empty
        assert answers.remembered("marker", ("m", (("k", "v"),)), never) is False
    assert never.runs == 2


def test_an_error_is_not_kept_and_a_failed_run_stores_nothing(cache: Path) -> None:
    def bad() -> bool:
        raise ValueError("cannot be evaluated")

    for _ in range(2):
        with pytest.raises(ValueError), answers.kept("lock-a"):
            answers.remembered("marker", ("ok",), _Count(True))
            answers.remembered("marker", ("bad",), bad)
    assert not list(cache.glob("*.marshal"))
    again = _Count(True)
    with answers.kept("lock-a"):
        answers.remembered("marker", ("ok",), again)
    assert again.runs == 1


def test_an_entry_someone_else_could_write_is_not_believed(cache: Path) -> None:
    with answers.kept("lock-a"):
        answers.remembered("marker", ("m",), _Count(True))
    (entry,) = cache.glob("*.marshal")
    entry.chmod(0o664)  # the group could have written it
    recount = _Count(True)
    with answers.kept("lock-a"):
        answers.remembered("marker", ("m",), recount)
    assert recount.runs == 1
    if os.geteuid() == 0:
        os.chown(entry, 65534, 65534)  # nobody's
        entry.chmod(0o644)
        with answers.kept("lock-a"):
            answers.remembered("marker", ("m",), recount)
        assert recount.runs == 2


def test_no_scope_kept_without_a_usable_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "xdg"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    compute = _Count(True)
    for _ in range(2):
        with answers.kept("lock-a"):
            assert answers.remembered("marker", ("m",), compute) is True
    assert compute.runs == 2


def test_an_hpcenv_whose_rules_changed_asks_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answers carry hpcenv's rules around packaging's (a wheel's platforms, a torch
    spec's pin): an upgrade or an edit of a module in ``RULES`` starts the scope empty."""
    package = tmp_path / "hpcenv"
    for rel in answers.RULES:
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_bytes((answers._package() / rel).read_bytes())
    monkeypatch.setattr(answers, "_package", lambda: package)
    compute = _Count(True)
    for _ in range(2):  # the same hpcenv: asked once
        with answers.kept("lock-a"):
            answers.remembered("wheel_fits", ("w",), compute)
    assert compute.runs == 1
    rule = package / "models" / "wheel_fit.py"
    rule.write_bytes(rule.read_bytes() + b"\n# a platform rule changed\n")
    with answers.kept("lock-a"):
        answers.remembered("wheel_fits", ("w",), compute)
    assert compute.runs == 2


def test_every_module_that_keeps_answers_is_in_the_key() -> None:
    package = answers._package()
    asking = {
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "answers.remembered(" in p.read_text() or p.name == "answers.py"
    }
    assert asking == set(answers.RULES)


def test_in_specifier_is_packagings_answer(cache: Path) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    with answers.kept("lock-a"):
        for spec in (">=0.10,<0.11", "==2.9.*", ">=2.10.0.dev0"):
            for v in ("0.10.1", "0.11.0rc1", "0.10.2rc1", "2.9.1", "2.10.0.dev20251001"):
                for pre in (None, True, False):
                    want = SpecifierSet(spec).contains(Version(v), pre)
                    assert answers.in_specifier(spec, v, prereleases=pre) is want
        with pytest.raises(InvalidVersion):
            answers.in_specifier(">=1", "not a version")
