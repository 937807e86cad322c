"""``tools/uv.error_summary``: uv's error as one line, also when uv wrapped it at $COLUMNS."""

from __future__ import annotations

from hpcenv.tools import uv

#: ``uv export --frozen`` of a lock with two torches, under COLUMNS=80 (uv 0.13.9): the
#: cause wraps onto an indented line (CI's nox and pytest-xdist set COLUMNS).
WRAPPED = """error: Failed to parse `uv.lock`
  cause: Dependency `torch` has missing `source` field but has more than one
         matching package
"""


def test_a_wrapped_cause_is_joined() -> None:
    assert uv.error_summary(WRAPPED) == (
        "Failed to parse `uv.lock`: Dependency `torch` has missing `source` field but has "
        "more than one matching package"
    )


def test_the_cause_naming_a_file_and_the_root_cause_are_kept() -> None:
    out = (
        "error: Failed to download `torch==2.9.1`\n"
        "  cause: Failed to fetch: `http://127.0.0.1:9/whl/torch.whl`\n"
        "  cause: Connection refused (os error 111)\n"
        "hint: check the index\n"
    )
    assert uv.error_summary(out) == (
        "Failed to download `torch==2.9.1`: Failed to fetch: `http://127.0.0.1:9/whl/torch.whl`"
        ": Connection refused (os error 111)"
    )
