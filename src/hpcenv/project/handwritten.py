"""The install set of a project without a ``uv.lock``, for ``build``/``plan``/``lock``
``--project``: a requirements file, a ``pyproject.toml`` without a lock, a ``setup.py``
project or a conda ``environment.yml`` (``readers`` reads each).

The set is the project's own requirement lines with torch taken from the plan: the
node's variant of the version the project pins (``torch==2.6.0`` -> ``2.6.0+cu124``
resolved for this node, ``swap.plan_for_version``), of the plan's version when the
project's range admits it, else of the newest release in the range that runs here; and
when the project installs no torch at all (a ``pip install torch`` done separately, or a
``setup.py`` whose metadata only its build backend knows) the profile's torch, said in
the changes. ``torchvision``/``torchaudio`` lose any variant label (the plan's index
brings the variant's). The project's PyTorch index URLs are dropped (torch comes from
the profile's index or wheelhouse); its other indexes are kept. Local projects (``-e .``,
the ``setup.py`` project itself) are resolved with their dependencies from a copy of the
tree (``project_copy``) and installed non-editable from it. The profile's ``[packages]
install`` joins only when asked (``--with-profile-packages``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from hpcenv import knowledge
from hpcenv.decide.torch_variant import resolve_torch
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.project import readers, uv_lock
from hpcenv.utils.errors import BadInput, BuildFailed, NoCompatibleBuild

_VARIANT_URL = re.compile(r"download\.pytorch\.org|/(cu\d+|cpu|rocm[\d.]+|xpu)/?$")
_FAMILY = ("torch", "torchvision", "torchaudio")


def dependency_file(directory: Path) -> Path:
    found = readers.find_in(directory)
    if found is None:
        raise BadInput(
            f"--project {directory}: no uv.lock, pyproject.toml with [project], setup.py, "
            "setup.cfg, requirements.txt or environment.yml there"
        )
    return found


def request_of(
    directory: Path, extras: tuple[str, ...] = (), *, file: Path | None = None
) -> readers.Request:
    """The request of ``--project DIRECTORY`` (or one of its files): nothing outside
    ``directory`` is read, and every local project is inside it; the report names the file
    read and the ones passed over (``readers.precedence_note``)."""
    root = directory.absolute()
    if file is not None:
        return readers.read(file, extras=extras, root=root)
    chosen = dependency_file(directory)
    request = readers.read(chosen, extras=extras, root=root)
    note = readers.precedence_note(directory, chosen)
    return dataclasses.replace(request, notes=(note, *request.notes)) if note else request


def python_of(
    request: readers.Request, offered: str | None, offered_by: str
) -> uv_lock.PythonChoice:
    """The one rule for a hand-written project's Python, whichever command asks: conda's
    ``python=X.Y``, else ``offered`` (the profile's or the node's Python, named by
    ``offered_by``) when ``requires-python`` admits it, else the oldest it admits."""
    if request.python:
        return uv_lock.PythonChoice(
            version=request.python, why=f"{Path(request.source).name} says python={request.python}"
        )
    req = request.requires_python
    if offered and uv_lock.admits(req, offered):
        said = f"requires-python {req}" if req else "no requires-python"
        return uv_lock.PythonChoice(
            version=offered, why=f"{offered_by} says {offered}, which the project's {said} admits"
        )
    low = uv_lock.lowest_admitted(req)
    if low is None:
        raise BadInput(f"{request.source}: requires-python {req} admits no Python 3.8 to 3.20")
    return uv_lock.PythonChoice(
        version=low, why=f"the oldest Python the project's requires-python {req} admits"
    )


def torch_line(request: readers.Request) -> Requirement | None:
    for line in request.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch":
            return req
    return None


def variant_release(request: readers.Request, arch: str) -> str | None:
    """The torch release a file that names its build installs (conda's ``pytorch>=1.13``
    beside ``pytorch-cuda=11.7``): the newest of its range that published that build for
    ``arch`` (the knowledge data), as conda resolves it; None when the file names no build.
    No such release is ``NoCompatibleBuild`` (exit 3) naming the file's choice."""
    torch = torch_line(request)
    if not request.variant or torch is None:
        return None
    exact = readers.exact_release(torch.specifier)
    wanted = SpecifierSet(f"=={exact}") if exact else torch.specifier
    version = knowledge.load().newest_with_variant(wanted, request.variant, arch)
    if version is None:
        release = knowledge.load().release_of(exact) if exact else None
        plat = release.platforms.get(arch) if release else None
        has = f" (it has {', '.join(plat.variants)})" if plat else ""
        raise NoCompatibleBuild(
            f"{request.source}: no torch{torch.specifier or ' release'} published a "
            f"{request.variant} build for {arch}{has} ({request.variant_why}; hpcenv's torch "
            "data); fix: name a variant that release published for this CPU arch"
        )
    return version


def torch_version_for(
    spec: Requirement | None, plan: Plan, facts: Facts, request_file: str | None = None
) -> tuple[str, str]:
    """(torch version, why) the project gets on this node."""
    planned = plan.torch.version
    if spec is None:
        if not planned:
            raise BuildFailed(f"profile {plan.profile}: no torch version planned")
        if request_file:
            return planned, (
                f"profile {plan.profile}'s torch (the project's own requirements come from "
                f"{Path(request_file).name}'s build backend and must admit it)"
            )
        return planned, f"the project installs no torch: profile {plan.profile}'s torch"
    text = str(spec.specifier)
    version = readers.exact_release(spec.specifier)
    if version is not None:
        return version, f"the project pins torch{text}: the node's build of {version}"
    try:
        wanted = SpecifierSet(text) if text else SpecifierSet()
    except InvalidSpecifier as exc:
        raise BadInput(f"torch{text}: not a version range ({exc})") from exc
    if planned and wanted.contains(planned, prereleases=True):
        why = f"the project asks for torch{text or ' (any)'}: profile {plan.profile}'s {planned}"
        return planned, why
    if facts.arch is None and plan.arch:
        import dataclasses

        facts = dataclasses.replace(facts, arch=plan.arch)
    try:
        choice = resolve_torch(facts, text or ">=0", pin=plan.torch.pin)
    except (BadInput, NoCompatibleBuild) as exc:
        if isinstance(exc, NoCompatibleBuild):
            raise NoCompatibleBuild(f"the project asks for torch{text}: {exc}") from exc
        raise BadInput(f"the project asks for torch{text}: {exc}") from exc
    return str(choice.version), f"the newest torch{text} with a build that runs here"


def project_lines(
    request: readers.Request, directory: Path
) -> tuple[list[str], list[str], list[str]]:
    """(requirement lines without torch, local paths relative to ``directory``, notes)."""
    lines: list[str] = []
    notes: list[str] = []
    for line in request.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            lines.append(line)
            continue
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        if name in _FAMILY and any("+" in s.version for s in req.specifier):
            plain = ",".join(f"{s.operator}{s.version.split('+', 1)[0]}" for s in req.specifier)
            notes.append(f"{line}: the variant label dropped (the plan's index brings its build)")
            lines.append(f"{req.name}{plain}" + (f" ; {req.marker}" if req.marker else ""))
            continue
        lines.append(line)
    local: list[str] = []
    for path in request.local:
        try:
            local.append(str(Path(path).relative_to(directory.resolve())) or ".")
        except ValueError:
            local.append(path)
    if request.project_file:
        local.append(".")
    return lines, local, notes


def project_indexes(request: readers.Request) -> tuple[list[str], list[str]]:
    """(the project's own indexes to keep, words on the PyTorch ones dropped)."""
    keep: list[str] = []
    dropped: list[str] = []
    for url in (request.index_url, *request.extra_index_urls):
        if not url:
            continue
        if _VARIANT_URL.search(url):
            dropped.append(url)
        else:
            keep.append(url)
    words = (
        [f"the project's PyTorch index {', '.join(dropped)} not used: torch comes from the plan"]
        if dropped
        else []
    )
    return keep, words


__all__ = [
    "dependency_file",
    "project_indexes",
    "project_lines",
    "python_of",
    "request_of",
    "torch_line",
    "torch_version_for",
    "variant_release",
]
