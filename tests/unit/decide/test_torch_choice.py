"""The one torch decision (``decide/torch_choice.choose_torch``): a wish in, the build,
its torchvision/torchaudio pair and the reasons out; ``require`` is exit 3."""

from __future__ import annotations

import pytest

from hpcenv.decide.torch_choice import TorchWish, choose_torch, pair_of, runs_on
from hpcenv.facts import collect
from hpcenv.utils.errors import NoCompatibleBuild
from support import FACTS
from support.fakenodes import node
from support.knowledge_snapshot import with_companions_of

V100 = collect.load(FACTS / "v100-supercloud.json")  # 575.57.08
GH200 = collect.load(FACTS / "gh200-isambard.json")  # aarch64, 565.57.01


def test_the_answer_carries_the_build_its_pair_and_the_wish() -> None:
    wish = TorchWish(spec="==2.9.1")
    answer = choose_torch(V100, wish)
    assert answer.wish == wish and answer.runs
    assert (answer.choice.version, answer.choice.backend) == ("2.9.1", "cu128")
    pair = answer.companions
    assert pair is not None and pair.label == "cu128"
    assert (pair.torchvision, pair.torchaudio) == ("0.24.1", "2.9.1")
    assert answer.reasons and answer.require() == answer.choice


def test_a_pin_is_the_wish_variant_and_its_pair_shares_it() -> None:
    answer = choose_torch(V100, TorchWish(spec="==2.6.0", pin="cu124"))
    assert answer.choice.backend == "cu124"
    assert answer.companions is not None and answer.companions.torchvision == "0.21.0"
    assert answer.companions.label == "cu124"


def test_nothing_runs_is_an_answer_and_require_is_exit_3() -> None:
    answer = choose_torch(node("x86_64", "450.51.06", ("7.0",)), TorchWish(spec="==2.9.1"))
    assert not answer.runs and answer.companions is None
    with pytest.raises(NoCompatibleBuild):
        answer.require()


def test_a_release_with_no_published_companion_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    with_companions_of(monkeypatch)  # 2026-11-27: no torchaudio required torch 2.13.0
    pair = pair_of("2.13.0", "cpu")
    assert pair.torchvision == "0.28.0" and pair.torchaudio is None
    assert pair.torchaudio_reason and "none published for torch 2.13.0" in pair.torchaudio_reason


def test_runs_on_is_the_decision() -> None:
    assert runs_on(GH200)("2.9.1")  # a cu126/cu128 build for the GH200's 565 driver
    assert not runs_on(GH200)("2.1.2")  # no aarch64 CUDA build of 2.1.2
