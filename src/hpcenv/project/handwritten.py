"""The install set of a project without a ``uv.lock``, for ``build``/``plan``/``lock``
``--project``: a requirements file, a ``pyproject.toml`` without a lock, a ``setup.py``
project or a conda ``environment.yml`` (``readers`` reads each).

The set (``install_set.handwritten_set``) is the project's own requirement lines with
torch taken from the plan; which torch is ``project/torch_wish.py``'s: the node's
variant of the version the project pins (``torch==2.6.0`` -> ``2.6.0+cu124`` resolved
for this node), of the plan's version when the project's range admits it, else of the
newest release in the range that runs here; and when the project installs no torch at
all (a ``pip install torch`` done separately, or a ``setup.py`` whose metadata only its
build backend knows) the profile's torch, said in the changes.
``torchvision``/``torchaudio`` become torch's release pair of its variant where the
project's range admits it (a change in the report), else the project's range without a
variant label (said in the notes). The project's PyTorch index URLs are dropped (torch
comes from the profile's index or wheelhouse); its other indexes are kept. Local
projects (``-e .``, the ``setup.py`` project itself) are resolved with their
dependencies from a copy of the tree (``project_copy``) and installed non-editable from
it. The profile's ``[packages] install`` joins only when asked
(``--with-profile-packages``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from hpcenv.decide.companions import Companions
from hpcenv.project import readers
from hpcenv.project.torch_wish import TORCH_FAMILY, companion_line
from hpcenv.utils.errors import BadInput
from hpcenv.utils.names import canonicalize_name

_VARIANT_URL = re.compile(r"download\.pytorch\.org|/(cu\d+|cpu|rocm[\d.]+|xpu)/?$")


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


#: (name, the project's line, the line installed, why): a companion made torch's pair.
Paired = tuple[str, str, str, str]


def project_lines(
    request: readers.Request, directory: Path, pair: Companions | None = None
) -> tuple[list[str], list[str], list[str], list[Paired]]:
    """(requirement lines without torch, local paths relative to ``directory``, notes, the
    companions paired). torchvision/torchaudio become ``pair``'s (torch's release pair, its
    variant) where the project's range admits it (``_companion``)."""
    lines: list[str] = []
    notes: list[str] = []
    paired: list[Paired] = []
    for line in request.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            lines.append(line)
            continue
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        if name in TORCH_FAMILY:
            kept, note = _companion(line, req, name, pair)
            lines.append(kept)
            if pair is not None and kept.split(" ;", 1)[0] == companion_line(pair, name):
                paired.append((name, line, kept, note or ""))
            elif note:
                notes.append(note)
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
    return lines, local, notes, paired


def _companion(
    line: str, req: Requirement, name: str, pair: Companions | None
) -> tuple[str, str | None]:
    """(the line, a note) for a torchvision/torchaudio requirement: torch's pair of the
    set's variant when the project's range admits it; else the project's range without a
    variant label (the plan's index brings its build), said when the pair is not it."""
    marker = f" ; {req.marker}" if req.marker else ""
    plain = ",".join(f"{s.operator}{s.version.split('+', 1)[0]}" for s in req.specifier)
    paired = pair.version_of(name) if pair else None
    if pair is not None and paired is not None and SpecifierSet(plain).contains(paired, True):
        new = companion_line(pair, name)
        return f"{new}{marker}", f"torch {pair.torch}'s pair, read from its wheel's METADATA"
    labelled = plain != str(req.specifier)
    kept = f"{req.name}{plain}{marker}" if labelled else line
    if pair is not None and paired is None:
        return kept, f"{line}: kept as the project has it; {pair.reason_of(name)}"
    if pair is not None:
        return kept, (
            f"{line}: kept as the project has it, but torch {pair.torch}'s pair is "
            f"{name} {paired} (read from its wheel's METADATA): uv may refuse the set"
        )
    if labelled:
        return kept, f"{line}: the variant label dropped (the plan's index brings its build)"
    return line, None


def project_indexes(
    request: readers.Request, planned: str | None = None
) -> tuple[list[str], list[str]]:
    """(the project's own indexes to keep, words on the PyTorch ones dropped; one that is
    the plan's torch index ``planned`` is not said: torch comes from it)."""
    keep: list[str] = []
    dropped: list[str] = []
    for url in (request.index_url, *request.extra_index_urls):
        if not url:
            continue
        if _VARIANT_URL.search(url):
            dropped.append(url)
        else:
            keep.append(url)
    same = (planned or "").rstrip("/")
    unused = [url for url in dropped if url.rstrip("/") != same]
    words = (
        [f"the project's PyTorch index {', '.join(unused)} not used: torch comes from the plan"]
        if unused
        else []
    )
    return keep, words


__all__ = [
    "dependency_file",
    "project_indexes",
    "project_lines",
    "request_of",
]
