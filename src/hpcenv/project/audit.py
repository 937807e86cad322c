"""Audit a resolved environment: which torch build does it hold, and can this node run it?

A lock or venv reveals the build without importing torch: the local version label
(``2.9.1+cu126``), else the CUDA runtime wheel it pulls (``nvidia-cuda-runtime 13.0.96``
means a CUDA 13.0 build; ``-cu12`` 12.8.x a 12.8 build), else no CUDA runtime at all,
which is a CPU build. That is how a plain ``pip install torch`` on an aarch64 GH200 node
is caught before the first kernel fails: 2.9.1 there is CPU-only, 2.13.0 needs a 580
driver. Reads ``uv.lock``, requirements files from ``uv pip compile`` and venvs
(``*.dist-info/METADATA``).

A lock is universal: PyPI's torch 2.9.1 lists ``nvidia-cuda-runtime-cu12`` with the
marker ``platform_machine == 'x86_64'``, so the same ``uv.lock`` is a CUDA 12.8 build
on x86_64 and a CPU build on aarch64. The runtime therefore only counts when it is
reachable from torch through dependency edges (and extras, e.g. ``cuda-toolkit[cudart]``)
whose markers hold on the audited node (:func:`marker_environment`); a requirements
line counts only when its ``; marker`` holds.

A ``uv.lock`` is read the way ``uv sync`` installs it (``hpcenv.project.uv_lock``): the project
beside it (``pyproject.toml``, ``.python-version``) gives the default groups and the
Python; the fork is the one whose markers hold for the node, the Python and the
selected extras and groups (``--extra``, ``--group``, ``--no-default-groups``), and the
message names both.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.decide import companions, cuda_packages
from hpcenv.decide.torch_variant import assess, describe_gpus, driver_reason
from hpcenv.models.facts import Facts
from hpcenv.project import containment, uv_lock
from hpcenv.project.request import forced_python, python_for
from hpcenv.utils import answers, fsio
from hpcenv.utils.errors import BadInput, CommandFailed, NoCompatibleBuild
from hpcenv.utils.names import canonicalize_name

if TYPE_CHECKING:  # imported where used: a uv.lock's audit needs neither (start-up time),
    # nor packaging's markers, requirements or specifiers (a lock audited again: utils/answers)
    from hpcenv.binaries import archs  # a venv's binaries
    from hpcenv.project import compile as project_resolve  # hand-written files
    from hpcenv.project import readers

#: Wheels whose version is the CUDA runtime version of torch's build, in order of trust
#: (``cuda-toolkit`` is not one here: without its ``cudart`` extra it installs no runtime).
RUNTIME_PACKAGES = tuple(r for r in cuda_packages.RUNTIMES if r.startswith("nvidia-"))

_REQ_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;\\]+)")
_LABEL = re.compile(r"^(cpu|cu\d{3}|rocm[\d.]+|xpu)$")
_KIND_WORDS = {"requirements": "requirements file", "pyproject": "pyproject.toml"}
_OPTION = re.compile(r"\s--[A-Za-z]")  # where a line's options (--hash=...) begin


#: (canonical name, version) of one package in a lock
Node = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class Packages:
    """Name -> versions found in one lock, requirements file or venv."""

    source: str
    kind: str  # "uv.lock" | "requirements" | "venv"
    versions: dict[str, tuple[str, ...]]
    #: requirements only: the ``; marker`` of a pinned line, for pins that have one
    markers: dict[Node, str] = field(default_factory=dict)
    #: requirements from uv with its ``# via`` lines: name -> the names it depends on
    edges: dict[str, tuple[str, ...]] | None = None
    #: a hand-written file's CUDA release for the whole environment (conda's
    #: ``cuda-version=13.1``: ``("cuda-version", "13.1")``), judged as that CUDA
    declared_cuda: tuple[tuple[str, str], ...] = ()
    #: an unresolved file's exact pins the index has no wheel nor sdist of for the node
    uninstallable: tuple[str, ...] = ()
    #: uv.lock only: the lock and the project beside it
    lock: uv_lock.Lock | None = None
    project: uv_lock.Project | None = None
    #: a hand-written file, not yet resolved (``resolve_for`` turns it into pins)
    request: readers.Request | None = None
    #: what a hand-written file was resolved to, in words (None: read as written)
    resolved: str | None = None
    #: a hand-written file: the Python it was resolved for, and why (``request.python_for``)
    python: str | None = None
    python_why: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    #: a container image's root (project/image.py): nothing outside it is read
    image_root: str | None = None

    @property
    def requires_python(self) -> str | None:
        return self.lock.requires_python if self.lock else None


@dataclass(frozen=True, kw_only=True)
class Audit:
    source: str
    kind: str
    torch_version: str  # as found, e.g. "2.9.1+cu126"
    build: str  # "cpu", "cu126", ...
    cuda: str | None  # "12.6"
    evidence: str  # how the build was recognised
    ok: bool
    message: str  # one line: what it is and whether it runs here
    fix: str | None = None
    warnings: tuple[str, ...] = ()
    selection: str | None = None  # uv.lock: the fork, groups and extras audited
    python: str | None = None  # the Python the markers were evaluated for
    python_why: str | None = None
    node: str | None = None  # what the node is: "these facts", "declared by profile X"
    resolved: str | None = None  # a hand-written file: what it was resolved to
    notes: tuple[str, ...] = ()  # what reading a hand-written file ignored or dropped
    packages: tuple[str, ...] = ()  # CUDA packages judged besides torch, with verdicts
    #: the torch build the node gets for this file (``2.14.1+cu126``): the one found when it
    #: runs, else the fix's (the newest of the file's torch range with a build that runs)
    node_torch: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "kind": self.kind,
            "node": self.node,
            "selection": self.selection,
            "python": self.python,
            "python_why": self.python_why,
            "torch": self.torch_version or None,
            "build": self.build,
            "cuda": self.cuda,
            "evidence": self.evidence,
            "ok": self.ok,
            "message": self.message,
            "fix": self.fix,
            "warnings": list(self.warnings),
            "resolved": self.resolved,
            "notes": list(self.notes),
            "packages": list(self.packages),
            "node_torch": self.node_torch,
        }


# --- reading --------------------------------------------------------------------------


def _add(found: dict[str, list[str]], name: str, version: str) -> None:
    key = canonicalize_name(name)
    if version not in found.setdefault(key, []):
        found[key].append(version)


def _versions(lock: uv_lock.Lock) -> dict[str, tuple[str, ...]]:
    """The lock's versions by name (a lock's names are already normalised)."""
    found: dict[str, list[str]] = {}
    for pkg in lock.packages:
        if pkg.version is not None and pkg.version not in found.setdefault(pkg.name, []):
            found[pkg.name].append(pkg.version)
    return _freeze(found)


def read_uv_lock(path: Path) -> Packages:
    lock = uv_lock.read_lock(path)
    return Packages(
        source=str(path),
        kind="uv.lock",
        versions=_versions(lock),
        lock=lock,
        project=uv_lock.read_project(path.parent),
    )


def read_requirements(path: Path) -> Packages:
    """A requirements file written by a resolver (``uv pip compile``): its pins as they are."""
    return parse_requirements(fsio.read_text(path, "requirements file"), str(path))


def parse_requirements(text: str, source: str, kind: str = "requirements") -> Packages:
    found: dict[str, list[str]] = {}
    markers: dict[Node, str] = {}
    via: dict[str, list[str]] = {}  # package -> what pulls it (uv's annotations)
    current: str | None = None
    for raw in text.replace("\\\n", " ").splitlines():
        if current is not None and (parent := _via(raw)) is not None:
            if parent:
                via[current].append(canonicalize_name(parent))
            continue
        line = raw.split("#", 1)[0].strip()
        match = _REQ_LINE.match(line)
        if not match:
            continue
        name, version = match.group(1), match.group(2)
        _add(found, name, version)
        current = canonicalize_name(name)
        via[current] = []
        inline = _via("#" + raw.split("#", 1)[1]) if "#" in raw else None
        if inline:  # pip-compile's "name==1.0  # via parent"
            via[current].append(canonicalize_name(inline))
        rest = line[match.end() :].lstrip()
        if rest.startswith(";"):
            marker = _OPTION.split(rest[1:], 1)[0].strip()
            from packaging.markers import InvalidMarker, Marker

            try:
                Marker(marker)
            except InvalidMarker as exc:
                raise BadInput(
                    f"{source}: {name}=={version}: invalid marker {marker!r} ({exc}); "
                    "regenerate the file with 'uv pip compile'"
                ) from exc
            markers[(canonicalize_name(name), version)] = marker
    edges = _edges(via) if any(via.values()) else None
    return Packages(source=source, kind=kind, versions=_freeze(found), markers=markers, edges=edges)


_VIA = re.compile(r"^\s*#\s*(?:via\s*)?([A-Za-z0-9][A-Za-z0-9._-]*)?\s*(?:\[.*\])?\s*$")


def _via(raw: str) -> str | None:
    """A ``# via jax`` / ``#   jax`` annotation line of ``uv pip compile``: the package
    named ("" for ``# via`` itself, or ``-r requirements.in``), None for any other line."""
    stripped = raw.strip()
    if not stripped.startswith("#"):
        return None
    body = stripped[1:].strip()
    if body == "via" or body.startswith(("via -", "-r ", "-c ")):
        return ""
    m = _VIA.match(stripped)
    if m is None or not (body.startswith("via ") or raw.startswith((" ", "\t"))):
        return None
    return m.group(1) or ""


def _edges(via: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """``{parent: (dependency, ...)}`` from ``{package: [parent, ...]}``."""
    edges: dict[str, list[str]] = {}
    for child, parents in via.items():
        edges.setdefault(child, [])
        for parent in parents:
            edges.setdefault(parent, []).append(child)
    return {k: tuple(v) for k, v in edges.items()}


def read_venv(path: Path, inside: Path | None = None) -> Packages:
    """A venv's distributions from their dist-info METADATA (no import), and who depends on
    whom among them: an edge to each installed distribution a ``Requires-Dist`` names, under
    any marker or extra (installed, so pulled: ``tensorflow[and-cuda]``'s CUDA runtime is
    tensorflow's); ``inside``: only files that stay in that directory (an image's root: no
    symlink out of it is read)."""
    from email.parser import HeaderParser

    found: dict[str, list[str]] = {}
    requires: dict[str, set[str]] = {}
    metas = sorted(path.glob("lib/python*/site-packages/*.dist-info/METADATA"))
    metas += sorted(path.glob("lib64/python*/site-packages/*.dist-info/METADATA"))  # RHEL's
    metas += sorted(path.glob("lib/python*/dist-packages/*.dist-info/METADATA"))  # an image's
    metas += sorted(path.glob("Lib/site-packages/*.dist-info/METADATA"))
    if inside is not None:
        metas = [m for m in metas if containment.inside(m, inside)]
    for meta in metas:
        try:
            headers = HeaderParser().parsestr(meta.read_text(errors="replace"), headersonly=True)
        except OSError:
            continue
        name, version = headers.get("Name"), headers.get("Version")
        if name and version:
            _add(found, name, version)
            deps = requires.setdefault(canonicalize_name(name), set())
            deps.update(_required_name(r) for r in headers.get_all("Requires-Dist") or ())
    if not metas:
        raise BadInput(
            f"{path}: no lib/python*/site-packages/*.dist-info found; give a venv directory, "
            "a uv.lock or a requirements file from 'uv pip compile'"
        )
    edges = {n: tuple(sorted(d for d in deps if d in found and d != n))
             for n, deps in requires.items()}  # fmt: skip
    return Packages(source=str(path), kind="venv", versions=_freeze(found), edges=edges)


def _required_name(requirement: str) -> str:
    """The distribution a ``Requires-Dist`` value names (``nvidia-cuda-runtime-cu12<13,
    >=12.5; extra == "and-cuda"`` -> ``nvidia-cuda-runtime-cu12``)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return canonicalize_name(m.group(1)) if m else ""


def _freeze(found: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in found.items()}


def read(path: str | Path) -> Packages:
    """Packages of a venv directory, a ``uv.lock``, a compiled requirements file, or the
    request of a hand-written one (``requirements*.txt``, ``pyproject.toml``,
    ``setup.py``/``setup.cfg``, conda ``environment.yml``), each read as what it is by name
    and content; a project directory without a venv is read by its dependency file."""
    p = Path(path)
    root = p.absolute() if p.is_dir() else containment.root_of(p)
    if p.is_dir():
        if not _is_venv(p) and (p / "uv.lock").is_file():
            # as build and plan read it: the lock, not its pyproject; the others named
            from hpcenv.project import readers

            pkgs = read(p / "uv.lock")
            note = readers.precedence_note(p, p / "uv.lock")
            return replace(pkgs, notes=(note, *pkgs.notes)) if note else pkgs
        return _read_dir(p)
    if p.is_symlink():  # before any read: a link out of the project is not read
        containment.require_inside(p, root, "the audited file (a symlink)")
    if not p.is_file():
        raise BadInput(
            f"{p}: no such file or directory (give a uv.lock, requirements file, pyproject.toml, "
            "setup.py, environment.yml or venv)"
        )
    from hpcenv.project import read_once

    head = read_once.content(p, "the audited file")[:4096]  # kept: read once (read_once)
    if p.name.endswith(".lock") or head.decode(errors="replace").lstrip().startswith("version ="):
        return read_uv_lock(p)
    from hpcenv.project import readers  # here: a uv.lock's audit does not import it

    kind = readers.kind_of(p)
    if kind not in (None, "requirements"):
        request = readers.read(p, root=root)
        return Packages(source=str(p), kind=kind or "requirements", versions={}, request=request)
    text = read_once.text(p, "requirements file")
    if readers.is_compiled(text):
        return parse_requirements(text, str(p))
    request = readers.read_requirements(p, root=root)
    return Packages(source=str(p), kind="requirements", versions={}, request=request)


def _read_dir(p: Path) -> Packages:
    """A directory without a uv.lock: a venv, a container image's root filesystem
    (``project/image.py``), else the project's dependency file."""
    from hpcenv.project import image, readers

    if image.is_rootfs(p):  # first: /lib -> usr/lib makes an image's root look like a venv
        chosen, sites = image.prefix(p)
        pkgs = read_venv(chosen, inside=p)
        notes = (*image.notes(p, chosen, sites), *pkgs.notes)
        return replace(pkgs, notes=notes, image_root=str(p))
    if not _is_venv(p) and (found := readers.find_in(p)) is not None:
        pkgs = read(found)
        note = readers.precedence_note(p, found)
        return replace(pkgs, notes=(note, *pkgs.notes)) if note else pkgs
    return read_venv(p)


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file() or any(path.glob("lib/python*/site-packages"))


def _pinned_torch(lines: tuple[str, ...]) -> str | None:
    """The release an exact ``torch==X`` line (no marker) pins, else None
    (``readers.exact_release``: conda's ``pytorch=1.11.0`` is 1.11.0)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from hpcenv.project import readers

    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and not req.marker:
            return readers.exact_release(req.specifier)
    return None


def resolve_for(
    pkgs: Packages,
    facts: Facts,
    *,
    python: str | None = None,
    selection: uv_lock.Selection = uv_lock.DEFAULT_SELECTION,
    allow_build: bool = False,
) -> Packages:
    """The pins a hand-written file (``pkgs.request``) installs on the node in ``facts``:
    resolved with uv for its arch, glibc and Python (``project_resolve``, cached). When it
    cannot be resolved here (an index unreachable, a package that cannot be built), every
    exact pin is judged as written, torch pinned or not, with a warning."""
    from hpcenv.project import compile as project_resolve
    from hpcenv.project import readers, torch_wish

    request = pkgs.request
    if request is None:
        return pkgs
    if selection.groups or selection.no_default_groups or selection.all_extras:
        raise BadInput(
            f"{pkgs.source}: --group/--no-default-groups/--all-extras select from a uv.lock; "
            f"give --extra NAME for a {pkgs.kind}'s optional dependencies"
        )
    if selection.extras:
        if request.kind not in ("pyproject", "setup.py"):
            raise BadInput(f"{pkgs.source}: --extra selects optional dependencies of a "
                           f"pyproject.toml or setup.py; this is a {pkgs.kind}")  # fmt: skip
        request = readers.read(Path(pkgs.source), extras=selection.extras, root=Path(request.root))
    arch = facts.arch or os.uname().machine
    if python:
        chosen = forced_python(python, request.requires_python, request.source)
    else:
        offered = facts.python or f"{sys.version_info.major}.{sys.version_info.minor}"
        chosen = python_for(request, offered, "the node")
    py = _minor(chosen.version) or chosen.version
    request, target = as_written(request, facts, arch=arch, python=py)
    pinned = _pinned_torch(request.requirements)
    if pinned:  # before uv: exit 3 naming the fix, not uv's resolver error
        from hpcenv.decide import torch_fit

        torch_fit.check(
            pinned, arch, py, facts.glibc, where="the node",
            python_where="--python" if python else "--python X.Y, or the node's Python",
            runs=torch_wish.runs_on(facts),
        )  # fmt: skip
    notes, warnings = (*pkgs.notes, *request.notes), request.warnings
    try:
        resolution = project_resolve.resolve(request, target, allow_build=allow_build)
    except CommandFailed as exc:
        # every exact pin judged as written, torch pinned or not (issue 46)
        pins = [_release_pin(r) for r in request.requirements if _REQ_LINE.match(r)]
        if not pins and not request.cuda_constraints:
            raise
        found = _with_variant(parse_requirements("\n".join(pins), pkgs.source, pkgs.kind), request)
        found = _pypi_build(found, arch) if not request.variant and not request.index_url else found
        found, unjudged = _named_unpinned(found, request)
        left = f"; not judged (no pin): {', '.join(unjudged)}" if unjudged else ""
        return replace(
            found,
            uninstallable=_without_wheels(pins, target, request.index_url),
            declared_cuda=request.cuda_constraints,
            resolved=f"not resolved for {target.describe()}: its exact pins judged as written, "
            f"its CUDA packages by name{left}",
            python=py,
            python_why=chosen.why,
            notes=(*notes, *found.notes),
            warnings=(*warnings, f"{exc} (only the exact pins were judged)"),
        )
    found = _with_variant(parse_requirements(resolution.text, pkgs.source, pkgs.kind), request)
    torch = found.versions.get("torch", ())
    what = f"torch=={torch[0]}" if torch else "no torch"
    how = " (cached)" if resolution.cached else ""
    kind = _KIND_WORDS.get(pkgs.kind, pkgs.kind)
    return replace(
        found,
        declared_cuda=request.cuda_constraints,
        resolved=f"resolved from a hand-written {kind} for {target.describe()}{how}: "
        f"{what}, {len(found.versions)} packages",
        python=py,
        python_why=chosen.why,
        notes=(*notes, *found.notes),
        warnings=warnings,
    )


def as_written(
    request: readers.Request, facts: Facts, *, arch: str, python: str
) -> tuple[readers.Request, project_resolve.Target]:
    """What a hand-written file is resolved as on a node (``python``: "3.11"): the file as
    written, held to the torch build it names (``_held_to_variant``) and to the releases
    its GPU ranges pick with no torch held (``ranges.pick``), for the node's ``arch``,
    glibc and ``python``. The one request ``audit`` resolves and ``plan``'s model judges
    a hand-written file's GPU packages from (``install_set``): ``compile.resolve`` of it
    is cached by its content, so one ``uv pip compile`` serves both."""
    from hpcenv.project import compile as project_resolve
    from hpcenv.project import ranges  # a GPU package's range: what plan picks, said alike

    request = _held_to_variant(request, arch)
    ranged = ranges.pick(request, facts, arch=arch, python=python, torch=None)
    request = replace(
        request,
        constraints=(*request.constraints, *ranged.constraints),
        notes=(*request.notes, *ranged.notes),
    )
    return request, project_resolve.Target(arch=arch, glibc=facts.glibc, python=python)


def _without_wheels(pins: list[str], target: Any, index: str | None) -> tuple[str, ...]:
    """The exact pins of an unresolved file that cannot install on ``target``: the index
    (PyPI unless the file names one) lists wheels of that release for other platforms
    only, and no sdist (``triton==2.2.0`` on aarch64). Nothing is said once the index
    cannot be read (why the file was not resolved, often)."""
    from hpcenv.binaries import wheel_code
    from hpcenv.models import wheel_fit

    out: list[str] = []
    for pin in pins:
        name, _, version = pin.partition("==")
        name, version = canonicalize_name(name.split("[", 1)[0].strip()), version.strip()
        if name == "torch" or not version or ";" in version:
            continue  # torch: judged against hpcenv's data (torch_fit)
        try:
            files = wheel_code.release_files(
                name, version, index=index or "https://pypi.org/simple", timeout=10
            )
        except BadInput:
            break
        wheels = [f for f in files if f.endswith(".whl")]
        if not wheels or len(wheels) < len(files):
            continue  # no such release here, or an sdist uv may build
        if not any(wheel_fit.wheel_fits(w, python=target.python, arch=target.arch,
                                        glibc=target.glibc) for w in wheels):  # fmt: skip
            plats = sorted({w.removesuffix(".whl").rsplit("-", 1)[-1] for w in wheels})
            out.append(f"{name} {version} has no wheel for {target.describe()} (its "
                       f"{len(wheels)} wheels are for {', '.join(plats)}) and no sdist: it "
                       "cannot be installed on this node")  # fmt: skip
    return tuple(out)


def _held_to_variant(request: readers.Request, arch: str) -> readers.Request:
    """A file that names its torch build resolves to the release ``torch_wish.variant_release``
    picks for it (conda's ``pytorch>=1.13`` + ``pytorch-cuda=11.7`` is 2.0.1)."""
    from hpcenv.project import torch_wish

    version = torch_wish.variant_release(request, arch)
    if version is None:
        return request
    return replace(request, constraints=(*request.constraints, f"torch=={version}"))


def _pypi_build(found: Packages, arch: str) -> Packages:
    """An unresolved torch pin from PyPI: the build PyPI serves for ``arch`` (hpcenv's torch
    data, read from the wheels), not "no CUDA runtime seen, so CPU"."""
    torch = found.versions.get("torch", ())
    if len(torch) != 1 or not _is_version(torch[0]) or Version(torch[0]).local:
        return found
    release = knowledge.load().release_of(torch[0])
    plat = release.platforms.get(arch) if release else None
    if plat is None or not plat.pypi:
        return found
    note = f"PyPI's torch {torch[0]} for {arch} is its {plat.pypi} build ({plat.source})"
    versions = {**found.versions, "torch": (f"{torch[0]}+{plat.pypi}",)}
    return replace(found, versions=versions, notes=(*found.notes, note))


def _named_unpinned(found: Packages, request: readers.Request) -> tuple[Packages, tuple[str, ...]]:
    """An unresolved file's unpinned lines: its CUDA packages (flash-attn, vLLM) judged by
    name (``cuda_packages.BY_NAME``), the rest named as not judged."""
    versions = dict(found.versions)
    unjudged: list[str] = []
    for name in request.names():
        if name in versions:
            continue
        if name in cuda_packages.BY_NAME:
            versions[name] = ("(unpinned)",)
        else:
            unjudged.append(name)
    return replace(found, versions=versions), tuple(unjudged)


def _release_pin(line: str) -> str:
    """``torch==1.11.0.*`` (conda's ``pytorch=1.11.0``) -> ``torch==1.11.0``: the release
    ``readers.exact_release`` reads it as; other lines as they are."""
    from packaging.requirements import InvalidRequirement, Requirement

    from hpcenv.project import readers

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return line
    if req.marker or not str(req.specifier).endswith(".*"):
        return line
    release = readers.exact_release(req.specifier)
    return f"{req.name}=={release}" if release else line


def _with_variant(found: Packages, request: readers.Request) -> Packages:
    """The torch build a file names beside its pins (conda's ``cudatoolkit=11.3``, an index
    URL's ``/whl/cu124``) as the local label of torch and of its torchvision/torchaudio (the
    same channel or index serves them), the way they install: judged as that build, not
    PyPI's."""
    if not request.variant:
        return found
    versions = dict(found.versions)
    torch = versions.get("torch", ())
    if not torch:
        return found
    for name in ("torch", *companions.NAMES):
        pins = versions.get(name, ())
        labelled = tuple(
            v if Version(v).local else f"{v}+{request.variant}" for v in pins if _is_version(v)
        )
        if pins:
            versions[name] = labelled or pins
    note = f"{request.variant_why}: torch judged as its {request.variant} build"
    return replace(found, versions=versions, notes=(*found.notes, note))


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _minor(version: str | None) -> str | None:
    if not version:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}"


# --- judging --------------------------------------------------------------------------


def _cuda_from_runtime(version: str) -> str | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}"


def _lowest_python(requires_python: str | None) -> str | None:
    """The oldest Python a ``requires-python`` such as ``>=3.11`` admits (None: unknown)."""
    if not requires_python:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specs = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return None
    bounds = []
    for s in specs:
        if s.operator not in (">=", "~=", "==", "==="):
            continue
        try:  # "==3.11.*" is a valid specifier but "3.11.*" is no version: use "3.11"
            bounds.append(Version(s.version.removesuffix(".*")))
        except InvalidVersion:
            continue
    bounds = [b for b in bounds if not b.is_prerelease]
    return str(max(bounds)) if bounds else None


def marker_environment(
    arch: str, python: str | None = None, requires_python: str | None = None
) -> dict[str, str]:
    """PEP 508 marker values of a Linux node with CPU ``arch`` running CPython ``python``.

    ``python`` comes from the facts; without it, the lowest version ``requires_python``
    admits; without that, the interpreter running hpcenv (only ``python_version``
    markers depend on it, and torch's CUDA runtimes are chosen by ``platform_machine``).
    """
    uname = os.uname()
    env = dict(
        platform_release=uname.release,  # as platform.release(): this machine's
        platform_version=uname.version,
        platform_machine=arch,
        sys_platform="linux",
        platform_system="Linux",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        extra="",
    )
    for candidate in (python, _lowest_python(requires_python)):
        if not candidate:
            continue
        try:
            v = Version(candidate)
        except InvalidVersion:
            continue
        full = ".".join(str(n) for n in (*v.release, 0, 0)[:3])
        env.update(
            python_version=f"{v.major}.{v.minor}",
            python_full_version=full,
            implementation_version=full,
        )
        return env
    # no Python known: this interpreter's (packaging's default environment)
    from packaging.markers import default_environment

    return {**{k: str(v) for k, v in default_environment().items()}, **env}


class _MarkerError(Exception):
    """A marker that parses but cannot be evaluated (named with its file by ``identify``)."""


def _applies(marker: str | None, env: dict[str, str] | None) -> bool:
    """Whether ``marker`` holds in ``env`` (no environment: every marker holds)."""
    if marker is None or env is None:
        return True
    from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName

    try:
        return Marker(marker).evaluate(env)
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidVersion) as exc:
        raise _MarkerError(f"marker {marker!r} cannot be evaluated for this node ({exc})") from exc


def _applying(pkgs: Packages, env: dict[str, str] | None) -> dict[str, tuple[str, ...]]:
    """``pkgs.versions`` less the requirements lines whose marker does not hold."""
    return {
        name: kept
        for name, versions in pkgs.versions.items()
        if (kept := tuple(v for v in versions if _applies(pkgs.markers.get((name, v)), env)))
    }


def installed_set(pkgs: Packages, env: dict[str, str] | None) -> dict[str, tuple[str, ...]]:
    """What pinned requirements install where ``env``'s markers hold (every line without
    ``env``): the set :func:`examine` judges, and ``plan``'s model of a compiled file
    (``install_set``). BadInput names the file for a marker that cannot be evaluated."""
    try:
        return _applying(pkgs, env)
    except _MarkerError as exc:
        raise BadInput(f"{pkgs.source}: {exc}; regenerate it with uv") from exc


@dataclass(frozen=True, kw_only=True)
class Found:
    """The torch build a lock, requirements file or venv installs on one node."""

    version: str  # as found, e.g. "2.9.1+cu126"
    build: str  # "cpu", "cu126", "rocm6.4", ...
    cuda: str | None
    evidence: str
    selection: str | None = None  # uv.lock: fork, groups and extras (``Resolved.describe``)
    python: str | None = None
    python_why: str | None = None
    warnings: tuple[str, ...] = ()
    #: every package installed on the node (name -> versions): the CUDA packages are judged
    installed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: who depends on whom among them (name -> names; None: not known, a venv or a file
    #: without uv's ``# via`` lines): each CUDA runtime wheel is attributed by it
    edges: dict[str, tuple[str, ...]] | None = None
    #: uv.lock: what each package's locked release offers (its wheels, an sdist), judged
    #: for the node's arch and glibc (``cuda_packages.platform_verdict``); None: not known
    files: dict[str, cuda_packages.Files] | None = None

    def astuple(self) -> tuple[str, str, str | None, str]:
        return self.version, self.build, self.cuda, self.evidence


def identify(
    pkgs: Packages,
    arch: str | None = None,
    *,
    python: str | None = None,
    selection: uv_lock.Selection = uv_lock.DEFAULT_SELECTION,
) -> tuple[str, str, str | None, str]:
    """(torch version, build, cuda, evidence) of the torch in ``pkgs`` on a Linux node with
    CPU ``arch`` and Python ``python`` (see :func:`examine`)."""
    return examine(pkgs, arch, python=python, selection=selection).astuple()


def examine(
    pkgs: Packages,
    arch: str | None = None,
    *,
    python: str | None = None,
    python_from: str = "the node",
    selection: uv_lock.Selection = uv_lock.DEFAULT_SELECTION,
    glibc: str | None = None,
) -> Found:
    """The torch build in ``pkgs`` on a Linux node with CPU ``arch`` and Python ``python``.

    A ``uv.lock`` is read as ``uv sync`` installs it with ``selection`` (``uv export
    --frozen``; its arch defaults to this machine's). Requirements lines are kept when
    their marker holds for the node (without ``arch``, every marker is taken to hold).
    """
    if pkgs.lock is not None:
        return _examine_lock(pkgs, arch, python, python_from, selection, glibc=glibc)
    if selection != uv_lock.DEFAULT_SELECTION:
        raise BadInput(
            f"{pkgs.source}: --extra/--group/--no-default-groups select from a uv.lock; "
            f"this is a {pkgs.kind}"
        )
    env = marker_environment(arch, python, pkgs.requires_python) if arch else None
    versions = installed_set(pkgs, env)
    torches = versions.get("torch", ())
    if not torches and (
        cuda_packages.gpu_stack(versions) or pkgs.declared_cuda or pkgs.uninstallable
    ):
        return _no_torch(versions, pkgs.edges)
    if not torches:
        what = "requirements file" if pkgs.kind == "requirements" else pkgs.kind
        hint = ""
        if pkgs.resolved:  # hand-written: meant for a torch installed separately
            hint = (
                f" (resolved for the node: {len(pkgs.versions)} packages, none of them torch); "
                "if torch is installed separately, audit that venv, or 'hpcenv build PROFILE "
                f"--project {Path(pkgs.source).parent}' installs the profile's torch with it"
            )
        raise BadInput(f"{pkgs.source}: no torch in this {what}; nothing to audit{hint}")
    if len(torches) > 1:
        on = f" on {arch}" if arch else ""
        raise BadInput(
            f"{pkgs.source}: several torch versions{on} ({', '.join(torches)}); a "
            f"{pkgs.kind} installs one: regenerate it for this node's platform"
        )
    found = _torch_build(pkgs, versions, torches[0], arch)
    return replace(found, installed=versions, edges=pkgs.edges)


def _no_torch(
    versions: dict[str, tuple[str, ...]], edges: dict[str, tuple[str, ...]] | None, **common: Any
) -> Found:
    """A set with GPU packages and no torch (JAX, CuPy ...): judged by its packages alone."""
    return Found(
        version="",
        build="none",
        cuda=None,
        evidence="installs no torch",
        installed=versions,
        edges=edges,
        **common,
    )


def _bundled(version: str, arch: str | None) -> Found | None:
    """PyPI's plain ``torch==X`` of 1.8-1.13: a CUDA build with the runtime inside the
    wheel (no nvidia-* wheels to tell it by), from torch_pypi.toml; else None."""
    release = knowledge.load().release_of(version)
    plat = release.platforms.get(arch or "") if release else None
    if plat is None or not plat.bundles_cudart or not plat.pypi or plat.pypi == "cpu":
        return None
    cuda = knowledge.variant_cuda(plat.pypi)
    return Found(
        version=version,
        build=plat.pypi,
        cuda=cuda,
        evidence=(
            f"PyPI's torch {version} for {arch} is its {plat.pypi} build, the CUDA runtime "
            "inside the wheel (torch_pypi.toml)"
        ),
    )


def _torch_build(
    pkgs: Packages, versions: dict[str, tuple[str, ...]], version: str, arch: str | None = None
) -> Found:
    found = _by_label(pkgs.source, version)
    if found is not None:
        return found
    pulled = cuda_packages.torch_side(pkgs.edges)
    for name in RUNTIME_PACKAGES:
        if pulled is not None and name not in pulled:
            continue  # another package's runtime (jax-cuda13-plugin's), not torch's
        for rt in versions.get(name, ()):
            if cuda := _cuda_from_runtime(rt):
                build = "cu" + cuda.replace(".", "")
                return Found(version=version, build=build, cuda=cuda, evidence=f"pulls {name} {rt}")
    if pkgs.kind == "venv":
        from hpcenv.binaries import archs

        if binary := archs.torch_build(Path(pkgs.source)):
            return Found(version=version, build=binary[0], cuda=binary[1], evidence=binary[2])
    if pkgs.kind != "venv" and (bundled := _bundled(version, arch)) is not None:
        return bundled
    return Found(
        version=version,
        build="cpu",
        cuda=None,
        evidence="pulls no nvidia-cuda-runtime wheel (a CPU build)",
    )


def _by_label(source: str, version: str) -> Found | None:
    try:
        label = Version(version).local
    except InvalidVersion as exc:
        raise BadInput(f"{source}: torch version {version!r} is not a version") from exc
    if label and _LABEL.match(label):
        cuda = knowledge.variant_cuda(label)
        return Found(
            version=version, build=label, cuda=cuda, evidence=f"local version label +{label}"
        )
    return None


def _examine_lock(
    pkgs: Packages,
    arch: str | None,
    python: str | None,
    python_from: str,
    selection: uv_lock.Selection,
    *,
    glibc: str | None = None,
) -> Found:
    lock, project = pkgs.lock, pkgs.project
    assert lock is not None and project is not None
    warnings: list[str] = []
    if not arch:
        arch = os.uname().machine
        warnings.append(f"the node's arch is unknown: audited for this machine's {arch}")
    if python and python_from == "--python":
        requires = project.requires_python or lock.requires_python
        py = forced_python(python, requires, str(project.directory))
    else:
        py = python_for(project, python, python_from, requires_python=lock.requires_python)
    env = marker_environment(arch, py.version)
    resolved = uv_lock.resolve(lock, project, env, selection)
    where = f"{resolved.describe()}, Python {py.version} on {arch}"
    torch = resolved.packages.get("torch")
    installed: dict[str, tuple[str, ...]] = {
        n: (p.version,) for n, p in resolved.packages.items() if p.version
    }
    edges = {a[0]: tuple(d[0] for d in deps) for a, deps in resolved.edges.items()}
    files = {
        n: cuda_packages.Files(wheels=p.wheels, sdist=p.sdist)
        for n, p in resolved.packages.items()
        if n != "torch" and not p.local
    }  # torch: judged below, against its own data
    if (torch is None or torch.version is None) and cuda_packages.gpu_stack(installed):
        return _no_torch(
            installed, edges, selection=where, python=py.version, python_why=py.why,
            warnings=tuple(warnings), files=files,
        )  # fmt: skip
    if torch is None or torch.version is None:
        raise BadInput(
            f"{pkgs.source}: the lock installs no torch on {arch} with {where}"
            f"{_torch_hint(lock, project, env, selection)}; nothing to audit"
        )
    fits = [w for w in torch.wheels if uv_lock.wheel_fits(w, arch, py.version)]
    if torch.wheels and not fits and not torch.sdist:
        arches = sorted({w.removesuffix(".whl").rsplit("_", 1)[-1] for w in torch.wheels})
        raise NoCompatibleBuild(
            f"{pkgs.source}: torch {torch.version} ({where}) has no wheel for {arch} Linux with "
            f"CPython {py.version} (its {len(torch.wheels)} wheels are for "
            f"{', '.join(arches)}): uv sync fails on this node; fix: send {arch} to an index "
            f"that publishes {arch} wheels ([tool.uv.sources] torch with a marker) and 'uv lock'"
        )
    if (
        fits
        and glibc
        and not torch.sdist
        and not [w for w in fits if uv_lock.wheel_fits(w, arch, py.version, glibc)]
    ):
        plats = sorted({w.removesuffix(".whl").rsplit("-", 1)[-1] for w in fits})
        raise NoCompatibleBuild(
            f"{pkgs.source}: torch {torch.version} ({where}) has no wheel for glibc "
            f"{glibc}, the node's (its wheels for CPython {py.version} are "
            f"{', '.join(plats)}): uv sync fails on this node; fix: lock a torch release "
            f"with a wheel for glibc {glibc} (an older manylinux tag), or run on a node or "
            "in a container with a newer glibc"
        )
    common: dict[str, Any] = {
        "selection": where,
        "python": py.version,
        "python_why": py.why,
        "installed": installed,
        "edges": edges,
        "files": files,
    }
    found = _by_label(pkgs.source, torch.version)
    if found is not None:
        return replace(found, warnings=tuple(warnings), **common)
    pulled = {name: version for name, version, _ in resolved.reachable("torch") if version}
    for name in RUNTIME_PACKAGES:
        if (rt := pulled.get(name)) and (cuda := _cuda_from_runtime(rt)):
            return Found(
                version=torch.version,
                build="cu" + cuda.replace(".", ""),
                cuda=cuda,
                evidence=f"pulls {name} {rt}",
                warnings=tuple(warnings),
                **common,
            )
    if (bundled := _bundled(torch.version, arch)) is not None:
        return replace(bundled, warnings=tuple(warnings), **common)
    others = [f"{p.name} {p.version}" for n in RUNTIME_PACKAGES for p in lock.by_name(n)]
    evidence = "pulls no nvidia-cuda-runtime wheel (a CPU build)"
    if others:
        evidence = (
            f"pulls no nvidia-cuda-runtime wheel on {arch}: {', '.join(others)} is listed, "
            f"but not as a dependency of torch on {arch}; a CPU build"
        )
    return Found(
        version=torch.version,
        build="cpu",
        cuda=None,
        evidence=evidence,
        warnings=tuple(warnings),
        **common,
    )


def _torch_hint(
    lock: uv_lock.Lock,
    project: uv_lock.Project,
    env: dict[str, str],
    selection: uv_lock.Selection,
) -> str:
    """``" (torch comes with --extra gpu)"`` when another single selection installs torch."""
    root = lock.root()
    if root is None:
        return ""
    tries = [(f"--extra {e}", replace(selection, extras=(e,))) for e in sorted(root.optional)]
    tries += [
        (f"--group {g}", replace(selection, groups=(*selection.groups, g)))
        for g in sorted(root.groups)
        if g not in selection.groups
    ]
    hits = []
    for flag, sel in tries[:20]:
        try:
            if "torch" in uv_lock.resolve(lock, project, env, sel).packages:
                hits.append(flag)
        except (BadInput, NoCompatibleBuild):
            continue
    return f" (torch comes with {' or '.join(hits)})" if hits else ""


def audit(
    path: str | Path,
    facts: Facts,
    *,
    selection: uv_lock.Selection = uv_lock.DEFAULT_SELECTION,
    python: str | None = None,
    node: str = "the node",
    allow_build: bool = False,
    gpu_code: bool = False,
) -> Audit:
    """Which torch build ``path`` holds and whether the node in ``facts`` (described by
    ``node``) can run it. ``selection`` picks a uv.lock's extras and groups; ``python``
    overrides the Python the markers are evaluated for. A project's code never runs
    unless ``allow_build`` (then in a copy of it: ``project_resolve``). ``gpu_code``: each
    GPU package's wheel for the node is read by ranges (``binaries/wheel_code``)."""
    pkgs = read(path)
    # packaging's answers for this lock, kept for its next audit (utils/answers)
    with answers.kept(pkgs.lock.digest if pkgs.lock else None):
        return _audit_of(
            pkgs, facts, selection=selection, python=python, node=node,
            allow_build=allow_build, gpu_code=gpu_code,
        )  # fmt: skip


def _audit_of(
    pkgs: Packages,
    facts: Facts,
    *,
    selection: uv_lock.Selection,
    python: str | None,
    node: str,
    allow_build: bool,
    gpu_code: bool = False,
) -> Audit:
    """:func:`audit` of what was read."""
    # read: the install set (a hand-written file resolved for the node first), its CUDA
    # packages, a venv's binaries
    if pkgs.request is not None:
        pkgs = resolve_for(pkgs, facts, python=python, selection=selection, allow_build=allow_build)
        selection = uv_lock.DEFAULT_SELECTION
    found = examine(
        pkgs,
        facts.arch,
        python=python or pkgs.python or facts.python,
        python_from="--python" if python else node,
        selection=selection,
        glibc=facts.glibc,
    )
    if pkgs.kind != "venv" and pkgs.lock is None and found.version:
        # a pinned torch of a hand-written file: PyPI's wheels of that release (hpcenv's data)
        from hpcenv.decide import torch_fit
        from hpcenv.project import torch_wish

        torch_fit.check(
            found.version,
            facts.arch or "",
            found.python or pkgs.python or python or facts.python,
            facts.glibc,
            where=node,
            python_where="--python" if python else f"--python X.Y, or the Python of {node}",
            runs=torch_wish.runs_on(facts),
        )
    verdicts = _cuda_verdicts(found, facts, _declared(pkgs, found))
    if gpu_code:
        verdicts = (*verdicts, *_code_verdicts(pkgs, found, facts, verdicts))
    if not found.version:  # no torch: the set's GPU packages are the whole verdict
        return _stack_audit(pkgs, found, facts, verdicts, python=python, node=node)
    unpaired = _unpaired(found, facts)
    kernels = None
    if pkgs.kind == "venv" and facts.nvidia is not None and facts.gpus and found.cuda:
        from hpcenv.binaries import archs

        kernels = archs.check_venv(
            Path(pkgs.source), facts, torch_cuda=found.cuda, **_image_scan(pkgs)
        )
    # decide, then word
    verdict = _judge(found, facts, kernels)
    bad = [v.line() for v in verdicts if not v.ok] + [m.why for m in unpaired]
    bad += pkgs.uninstallable
    message, ok = verdict.message, verdict.ok
    if bad:
        message, ok = f"{message}; {'but ' if ok else ''}{'; '.join(bad)}", False
    advice: list[str] = []  # resolve's warnings about the fix it offers
    better = _better(facts, pkgs, found, advice) if verdict.wants_fix else None
    fix, node_torch = better if better else (None, found.version if verdict.ok else None)
    if unpaired:  # the pair of the torch found
        fix = "; ".join([*([fix] if fix else []), *(m.fix for m in unpaired)])
    return Audit(
        packages=(
            *(v.line() for v in verdicts),
            *pkgs.uninstallable,
            *(f"{m.name} {m.version}: {m.why} ({m.source})" for m in unpaired),
        ),
        source=pkgs.source,
        kind=pkgs.kind,
        torch_version=found.version,
        build=found.build,
        cuda=found.cuda,
        evidence=found.evidence,
        ok=ok,
        message=message,
        fix=fix,
        warnings=(*pkgs.warnings, *found.warnings, *verdict.warnings, *advice),
        resolved=pkgs.resolved,
        notes=pkgs.notes,
        selection=found.selection,
        python=found.python or pkgs.python or facts.python,
        python_why=found.python_why or pkgs.python_why,
        node=node,
        node_torch=_labelled(node_torch, found.build),
    )


def _image_scan(pkgs: Packages) -> dict[str, Any]:
    """For an image: its package directories under the installation read (project/image.py
    finds them inside it; dist-packages too) and no dist-info that leaves it."""
    if pkgs.image_root is None:
        return {}
    from hpcenv.project import image

    root, prefix = Path(pkgs.image_root), Path(pkgs.source)
    return {
        "sites": [s for s in image.site_dirs(root) if s.parents[2] == prefix],
        "allowed": lambda path: containment.inside(path, root),
    }


def _labelled(version: str | None, build: str) -> str | None:
    """``2.9.1`` of a ``cu128`` build -> ``2.9.1+cu128`` (a labelled version as it is)."""
    if version is None or "+" in version or not build:
        return version
    return f"{version}+{build}"


def _declared(pkgs: Packages, found: Found) -> tuple[tuple[str, str], ...]:
    """The file's CUDA constraints to judge: beside torch, not those that chose torch's
    build (conda's ``cudatoolkit=11.3``: torch's own verdict is that CUDA's)."""
    if not found.version or not pkgs.declared_cuda:
        return pkgs.declared_cuda
    from hpcenv.project import readers

    return tuple(
        (n, r) for n, r in pkgs.declared_cuda if readers.conda_variant(n, f"=={r}", n) is None
    )


def _cuda_verdicts(
    found: Found, facts: Facts, declared: tuple[tuple[str, str], ...] = ()
) -> tuple[cuda_packages.Verdict, ...]:
    """Every GPU package of the install set but torch, judged for the node, each CUDA
    runtime wheel attributed to the package that pulls it (``found.edges``)."""
    return cuda_packages.judge(
        {n: v for n, v in found.installed.items() if n != "torch"},
        cuda_packages.node_of(
            facts, torch_cuda=found.cuda, torch_version=found.version or None, arch=facts.arch,
            python=_minor(found.python or facts.python),
        ),
        edges=found.edges,
        declared=declared,
        files=found.files,
    )  # fmt: skip


def _code_verdicts(
    pkgs: Packages, found: Found, facts: Facts, verdicts: tuple[cuda_packages.Verdict, ...]
) -> tuple[cuda_packages.Verdict, ...]:
    """``--gpu-code``: the wheel each judged GPU package installs on the node, its GPU code
    read by ranges (``binaries/wheel_code``, cached by sha256); a GPU none of a library's
    code runs on is named with what the library carries."""
    caps = sorted({g.compute_capability for g in facts.gpus if g.compute_capability},
                  key=knowledge.cap_key)  # fmt: skip
    if not caps:
        return ()
    from hpcenv.binaries import wheel_code

    arch = facts.arch or os.uname().machine
    py = _minor(found.python or facts.python) or f"{sys.version_info[0]}.{sys.version_info[1]}"
    out: list[cuda_packages.Verdict] = []
    for name in dict.fromkeys(v.name for v in verdicts if v.name in found.installed):
        version = found.installed[name][0]
        hit = wheel_code.wheel_for(name, version, index=_index_of(pkgs, name), arch=arch,
                                   python=py, glibc=facts.glibc)  # fmt: skip
        code = wheel_code.read_cached(hit[0], sha256=hit[1]) if hit else None
        if code is None or not code.libraries:
            continue
        bad = {c: libs for c in caps if (libs := code.missing(c, ptx_jit=True))}
        if not bad:
            why = f"its wheel {code.wheel} carries code for {', '.join(caps)}"
            out.append(cuda_packages.Verdict(name=name, version=version, ok=True, why=why))
            continue
        lib = next(iter(bad.values()))[0]
        sms = ", ".join(f"sm_{c.replace('.', '')}" for c in bad)
        why = (f"its wheel {code.wheel} carries no code for {sms} ({lib.member}: SASS "
               f"{' '.join(lib.sass) or 'none'}, PTX {' '.join(lib.ptx) or 'none'})")  # fmt: skip
        out.append(cuda_packages.Verdict(name=name, version=version, ok=False, why=why))
    return tuple(out)


def _index_of(pkgs: Packages, name: str) -> str:
    """The index a package comes from: its lock's registry, else PyPI."""
    for pkg in pkgs.lock.by_name(name) if pkgs.lock else ():
        kind, _, where = pkg.source.partition("=")
        if kind == "registry" and where.startswith(("http://", "https://")):
            return where
    return "https://pypi.org/simple"


def _stack_audit(
    pkgs: Packages,
    found: Found,
    facts: Facts,
    verdicts: tuple[cuda_packages.Verdict, ...],
    *,
    python: str | None,
    node: str,
) -> Audit:
    """The audit of a set without torch (JAX, CuPy ...): its GPU packages' verdicts."""
    bad = [v.line() for v in verdicts if not v.ok] + list(pkgs.uninstallable)
    head = f"{found.selection}: no torch" if found.selection else "no torch"
    if not facts.gpus:
        message = f"{head}; this node has no NVIDIA GPU, so its GPU packages run on CPU only"
    elif bad:
        message = f"{head}; {'; '.join(bad)} ({describe_gpus(facts.gpus)})"
    else:
        judged = ", ".join(f"{v.name} {v.version}" for v in verdicts)
        message = f"{head}; its GPU packages run here ({judged}; {describe_gpus(facts.gpus)})"
    return Audit(
        packages=(*(v.line() for v in verdicts), *pkgs.uninstallable),
        source=pkgs.source,
        kind=pkgs.kind,
        torch_version="",
        build="none",
        cuda=None,
        evidence=found.evidence,
        ok=not bad,
        message=message,
        warnings=(*pkgs.warnings, *found.warnings),
        resolved=pkgs.resolved,
        notes=pkgs.notes,
        selection=found.selection,
        python=found.python or pkgs.python or python or facts.python,
        python_why=found.python_why or pkgs.python_why,
        node=node,
    )


def _unpaired(found: Found, facts: Facts) -> tuple[companions.Mismatch, ...]:
    """torchvision/torchaudio of the install set that are not of its torch's release pair
    (another release, or another variant: ``decide/companions.mismatches``)."""
    pinned = {n: found.installed[n][0] for n in companions.NAMES if found.installed.get(n)}
    return companions.mismatches({**pinned, "torch": found.version}, arch=facts.arch)


@dataclass(frozen=True, kw_only=True)
class _Verdict:
    """Whether the torch build runs on the node, in one line, and whether to offer a fix."""

    ok: bool
    message: str
    wants_fix: bool = False
    warnings: tuple[str, ...] = ()


def _judge(found: Found, facts: Facts, kernels: archs.KernelCheck | None) -> _Verdict:
    """The torch build ``found`` on the node ``facts`` (``kernels``: what a venv's
    binaries carry, when read)."""
    version, build, cuda, evidence = found.astuple()
    public = str(Version(version).public)
    gpus, nv = facts.gpus, facts.nvidia
    head = f"torch {version} ({evidence})"
    if found.selection:
        head = f"{found.selection}: {head}"
    if build == "cpu" or build.startswith(("rocm", "xpu")):
        kind = {"c": "a CPU-only", "r": "a ROCm (AMD GPU)", "x": "an XPU (Intel GPU)"}[build[0]]
        if gpus:
            return _Verdict(
                ok=False,
                message=f"{head} is {kind} build, but this node has {describe_gpus(gpus)}: "
                "torch.cuda.is_available() will be False",
                wants_fix=True,
            )
        kind = "a CPU" if build == "cpu" else kind
        return _Verdict(ok=True, message=f"{head} is {kind} build; this node has no NVIDIA GPU")
    if nv is None or not gpus:
        return _Verdict(
            ok=True,
            message=f"{head} is a CUDA {cuda} build; this node has no NVIDIA GPU, so only "
            "CPU tensors work here",
        )
    a = assess(facts, public, build)
    warnings: list[str] = []
    problems: list[str] = []
    if not a.outright and not a.minor_compat:
        need = a.min_driver or a.major_min_driver or "a newer driver"
        problems.append(f"needs driver >= {need}, this node has {nv.driver_version}")
    elif not a.outright:
        warnings.append(
            f"CUDA {cuda} runs on driver {nv.driver_version} only under minor-version "
            f"compatibility (no PTX JIT; update to >= {a.min_driver} for full support)"
        )
    if kernels is not None:  # a venv's binaries were read: each distribution judged
        problems += kernels.problems
        warnings += kernels.warnings
    if kernels is not None and kernels.torch_read:
        pass  # torch's own libraries were read: the table's arch sets are not needed
    elif a.archs is None:
        warnings.append(
            f"hpcenv does not know the GPU archs of {build} in torch {public} on {facts.arch}; "
            "only the driver was checked"
        )
    elif a.missing:
        caps = ", ".join(f"sm_{c.replace('.', '')}" for c in a.missing)
        problems.append(f"carries no code for {caps} ({' '.join(a.archs.sass)} only)")
    if problems:
        return _Verdict(
            ok=False,
            message=f"{head} is a CUDA {cuda} build: {'; '.join(problems)} ({describe_gpus(gpus)})",
            wants_fix=True,
            warnings=tuple(warnings),
        )
    return _Verdict(
        ok=True,
        message=f"{head} is a CUDA {cuda} build that runs here: "
        f"{driver_reason(nv.driver_version)}; GPUs {describe_gpus(gpus)}",
        warnings=tuple(warnings),
    )


def _better(
    facts: Facts, pkgs: Packages, found: Found, advice: list[str]
) -> tuple[str, str] | None:
    """(the fix, the torch build it names): resolve's answer, the same release's build that
    runs here, else the newest release of the file's torch range (any, for a lock or a
    venv) that has one (said with its version); resolve's warnings go to ``advice``."""
    from hpcenv.project import torch_wish  # here: a lock that runs does not import it

    public = str(Version(found.version).public)
    if pkgs.kind == "uv.lock":
        where = Path(pkgs.source).parent
        how = f"'hpcenv build PROFILE --project {where}' installs the project with it"
    elif pkgs.kind == "venv":
        how = f"'hpcenv resolve --torch =={public}' gives its install line"
    else:  # a hand-written file: the build installs the node's build of the release it pins
        how = f"'hpcenv build PROFILE --project {pkgs.source}' installs the project with it"
    line = torch_wish.torch_line(pkgs.request) if pkgs.request is not None else None
    wanted = str(line.specifier) if line is not None and line.specifier else ">=0"
    for spec in (f"=={public}", wanted):
        try:
            choice = torch_wish.choice_for(facts, spec)
        except BadInput:
            continue
        if choice.backend is None or (choice.backend == found.build and choice.version == public):
            continue
        advice.extend(w for w in choice.warnings if w not in advice)
        gets = f"{choice.version}+{choice.backend}"
        if choice.version == public:
            return f"use the {choice.backend} build from {choice.index_url} ({how})", gets
        return (
            f"no build of torch {public} runs here; use torch {choice.version} (its "
            f"{choice.backend} build from {choice.index_url} runs here; "
            f"'hpcenv resolve --torch =={choice.version}' gives its install line)"
        ), gets
    return None


__all__ = [
    "Audit",
    "Found",
    "Packages",
    "audit",
    "examine",
    "identify",
    "installed_set",
    "marker_environment",
    "read",
]
