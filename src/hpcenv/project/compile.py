"""Resolve a hand-written install request for a node, the way pip or uv would install it.

``uv pip compile`` with the node's ``--python-platform`` (arch, glibc) and Python, and the
indexes the files name (pip's rule when there are several: the best version across them):
the newest matching release, PyPI's build for that arch. A project's own requirements and
those of its local projects (``-e .``) are compiled as read from its files, as data: no
build backend runs. Only when one computes them (``request.dynamic``) and the caller allows
it (``allow_build``) is the project compiled from a copy of it (``project_copy``), so its
build backend writes nothing into the user's tree and nothing outside it. The answer is
cached by the content of every file read and the target
(``$HPCENV_CACHE/resolved/<sha256>.txt``, for a day: unpinned lines follow new releases):
a warm audit runs no uv at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from hpcenv.project import copy_tree
from hpcenv.project.readers import Request
from hpcenv.tools import uv
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput, CommandFailed

#: Bumped when the compile arguments change (old cache entries are then never read).
#: 2: with uv's "# via" lines (who pulls each package); 3: dependency-metadata given to uv;
#: 4: keyed by uv's resolution settings in the environment too (``RESOLUTION_ENV``).
_CACHE_VERSION = "4"
#: uv's environment settings that change what a resolution picks: an answer resolved under
#: one (``UV_EXCLUDE_NEWER``: PyPI as of a date) is never served under another. Hashed,
#: never written (an index URL may hold a password).
RESOLUTION_ENV = (
    "UV_EXCLUDE_NEWER", "UV_EXCLUDE_NEWER_PACKAGE", "UV_INDEX", "UV_DEFAULT_INDEX",
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_NO_INDEX", "UV_INDEX_STRATEGY",
    "UV_PRERELEASE", "UV_RESOLUTION", "UV_CONSTRAINT", "UV_OVERRIDE", "UV_TORCH_BACKEND",
)  # fmt: skip
#: A resolution older than this is made again: an unpinned line's newest release changes
#: as indexes publish.
MAX_AGE_S = 24 * 3600


@dataclass(frozen=True, kw_only=True)
class Target:
    arch: str
    glibc: str | None
    python: str  # "3.11"

    def describe(self) -> str:
        return f"{uv.python_platform(self.arch, self.glibc)}, Python {self.python}"


@dataclass(frozen=True, kw_only=True)
class Resolution:
    text: str  # pinned requirements, one per line (``name==version ; marker``)
    target: Target
    cached: bool


def cache_key(request: Request, target: Target) -> str:
    from hpcenv.knowledge import build_isolation

    h = hashlib.sha256()
    h.update(json.dumps([_CACHE_VERSION, request.digest(), target.arch, target.glibc]).encode())
    for m in build_isolation.dependency_metadata(request.names()):  # what uv is told
        h.update(json.dumps([m.name, m.version, m.requires_dist, m.requires_python]).encode())
    h.update(target.python.encode())
    h.update(json.dumps([os.environ.get(k) for k in RESOLUTION_ENV]).encode())
    return h.hexdigest()


def resolve(request: Request, target: Target, *, allow_build: bool = False) -> Resolution:
    """The pinned set ``request`` installs on ``target`` (cached; see the module docstring).

    Raises ``BadInput`` naming the file and uv's reason when nothing satisfies it, or the
    file whose code computes its requirements when ``allow_build`` is not given, and
    ``CommandFailed`` when uv cannot reach an index.
    """
    if request.dynamic and not allow_build:
        raise BadInput(request.dynamic[0])
    cache = paths.cache_dir() / "resolved" / f"{cache_key(request, target)}.txt"
    if cache.is_file() and time.time() - cache.stat().st_mtime < MAX_AGE_S:
        return Resolution(
            text=fsio.read_text(cache, "cached resolution"), target=target, cached=True
        )
    with fsio.work_dir("hpcenv-resolve-") as tmp:
        text = _compile(request, target, tmp)
    fsio.ensure_dir(cache.parent)
    fsio.write_text(cache, text)
    return Resolution(text=text, target=target, cached=False)


def _compile(request: Request, target: Target, work: Path) -> str:
    constraints = None
    extras: tuple[str, ...] = ()  # read as data into the lines, unless the backend runs
    if request.dynamic and request.project_file:  # allowed: its backend runs in a copy
        project = Path(request.project_file)
        copy = work / "project"
        copy_tree.copy_project(project.parent, copy)
        input_file = copy / project.name
        extras = request.extras
    else:
        input_file = work / "requirements.in"
        lines = [*request.requirements, *request.local_requirements]
        if request.dynamic:  # allowed: the local projects' backends run in a copy
            lines += _copied_locals(request, work / "project")
        fsio.write_text(input_file, "".join(f"{line}\n" for line in lines))
        if request.constraints:
            constraints = work / "constraints.txt"
            fsio.write_text(constraints, "".join(f"{c}\n" for c in request.constraints))
    try:
        return uv.compile_for(
            input_file,
            config_file=dependency_metadata(request, work),
            python_platform=uv.python_platform(target.arch, target.glibc),
            python_version=target.python,
            index_url=request.index_url,
            extra_index_urls=request.extra_index_urls,
            find_links=request.find_links,
            extras=extras,
            constraints=constraints,
        )
    except CommandFailed as exc:
        reason = uv.error_summary(exc.output or str(exc))
        if _unbuildable(exc.output or ""):
            what = _failed_build(exc.output or "") or "a package"
            raise CommandFailed(
                f"{request.source}: cannot resolve for {target.describe()}: uv would have to "
                f"build {what} to learn its requirements, which cannot be done here (hpcenv's "
                f"knowledge/dependency_metadata.toml has no row for that release); its pins "
                "are judged as written",
                returncode=exc.returncode,
                output=exc.output,
            ) from exc
        if "has no wheels with a matching platform tag" in (exc.output or ""):
            # a pin with no wheel for this node is the node's answer, not bad input: the
            # file's exact pins are judged as written, each wheel's platforms named
            raise CommandFailed(
                f"{request.source}: cannot resolve for {target.describe()}: {reason}; its "
                "pins are judged as written",
                returncode=exc.returncode,
                output=exc.output,
            ) from exc
        if unreachable(exc.output or ""):
            raise CommandFailed(
                f"{request.source}: cannot resolve for {target.describe()}: an index is "
                f"unreachable ({reason}); run where the indexes it names are reachable, or "
                "set UV_OFFLINE=1 with a warm uv cache",
                returncode=exc.returncode,
                output=exc.output,
            ) from exc
        raise BadInput(
            f"{request.source}: cannot be installed on {target.describe()}: {reason}"
        ) from exc


def dependency_metadata(request: Request, work: Path) -> Path | None:
    """``work/uv.toml`` with uv's ``dependency-metadata`` for every known release of the
    packages whose build imports torch that the request names (``knowledge/
    build_isolation.dependency_metadata``, read from their sdists): uv then resolves them
    without running their setup.py. None when the request names none."""
    from hpcenv.knowledge import build_isolation

    rows = build_isolation.dependency_metadata(request.names())
    if not rows:
        return None
    blocks = []
    for m in rows:
        lines = [
            "[[dependency-metadata]]",
            f"name = {json.dumps(m.name)}",
            f"version = {json.dumps(m.version)}",
            f"requires-dist = {json.dumps(list(m.requires_dist))}",
        ]
        if m.requires_python:
            lines.append(f"requires-python = {json.dumps(m.requires_python)}")
        blocks.append("\n".join(lines))
    path = work / "uv.toml"
    fsio.write_text(path, "\n\n".join(blocks) + "\n")
    return path


def _copied_locals(request: Request, copy: Path) -> list[str]:
    """The local projects as paths in a copy of the project (all inside it, ``readers``)."""
    root = Path(request.root).resolve()
    copy_tree.copy_project(root, copy)
    return [str(copy / Path(p).relative_to(root)) for p in request.local]


_FAILED_BUILD = re.compile(r"Failed to build `([^`]+)`")


def _failed_build(output: str) -> str | None:
    """``flash-attn==2.5.8`` of uv's "Failed to build `flash-attn==2.5.8`" (its traceback
    is left in the log, never pasted into the warning)."""
    m = _FAILED_BUILD.search(output)
    return m.group(1).split(" @ ")[0] if m else None


def _unbuildable(output: str) -> bool:
    """uv could not build a package's metadata here (flash-attn's setup.py needs torch and
    nvcc): the file is not wrong, this machine cannot build it."""
    return "failed to build" in output.lower()


def unreachable(output: str) -> bool:
    """uv's output says an index could not be reached (not that nothing matched)."""
    text = output.lower()
    return any(
        s in text
        for s in ("failed to fetch", "dns error", "connection refused", "network", "offline")
    )


__all__ = ["Resolution", "Target", "cache_key", "resolve", "unreachable"]
