"""docs/commands.md's ``JSON keys:`` lines against the commands' real ``--json`` output: every
key a line names (and the keys it lists for ``each`` item of a list) appears. Commands that
answer in about a second run here; ``probe`` is read from the report it wrote on the
namespace cluster (tests/data/reports); the others are listed, with why, in
``NOT_RUN_HERE``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import DATA, FACTS, REPO

DOC = REPO / "docs" / "commands.md"
GH200 = str(FACTS / "gh200-isambard.json")

#: Commands whose output needs a build, a SLURM job, uv resolving over the network or
#: PyPI: not run here (their tests assert on some of these keys; this one cannot).
NOT_RUN_HERE = {
    "hpcenv doctor": "builds the profile and runs its whole probe suite",
    "hpcenv build": "builds an environment",
    "hpcenv lock": "resolves with uv pip compile against the index",
    "hpcenv knowledge update": "reads PyPI (tests/integration/projects/test_knowledge_update.py)",
    "hpcenv knowledge check": "reads PyPI (tests/integration/projects/test_knowledge_update.py)",
    "hpcenv sbatch": "submits a job (tests/integration/slurm/test_multinode.py)",
}
NO_JSON = {"hpcenv run", "hpcenv completion"}


def documented() -> dict[str, str]:
    """``hpcenv NAME`` -> its ``JSON keys:`` line."""
    text = DOC.read_text()
    out = {}
    for head, body in re.findall(r"(?m)^## (hpcenv [\w -]+)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        if m := re.search(r"^JSON keys: (.*)$", body, re.M):
            out[head] = m.group(1)
    return out


def keys_of(line: str) -> tuple[list[str], dict[str, list[str]]]:
    """The top-level keys a line names and, for ``key (each: a, b)``, each item's keys;
    the keys of ``a list, each: ...`` are under ``""``. Options (``--pairs``) are words."""
    nested: dict[str, list[str]] = {}
    if line.startswith("a list, each:"):
        top = re.findall(r"`([a-z_]+)`", line.split(";", maxsplit=1)[0])
        return [], {"": top}
    for key, inner in re.findall(r"`([a-z_]+)` \(each: ([^)]*)\)", line):
        nested[key] = re.findall(r"`([a-z_]+)`", inner)
    flat = re.sub(r"\([^)]*\)", "", line)
    return re.findall(r"`([a-z_]+)`", flat), nested


def _json(*argv: str, cwd: Path = REPO) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", *argv, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def outputs(tmp_path: Path) -> dict[str, Any]:
    venv = str(Path(sys.executable).parent.parent)
    (tmp_path / "envs").mkdir()
    node = json.loads(Path(GH200).read_text())
    node["nvidia"]["driver_version"] = "570.86.10"  # a drift for profile check to show
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(node))
    init = _json("profile", "init", "c1", "--facts", GH200, cwd=tmp_path)
    return {
        "hpcenv facts": _json("facts"),
        "hpcenv profiles": _json("profiles"),
        "hpcenv show": _json("show", "local"),
        "hpcenv profile init": init,
        "hpcenv profile check": _json(
            "profile", "check", "envs/c1.toml", "--facts", str(newer), cwd=tmp_path
        ),
        "hpcenv resolve": _json("resolve", "--facts", GH200, "--torch", "2.9.1"),
        "hpcenv plan": _json("plan", "isambard", "--facts", GH200),
        "hpcenv audit": _json(
            "audit", str(DATA / "projects" / "nanochat" / "uv.lock"), "--facts", GH200
        ),
        "hpcenv archs": _json("archs", sys.executable),
        "hpcenv preflight": _json("preflight", "local"),
        "hpcenv env": _json("env", "local", "--env", venv),
        "hpcenv probe": json.loads((DATA / "reports" / "pairs_3node.json").read_text()),
        "hpcenv explain": _json("explain", str(DATA / "failures" / "cuda_oom.log")),
        "hpcenv report": _json(
            "report", str(DATA / "reports" / "nccl_2ranks.json"), "--html", str(tmp_path / "r.html")
        ),
    }


@pytest.mark.slow
def test_every_documented_json_key_appears_in_the_real_output(tmp_path: Path) -> None:
    lines = documented()
    real = outputs(tmp_path)
    assert set(lines) >= set(real) | set(NOT_RUN_HERE) | NO_JSON
    missing = []
    for name, line in lines.items():
        if name in NOT_RUN_HERE or name in NO_JSON:
            continue
        assert name in real, f"docs/commands.md documents {name}'s JSON: run it here"
        data = real[name]
        top, nested = keys_of(line)
        if "" in nested:  # a list of objects
            assert isinstance(data, list) and data, name
            missing += [f"{name}: each {k}" for k in nested[""] if k not in data[0]]
            continue
        missing += [f"{name}: {k}" for k in top if k not in data]
        for key, inner in nested.items():
            items = data.get(key) or []
            assert items, f"{name}: {key} is empty here; the test cannot see its items"
            missing += [f"{name}: {key}[].{k}" for k in inner if k not in items[0]]
    assert not missing, "documented but not in the output:\n" + "\n".join(missing)


def test_every_command_with_json_has_a_keys_line() -> None:
    """A command that takes --json (its parser) documents what it prints."""
    from support.commands_doc import parsers

    lines = documented()
    for name, parser in parsers().items():
        takes = any("--json" in a.option_strings for a in parser._actions)
        assert not takes or name in lines, f"docs/commands.md: {name} has no 'JSON keys:' line"


def test_the_parser_of_a_line_sees_a_missing_key() -> None:
    top, nested = keys_of("`schema`, `stages` (each: `stage`, `seconds`), with `--pairs` `x`")
    assert top == ["schema", "stages", "x"] and nested == {"stages": ["stage", "seconds"]}
