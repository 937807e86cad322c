"""What the tests share: the repository's paths and ``require``.

``require(component, ok, reason)`` skips a test whose component (slurm, ray, uv,
gcc, fi_info, torch-wheel, ...) is missing, and *fails* it instead when
``HPCENV_REQUIRE_ALL=1`` or ``HPCENV_REQUIRE_<COMPONENT>=1`` is set, as ``.ci/run``
does, so CI cannot pass by skipping.

The modules beside this one are the tests' helpers (a SLURM cluster, stand-in indexes
and wheels, the probes' torch venv, ...); their fixtures are registered once, by
``tests/conftest.py``, and never imported by a test module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
FACTS = DATA / "facts"


def required(component: str) -> bool:
    key = "HPCENV_REQUIRE_" + component.upper().replace("-", "_")
    return os.environ.get("HPCENV_REQUIRE_ALL") == "1" or os.environ.get(key) == "1"


def require(component: str, ok: bool, reason: str) -> None:
    """Skip (or, when CI requires the component, fail) unless ``ok``."""
    if ok:
        return
    message = f"{component} not available: {reason}"
    if required(component):
        pytest.fail(f"{message} (required by HPCENV_REQUIRE_*)", pytrace=False)
    pytest.skip(message)
