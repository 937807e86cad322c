"""The build's import check: torch and every planned package import in a new environment.

Run by the environment's own Python (``python -m hpcenv.kit.imports``, with the probe
kit on ``PYTHONPATH``): torch, the slowest import by far, in one process and the other
packages in another, at the same time. Bytecode is written on purpose (even under
PYTHONDONTWRITEBYTECODE): the imports then compile the modules once, and every later
start is faster. ``hpcenv.build.builder`` checks a fresh build with it and ``hpcenv.build.swap`` the
packages compiled against a swapped torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hpcenv.tools import command
from hpcenv.utils import paths
from hpcenv.utils.errors import BuildFailed


@dataclass(frozen=True, kw_only=True)
class ImportCheck:
    """What imported: the environment's Python and torch versions, the module imported
    per distribution, and why a distribution did not import."""

    python: str | None = None
    torch: str | None = None
    imports: Mapping[str, str] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)

    def serialize(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "torch": self.torch,
            "imports": dict(self.imports),
            "failed": dict(self.failed),
        }


def check(venv: Path, names: Sequence[str], *, log: IO[str] | None) -> ImportCheck:
    """Import torch and ``names`` (distribution names) in ``venv``; ``BuildFailed`` naming
    the first one that does not import."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = paths.kit_pythonpath(env.get("PYTHONPATH"))
    python = str(paths.venv_python(venv))
    others = [n for n in names if n != "torch"]
    groups = [["torch"], *([others] if others else [])]
    runs = command.run_parallel(
        [[python, "-m", "hpcenv.kit.imports", json.dumps(group)] for group in groups],
        env=env,
        # not the caller's directory: ``-m`` puts it first on sys.path, and from a
        # project's tree the check would import (and write bytecode into) its sources
        cwd=venv,
        log=log,
        timeout=600,
    )
    python_version: str | None = None
    torch: str | None = None
    imports: dict[str, str] = {}
    failed: dict[str, str] = {}
    for done in runs:
        try:
            part: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            tail = (done.stderr or done.stdout).strip()[-300:]
            raise BuildFailed(f"the import check of {venv} did not run: {tail}") from exc
        python_version = part["python"]
        torch = torch or part["torch"]
        imports.update(part["imports"])
        failed.update(part["failed"])
    result = ImportCheck(python=python_version, torch=torch, imports=imports, failed=failed)
    if failed:
        name, why = next(iter(failed.items()))
        raise BuildFailed(f"import check failed in the new environment: {name}: {why}")
    return result
