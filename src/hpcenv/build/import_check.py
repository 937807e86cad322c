"""The build's import check: torch and every planned package import in a new environment.

Run by the environment's own Python (``python -m hpcenv.kit.imports``, with the probe
kit on ``PYTHONPATH``): torch, the slowest import by far, in one process and the other
packages in another, at the same time, where there are CPUs for both; what torch's own
import loads (numpy: ``[[import_with_torch]]`` of ``knowledge/packages.toml``) goes with
torch, so nothing is imported twice (:func:`groups`). The other packages' process is
forked from torch's once the standard-library modules torch's import loads are in
(``[import_check] preload``), so that those are not imported in both either. Bytecode is
written on purpose (even under PYTHONDONTWRITEBYTECODE): the imports then compile the
modules once, and every later start is faster. ``hpcenv.build.builder`` checks a fresh
build with it and ``hpcenv.build.swap`` the packages compiled against a swapped torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeGuard

from hpcenv.knowledge import tables
from hpcenv.tools import command
from hpcenv.utils import paths
from hpcenv.utils.errors import BuildFailed
from hpcenv.utils.names import canonicalize_name


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


#: CPUs from which torch and the other packages are imported in two processes at once.
#: Measured here (2 CPUs, fresh venvs, torch, numpy and ray): one process 4.2-5.2 s and
#: 4.1-5.1 s of CPU; torch beside numpy and ray 3.3-4.5 s, 0.3-0.45 s more CPU (numpy
#: compiled and imported by both: torch imports it). With numpy in torch's process, and
#: the second group forked from torch's once the ``[import_check] preload`` standard
#: library is in (``kit/imports.py``), the second adds only its own packages' imports.
PARALLEL_CPUS = 2


def with_torch() -> frozenset[str]:
    """The distributions torch's own import loads (``[[import_with_torch]]``)."""
    rows = tables.read("packages.toml").get("import_with_torch", ())
    return frozenset(canonicalize_name(str(row["name"])) for row in rows)


def groups(
    names: Sequence[str], cpus: int, loaded: frozenset[str], *, torch: bool = True
) -> list[list[str]]:
    """The distributions each import process takes: torch with what its import
    ``loaded`` anyway, beside the others, with :data:`PARALLEL_CPUS` or more; else all in
    one process, torch first. Without ``torch`` (a project that installs none: JAX), the
    names alone, in one process."""
    if not torch:
        return [[n for n in names if n != "torch"]]
    first = ["torch", *(n for n in names if n != "torch" and canonicalize_name(n) in loaded)]
    others = [n for n in names if n not in first]
    if others and cpus >= PARALLEL_CPUS:
        return [first, others]
    return [first + others]


def preload() -> list[str]:
    """The standard-library modules imported before the other packages' process is forked
    from torch's (``[import_check] preload``)."""
    table = tables.read("packages.toml").get("import_check", {})
    return [str(name) for name in table.get("preload", ())]


def check(
    venv: Path, names: Sequence[str], *, log: IO[str] | None, torch: bool = True
) -> ImportCheck:
    """Import torch (unless not ``torch``: a project without it) and ``names``
    (distribution names) in ``venv``; ``BuildFailed`` naming the first one that does not
    import."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = paths.kit_pythonpath(env.get("PYTHONPATH"))
    python = str(paths.venv_python(venv))
    parts = groups(names, len(os.sched_getaffinity(0)), with_torch(), torch=torch)
    argv = [python, "-m", "hpcenv.kit.imports", *(json.dumps(group) for group in parts)]
    if len(parts) > 1:
        argv += ["--preload", json.dumps(preload())]
    # run_parallel, though one process: its output goes to files in a work directory of
    # its own (removed on a signal, or by the next run after a SIGKILL), not to pipes read
    # by threads while torch's import may print at length
    (done,) = command.run_parallel(
        [argv],
        env=env,
        # not the caller's directory: ``-m`` puts it first on sys.path, and from a
        # project's tree the check would import (and write bytecode into) its sources
        cwd=venv,
        log=log,
        timeout=600,
    )
    lines = done.stdout.strip().splitlines()[-len(parts) :]
    answers = [parse(line) for line in lines]
    if len(answers) < len(parts) or any(a is None for a in answers):
        tail = (done.stderr or done.stdout).strip()[-300:]
        raise BuildFailed(f"the import check of {venv} did not run: {tail}")
    result = ImportCheck()
    for part in answers:
        assert part is not None
        result = ImportCheck(
            python=part.python,
            torch=result.torch or part.torch,
            imports={**result.imports, **part.imports},
            failed={**result.failed, **part.failed},
        )
    if result.failed:
        name, why = next(iter(result.failed.items()))
        raise BuildFailed(f"import check failed in the new environment: {name}: {why}")
    return result


def parse(line: str) -> ImportCheck | None:
    """One line of ``hpcenv.kit.imports`` (``{"python", "torch", "imports": {dist:
    module}, "failed": {dist: why}}``) as an ``ImportCheck``; None when it is not that
    (the process died before it printed, or printed something else last)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    python, torch = data.get("python"), data.get("torch")
    imports, failed = data.get("imports"), data.get("failed")
    if not (_str_or_none(python) and _str_or_none(torch)):
        return None
    if not (_strings(imports) and _strings(failed)):
        return None
    return ImportCheck(python=python, torch=torch, imports=imports, failed=failed)


def _str_or_none(value: object) -> TypeGuard[str | None]:
    return value is None or isinstance(value, str)


def _strings(value: object) -> TypeGuard[dict[str, str]]:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
