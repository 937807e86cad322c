"""The cache of ``uv pip compile`` answers (``project/compile``) is keyed by uv's resolution
settings in the environment: a set resolved under ``UV_EXCLUDE_NEWER`` (PyPI as of a date,
the way the suite resolves) or another index is never served to a command run without it.
Before: the key held the files and the target only, so one answer served both."""

from __future__ import annotations

import pytest

from hpcenv.project import compile as uv_compile
from hpcenv.project.readers import Request

REQUEST = Request(source="requirements.txt", kind="requirements", requirements=("numpy",))
TARGET = uv_compile.Target(arch="x86_64", glibc="2.31", python="3.11")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("UV_EXCLUDE_NEWER", "2026-12-02T00:00:00Z"),
        ("UV_INDEX_URL", "https://user:secret@mirror.example/simple"),
        ("UV_PRERELEASE", "allow"),
    ],
)
def test_a_resolution_setting_changes_the_key(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in uv_compile.RESOLUTION_ENV:
        monkeypatch.delenv(key, raising=False)
    plain = uv_compile.cache_key(REQUEST, TARGET)
    assert uv_compile.cache_key(REQUEST, TARGET) == plain  # the same inputs, the same key
    monkeypatch.setenv(name, value)
    keyed = uv_compile.cache_key(REQUEST, TARGET)
    assert keyed != plain and "secret" not in keyed
    monkeypatch.setenv("UV_NO_PROGRESS", "1")  # not a resolution setting
    assert uv_compile.cache_key(REQUEST, TARGET) == keyed
