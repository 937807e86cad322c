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
#: PyPI as the tests resolve against it: uv ignores what was uploaded after this moment
#: (``UV_EXCLUDE_NEWER``, which tests/conftest.py sets for tests marked ``pypi``, and
#: ``AS_OF`` given to the session venvs' installs), so a release upstream makes today
#: changes no answer the suite holds (on 2026-12-02 torchaudio 2.11.1 did). The date the
#: committed knowledge was last regenerated: move it with the data (``hpcenv knowledge
#: update``); the weekly ``knowledge-check`` says when.
PYPI_AS_OF = "2026-12-02T00:00:00Z"
AS_OF = ("--exclude-newer", PYPI_AS_OF)


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
