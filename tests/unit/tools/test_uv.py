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


#: ``uv venv --python 3.8`` where GitHub cannot be reached and no 3.8 is installed (uv
#: 0.13.9, recorded from ``build --project`` of tests/data/projects/conda-py38).
NO_PYTHON = """error: Request failed after 3 retries in 8.0s
  cause: Failed to download `https://github.com/astral-sh/python-build-standalone/releases/download/20241002/cpython-3.8.20%2B20241002-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz`
  cause: client error (Connect)
  cause: failed to lookup address information: Name or service not known
"""


def test_a_python_uv_could_not_download_is_named() -> None:
    """Issue 40: the build of a Python 3.8 project says that Python 3.8 could not be
    downloaded (``builder._build_failure`` words it), not only uv's request error."""
    assert uv.python_not_downloaded(NO_PYTHON) == "3.8"
    assert uv.python_not_downloaded(WRAPPED) is None
