"""Installing packages whose build imports torch (deepspeed, flash-attn, causal-conv1d,
mamba-ssm, torch-scatter: ``knowledge.build_isolation``) into a new environment.

In uv's default build isolation such a build gets no torch (or PyPI's, not the
environment's), so it fails or is built against the wrong torch. For exactly the listed
packages the set installs, the build installs torch and their build requirements into the
venv first, then the packages with ``--no-build-isolation-package NAME``, so they build
against the environment's own torch:

- a lock (the profile's, or a uv project's resolved set): ``uv pip sync`` of the lock less
  those packages (torch and everything else, hashes kept), ``uv pip install`` of the build
  requirements the lock lacks, ``uv pip install --no-deps`` of those packages' entries
  with the flags (``uv pip sync`` has no ``--no-build-isolation-package``), then
  ``uv pip sync`` of the whole lock, which removes the build-only requirements again: the
  result is the lock, exactly;
- a hand-written project, installed in one pass: torch and the build requirements first,
  then the pass with the flags (the build requirements stay).

Each is built afresh (``--refresh-package``): uv keeps a wheel built without isolation
under a key that does not include the torch it was built against (astral-sh/uv#16850), so
a cached one could carry another torch's ABI. A no-op build builds nothing. What was done
is written to the build log and returned for the build report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement

from hpcenv.build import fixes
from hpcenv.build.results import NoIsolation
from hpcenv.knowledge import build_isolation
from hpcenv.knowledge.build_isolation import TorchAtBuild
from hpcenv.models.plan import Plan
from hpcenv.tools import uv
from hpcenv.utils import fsio
from hpcenv.utils.names import canonicalize_name

#: A lock entry: a requirement at the start of a line (its hashes and ``# via`` indented).
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:===?|\s@\s)")


def lock_names(text: str) -> set[str]:
    """The canonical names of a lock's (or resolved set's) entries."""
    return {
        canonicalize_name(m.group(1)) for line in text.splitlines() if (m := _ENTRY.match(line))
    }


def split(text: str, names: Iterable[str]) -> tuple[str, str]:
    """(the lock less the entries of ``names``, those entries), each entry with its
    indented lines (hashes, ``# via``); other lines stay in the first."""
    drop = {canonicalize_name(n) for n in names}
    rest: list[str] = []
    picked: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        if line[:1].strip():  # a line at column 0: an entry, a comment or an option
            m = _ENTRY.match(line)
            inside = m is not None and canonicalize_name(m.group(1)) in drop
        (picked if inside else rest).append(line)
    return "".join(rest), "".join(picked)


def _installed(venv: Path) -> dict[str, str]:
    """``{canonical name: version}`` in ``venv``, from its metadata (a wheel file's torch
    too, which ``uv pip freeze`` prints as ``torch @ file://...``)."""
    import importlib.metadata  # only with a package built against torch: not at start-up

    site = str(fixes.site_packages(venv))
    return {
        canonicalize_name(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions(path=[site])
    }


def flags(rows: Sequence[TorchAtBuild]) -> list[str]:
    """uv's options for the rows: no build isolation, and a fresh build (uv reuses a wheel
    it built without isolation whatever torch it was built against, astral-sh/uv#16850,
    which would bring another torch's ABI into this venv)."""
    return [
        a
        for row in rows
        for a in ("--no-build-isolation-package", row.name, "--refresh-package", row.name)
    ]


def _missing(rows: Sequence[TorchAtBuild], have: Iterable[str]) -> list[str]:
    """The rows' build requirements whose distribution is not in ``have``."""
    present = {canonicalize_name(n) for n in have}
    out: list[str] = []
    for row in rows:
        for req in row.build_requires:
            try:
                name = canonicalize_name(Requirement(req).name)
            except InvalidRequirement:
                continue
            if name not in present and req not in out:
                out.append(req)
                present.add(name)
    return out


def _said(rows: Sequence[TorchAtBuild], torch: str, build_reqs: Sequence[str]) -> NoIsolation:
    return NoIsolation(
        packages=tuple(r.name for r in rows),
        torch=torch,
        build_requires=tuple(build_reqs),
        why={r.name: r.source for r in rows},
    )


def _log(log: IO[str] | None, rows: Sequence[TorchAtBuild], torch: str) -> None:
    if log is None:
        return
    names = ", ".join(r.name for r in rows)
    log.write(
        f"# {names}: setup.py imports torch, so built without build isolation "
        f"(--no-build-isolation-package) against the venv's torch {torch}\n"
    )
    for r in rows:
        log.write(f"#   {r.name}: {r.source}\n")


def sync(
    venv: Path,
    lockfile: Path,
    *,
    plan: Plan,
    work: Path,
    log: IO[str] | None,
    extra: Sequence[str] = (),
) -> NoIsolation | None:
    """``uv pip sync`` of ``lockfile`` into ``venv`` (module docstring); what was built
    without isolation, or None when the lock has none of the listed packages."""
    text = fsio.read_text(lockfile, "lockfile")
    rows = build_isolation.among(lock_names(text))
    if not rows:
        uv.sync(venv, lockfile, plan=plan, log=log, extra=extra)
        return None
    rest, picked = split(text, [r.name for r in rows])
    first, then = work / f"{lockfile.stem}-torch-first.txt", work / f"{lockfile.stem}-then.txt"
    fsio.write_bytes(first, rest.encode())
    fsio.write_bytes(then, picked.encode())
    uv.sync(venv, first, plan=plan, log=log, extra=extra)
    installed = _installed(venv)
    torch = installed.get("torch", "none")
    build_reqs = _missing(rows, installed)
    _log(log, rows, torch)
    if build_reqs:
        uv.install(venv, build_reqs, plan=plan, extra=extra, log=log)
    # `uv pip sync` has no --no-build-isolation-package: the packages are installed alone
    # (their dependencies are in already), then the sync of the whole lock removes what
    # only their build needed
    no_isolation = ["--no-deps", *flags(rows)]
    uv.install(venv, ["-r", str(then)], plan=plan, extra=[*extra, *no_isolation], log=log)
    uv.sync(venv, lockfile, plan=plan, log=log, extra=extra)
    return _said(rows, torch, build_reqs)


def install(
    venv: Path,
    reqs: Sequence[str],
    *,
    names: Iterable[str],
    torch: str,
    plan: Plan,
    log: IO[str] | None,
    extra: Sequence[str] = (),
) -> NoIsolation | None:
    """``uv pip install reqs`` into ``venv``; where ``names`` (the packages the project
    asks for) include listed ones, ``torch`` (the set's torch requirement) and their build
    requirements first. What was built without isolation, or None."""
    rows = build_isolation.among(names)
    if not rows:
        uv.install(venv, reqs, plan=plan, extra=extra, log=log)
        return None
    build_reqs = _missing(rows, ())
    uv.install(venv, [torch, *build_reqs], plan=plan, extra=extra, log=log)
    version = _installed(venv).get("torch", "none")
    _log(log, rows, version)
    uv.install(venv, reqs, plan=plan, extra=[*extra, *flags(rows)], log=log)
    return _said(rows, version, build_reqs)


__all__ = ["flags", "install", "lock_names", "split", "sync"]
