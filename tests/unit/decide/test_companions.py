"""torchvision/torchaudio of torch's release pair (``decide/companions``), on the real
pairing data (torch_companions.toml, read from the companions' wheels on PyPI), and the
sets that hold another release or another variant."""

from __future__ import annotations

import pytest

from hpcenv.decide.companions import companions_for, mismatches
from hpcenv.utils.errors import BadInput
from support.knowledge_snapshot import with_companions_of


def test_the_torch_of_the_issue_gets_its_torchvision_and_no_torchaudio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # plan of a torch>=2.4 pyproject chose torch 2.13.0+cpu and PyPI's newest companions
    # (the data of 2026-11-27: no torchaudio release required torch 2.13.0 yet)
    with_companions_of(monkeypatch)
    pair = companions_for("2.13.0+cpu")
    assert pair.torchvision == "0.28.0" and pair.label == "cpu"
    assert pair.torchaudio is None
    assert pair.torchaudio_reason and pair.torchaudio_reason.startswith(
        "none published for torch 2.13.0"
    )
    assert "torchvision-0.28.0-" in pair.source and "#sha256=" in pair.source
    assert pair.reasons == (pair.torchaudio_reason,)


def test_a_local_label_has_the_same_pair() -> None:
    plain, labelled = companions_for("2.6.0"), companions_for("2.6.0+cu124")
    assert (plain.torchvision, plain.torchaudio) == ("0.21.0", "2.6.0")
    assert (labelled.torchvision, labelled.torchaudio) == ("0.21.0", "2.6.0")
    assert labelled.label == "cu124" and plain.label is None and labelled.reasons == ()


@pytest.mark.parametrize(
    ("torch", "vision", "audio"),
    [
        ("1.8.0", "0.9.0", "0.8.0"),
        ("1.10.0", "0.11.1", "0.10.0"),  # torchvision 0.11.0 is yanked (pinned a missing torch)
        ("2.0.0", "0.15.1", "2.0.1"),  # 0.15.0 / 2.0.0 yanked: "incorrect torch dependency"
        ("2.9.1", "0.24.1", "2.9.1"),
        ("2.10.0", "0.25.0", "2.10.0"),
        ("2.14.0", "0.29.0", "2.11.1"),  # the exact pin, not 0.29.2's range
        ("2.15.0", "0.29.2", "2.11.1"),  # 0.29.2 requires torch>=2.14.0, 2.11.1 torch>=2.11
    ],
)
def test_pairs_read_from_the_wheels(torch: str, vision: str, audio: str | None) -> None:
    pair = companions_for(torch)
    assert (pair.torchvision, pair.torchaudio) == (vision, audio)


def test_a_torch_the_data_lacks_is_said_never_guessed() -> None:
    pair = companions_for("2.16.0")
    assert pair.torchvision is None and pair.torchaudio is None
    assert "no row for torch 2.16.0" in (pair.torchvision_reason or "")
    assert "hpcenv knowledge update" in (pair.torchvision_reason or "")


def test_a_torch_that_is_not_a_version_is_bad_input() -> None:
    with pytest.raises(BadInput, match=r"'2\.x' is not a version"):
        companions_for("2.x")


# --- sets holding another release or variant -----------------------------------------------


def test_the_cu126_profiles_torchaudio_of_another_release() -> None:
    found = mismatches({"torch": "2.9.1+cu126", "torchaudio": "2.11.0"}, arch="x86_64")
    assert [(m.name, m.version) for m in found] == [("torchaudio", "2.11.0")]
    assert found[0].why == (
        "torchaudio 2.11.0 names no torch in its METADATA; torch 2.9.1's pair is torchaudio 2.9.1"
    )
    assert "torchaudio-2.11.0-" in found[0].source and "#sha256=" in found[0].source
    assert found[0].fix == "use torchaudio==2.9.1+cu126 (torch 2.9.1+cu126's pair)"


def test_a_companion_pinned_to_another_torch() -> None:
    (m,) = mismatches({"torch": "2.6.0", "torchvision": "0.20.1"})
    assert (
        m.why
        == "torchvision 0.20.1 requires torch==2.5.1; torch 2.6.0's pair is torchvision 0.21.0"
    )
    assert m.fix == "use torchvision==0.21.0 (torch 2.6.0's pair)"


def test_pypis_cuda_torchvision_beside_a_cpu_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    with_companions_of(monkeypatch)  # 2026-11-27: no torchaudio for torch 2.13.0
    # the issue's plan: torch 2.13.0+cpu with PyPI's CUDA-13 torchvision 0.28.0, torchaudio 2.11.0
    found = mismatches(
        {"torch": "2.13.0+cpu", "torchvision": "0.28.0", "torchaudio": "2.11.0"}, arch="x86_64"
    )
    by = {m.name: m for m in found}
    assert "PyPI's build (cu130 on x86_64)" in by["torchvision"].why
    assert by["torchvision"].fix == "use torchvision==0.28.0+cpu (torch 2.13.0+cpu's pair)"
    assert by["torchaudio"].fix.startswith("remove torchaudio (none published for torch 2.13.0")


def test_labels_of_another_cuda_major() -> None:
    (m,) = mismatches({"torch": "2.6.0+cu124", "torchvision": "0.21.0+cu118"})
    assert m.why == "torchvision 0.21.0+cu118 is the cu118 build, torch 2.6.0+cu124 the cu124 build"


@pytest.mark.parametrize(
    "versions",
    [
        {"torch": "2.6.0+cu124", "torchvision": "0.21.0+cu124", "torchaudio": "2.6.0+cu124"},
        {"torch": "2.14.1", "torchvision": "0.29.2"},  # admitted by its torch>=2.14.0
        {"torch": "2.14.0", "torchvision": "0.29.1"},
        {"torch": "2.9.1", "torchvision": "0.24.1", "torchaudio": "2.9.1"},
        {"torch": "2.9.1+cu126", "torchvision": "0.24.1"},  # unlabelled, arch unknown
        # prime-rl's uv.lock: torchaudio 2.11.0 names no torch, and torch 2.11.0's pair
        # (torchaudio 2.11.1, torch>=2.11) pins no release to it: not judged (nor beside
        # 2.13.0, unlabelled: a variant not judged)
        {"torch": "2.11.0+cu128", "torchvision": "0.26.0+cu128", "torchaudio": "2.11.0+cu128"},
        {"torch": "2.13.0", "torchaudio": "2.11.0"},
        {"torch": "2.9.1", "torchvision": "9.9.9"},  # a release the data lacks: not judged
        {"torchvision": "0.20.1"},  # no torch
    ],
)
def test_sets_of_one_pair_have_no_finding(versions: dict[str, str]) -> None:
    assert mismatches(versions, arch=None) == ()
