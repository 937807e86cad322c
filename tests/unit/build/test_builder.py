"""The build's marker, read back into its typed form (``builder.read_marker``), and what
a build does with one hpcenv did not write."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpcenv.build import builder
from hpcenv.build.results import BuildMarker
from hpcenv.utils.errors import BadInput


def _marker(build_dir: Path, data: object) -> Path:
    path = build_dir / builder.MARKER
    path.write_text(json.dumps(data))
    return path


def test_a_marker_is_read_into_its_stamp_and_what_it_installed(tmp_path: Path) -> None:
    _marker(tmp_path, {"schema": 1, "stamp": "0123456789ab", "installed": {"torch": "2.13.0"}})
    assert builder.read_marker(tmp_path) == BuildMarker(
        stamp="0123456789ab", installed={"torch": "2.13.0"}
    )


def test_a_marker_with_a_stamp_that_is_not_a_string_names_the_file_and_key(
    tmp_path: Path,
) -> None:
    path = _marker(tmp_path, {"stamp": 5, "installed": {}})
    with pytest.raises(BadInput) as err:
        builder.read_marker(tmp_path)
    assert str(err.value).startswith(f"{path}: 'stamp' must be a string, not a JSON number")


def test_a_build_whose_marker_hpcenv_did_not_write_is_rebuilt_saying_why(
    tmp_path: Path,
) -> None:
    """Not a no-op (the stamp in it means nothing), and the report's ``damaged`` names the
    file and the key, where it was silently rebuilt before."""
    path = _marker(tmp_path, {"stamp": "0123456789ab", "installed": ["torch"]})
    damaged: list[str] = []
    kept = builder._noop(
        "local", tmp_path, "0123456789ab", force=False, start=time.monotonic(), damaged=damaged
    )
    assert kept is None
    assert len(damaged) == 1 and damaged[0].startswith(f"{path}: 'installed' must be an object")
    assert damaged[0].endswith("; rebuilding it")
