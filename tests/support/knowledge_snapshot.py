"""hpcenv's knowledge with the torch/torchvision/torchaudio pairing of an earlier day, for the
tests of paths that the current data may no longer take (a torch release no torchaudio
requires: none published until torchaudio 2.11.1 admitted torch>=2.11). Stands in for the
committed torch_companions.toml only; every other table is the real one."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from hpcenv import knowledge
from hpcenv.knowledge import companions

from . import DATA

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NONE_PUBLISHED = DATA / "knowledge" / "torch_companions.c445fea.toml"


def with_companions_of(monkeypatch: pytest.MonkeyPatch) -> knowledge.Knowledge:
    """``knowledge.load()`` answers with the pairing of commit c445fea (2026-11-27) for the
    rest of the test; returns that knowledge."""
    data = companions.build(tomllib.loads(NONE_PUBLISHED.read_text()))
    know = dataclasses.replace(knowledge.load(), companions=data)
    monkeypatch.setattr(knowledge, "load", lambda: know)
    return know
