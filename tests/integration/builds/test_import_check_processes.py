"""The import check's processes (``python -m hpcenv.kit.imports``): the first group is
imported in the process hpcenv starts, each other one in a process forked from it once
the preloaded standard-library modules are in, at the same time; one JSON line per group,
in order. A group whose process died answers ``null``, which the build takes as no
answer ("did not run"), as it took a process that printed nothing.

The distributions are real files laid out as installed ones (a ``.dist-info`` with
``METADATA`` and ``top_level.txt``, a module beside it) in a directory on ``PYTHONPATH``;
the interpreter is the one running the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpcenv.build import import_check
from support import REPO

#: ``first`` and ``second`` write down, as they are imported, their process and its parent,
#: and whether ``colorsys`` (which nothing imports but the preload) was loaded already
SAYS = (
    "import json, os, sys\n"
    "with open(__name__ + '.json', 'w') as fh:\n"
    "    json.dump({'pid': os.getpid(), 'ppid': os.getppid(),"
    " 'colorsys': 'colorsys' in sys.modules}, fh)\n"
)
MODULES = {
    "first": SAYS,
    "second": SAYS,
    "dies": "import os\nos._exit(3)\n",
    "exits": "raise SystemExit('exits on import')\n",
}


def _site(root: Path) -> Path:
    """One distribution per module of ``MODULES``, version 1.0."""
    for name, code in MODULES.items():
        info = root / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "top_level.txt").write_text(f"{name}\n")
        (root / f"{name}.py").write_text(code)
    return root


def _kit(site: Path, *args: str) -> list[str]:
    return _run_kit(site, *args).stdout.strip().splitlines()


def _run_kit(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src")])}
    return subprocess.run(
        [sys.executable, "-m", "hpcenv.kit.imports", *args],
        env=env,
        cwd=site,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


def test_each_group_answers_on_its_own_line_in_order(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    lines = _kit(site, '["first"]', '["second", "missing"]', "--preload", '["json"]')
    first, second = (import_check.parse(line) for line in lines[-2:])
    assert first is not None and first.imports == {"first": "first"}
    assert second is not None and second.imports == {"second": "second"}
    assert second.failed == {"missing": "not installed"}


def test_the_other_group_is_forked_once_the_preload_is_in(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    lines = _kit(site, '["first"]', '["second"]', "--preload", '["colorsys"]')
    assert len(lines) == 2 and all(import_check.parse(line) for line in lines)
    first = json.loads((site / "first.json").read_text())
    second = json.loads((site / "second.json").read_text())
    assert second["ppid"] == first["pid"]  # forked from the first group's process
    assert first["colorsys"] and second["colorsys"]  # after the preload, in both


def test_one_group_is_one_process_without_the_preload(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    lines = _kit(site, '["first", "second"]', "--preload", '["colorsys"]')
    assert len(lines) == 1 and import_check.parse(lines[0]) is not None
    first = json.loads((site / "first.json").read_text())
    assert first["pid"] == json.loads((site / "second.json").read_text())["pid"]
    assert not first["colorsys"]  # one process: nothing to share, nothing preloaded


def test_a_group_whose_process_died_answers_nothing(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    lines = _kit(site, '["first"]', '["dies"]', "--preload", '["json"]')
    assert import_check.parse(lines[-2]) is not None
    assert lines[-1] == "null" and import_check.parse(lines[-1]) is None


def test_a_group_that_exits_on_import_answers_nothing_and_says_why(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    done = _run_kit(site, '["first"]', '["exits"]', "--preload", '["json"]')
    assert done.stdout.strip().splitlines()[-1] == "null"
    assert "SystemExit: exits on import" in done.stderr  # what the build's error shows
