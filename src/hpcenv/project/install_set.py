"""What a user's project installs on a node: its set, rewritten for the node's torch, and
resolved for the node (``plan``/``lock --project``; ``build --project`` installs it,
``build/swap.py``).

A training codebase (open-instruct, say) brings its own ``pyproject.toml`` and
``uv.lock``, and that lock may send a GH200 node to a cu130 torch its 565 driver cannot
run. Installing the lock and then swapping torch leaves two CUDA majors in one venv, so
the set is resolved once, already swapped:

1. what ``uv sync`` would install on this node with the user's selection: ``uv export
   --frozen`` (uv decides forks, groups, extras), its markers evaluated for the node and
   the project's Python (``request.python_for``: ``.python-version``, else the profile's if
   ``requires-python`` admits it, else the oldest it admits);
2. the set rewritten: torch becomes the *same version* from the node's variant, and
   torchvision/torchaudio its release pair of that variant (``torch_wish.pair_for``, read
   from their wheels; the lock's version where none is published) (``torch==2.9.1+cu126``:
   packages compiled against torch are built for that version; the variant is chosen
   again when the project locks another torch than the plan's,
   ``torch_wish.plan_for_version``); the CUDA wheels torch's old build
   pulled (``nvidia-*``, ``cuda-*`` reached from torch) are left to the resolver, which
   picks the new build's; on torch's side of the set (torch, the packages built against
   it and what they pull, ``_torch_stack``) a package built for another CUDA major
   (``vllm 0.19.1+cu130``) becomes its public build (``vllm===0.19.1``); a URL wheel built
   for another major cannot be rebuilt and is left out, with a warning (the plan's
   flash-attn step may replace it); a name that carries the major (``nixl-cu13``) becomes
   its twin for the node's; everything else stays pinned as the lock has it (the
   project's own stack, ``jax-cuda13-plugin`` and its CUDA 13 wheels, is not torch's to
   swap: it is judged, and its fix named, ``jax[cuda12]``); with
   ``--with-profile-packages`` the profile's ``[packages] install`` is added for what the
   project does not pin (the project's pin wins, and the report says which);
3. ``uv pip compile`` of that set for the node (skipped when nothing was swapped or
   added: the lock's pins are then the whole set) (the torch index is the plan's: the
   profile's, ``HPCENV_TORCH_INDEX_URL`` or the wheelhouse; the project's PyTorch index
   URLs are dropped; a labelled pair no wheelhouse holds is asked of the plan's torch
   index, ``_pair_index``).

Either kind's CUDA packages (flash-attn, vLLM) that cannot run on the node are said, as
``audit`` says them (``cuda_verdicts``, on ``decide/cuda_packages``).

A project without a ``uv.lock`` (requirements files, ``pyproject.toml``, ``setup.py``,
``environment.yml``) gets its set from ``handwritten_set`` (``project/handwritten.py``): its
lines with the node's torch, its local projects resolved with their dependencies from a
copy; its GPU packages are judged from what the file installs as written (``_as_written``:
the cached resolution ``audit`` reads, uv's ``# via`` edges; torch's side folded, the plan
brings torch), by name only where that cannot be resolved here (said in ``unknowns``). The
profile's ``[packages] install`` joins either kind only when asked
(``ProjectRequest.with_profile_packages``). ``project_plan`` resolves a set without
installing it (``plan``/``lock --project``).
"""

from __future__ import annotations

import dataclasses
import platform
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.decide import cuda_packages, torch_fit
from hpcenv.decide.plan import require_torch
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.project import compile as project_resolve
from hpcenv.project import copy_tree, handwritten, ranges, readers, torch_wish, uv_lock
from hpcenv.project.audit import Packages, marker_environment
from hpcenv.project.request import ProjectRequest, lock_path, python_for
from hpcenv.project.torch_wish import TORCH_FAMILY
from hpcenv.tools import uv
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, BuildFailed, CommandFailed
from hpcenv.utils.names import canonicalize_name

#: A variant index's last path segment (the project's PyTorch indexes are replaced).
_VARIANT_URL = re.compile(r"/(cu\d+|cpu|rocm[\d.]+|xpu)/?$")


@dataclass(frozen=True, kw_only=True)
class Change:
    name: str
    before: str | None  # the lock's pin
    after: str | None  # the requirement installed instead (None: left out)
    why: str


@dataclass(frozen=True, kw_only=True)
class ProjectSet:
    """The project's set for one node, rewritten for the node's torch variant."""

    requirements: tuple[str, ...]  # the input of ``uv pip compile``
    overrides: tuple[str, ...]  # the project's override-dependencies still needed
    indexes: tuple[str, ...]  # the project's own (non-PyTorch) indexes of kept packages
    local: tuple[str, ...]  # the project and workspace members, relative paths
    python: uv_lock.PythonChoice
    selection: str  # ``Resolved.describe``
    torch_before: str
    torch_after: str
    variant: str | None
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    complete: bool = False  # nothing swapped or added: the lock's own set, no resolve needed
    plan: Plan | None = None  # the plan made for the project's torch version
    names: tuple[str, ...] = field(default_factory=tuple)  # every package of the set
    #: hand-written projects: the local projects are resolved with their dependencies
    #: (from a copy), not installed afterwards with --no-deps
    local_deps: bool = False
    find_links: tuple[str, ...] = ()  # the project's own wheelhouses
    #: hand-written projects: what their local projects require, read as data, and the
    #: files whose code computes their requirements (``readers.Request.dynamic``)
    local_requirements: tuple[str, ...] = ()
    dynamic: tuple[str, ...] = ()
    #: what else could not be known (a hand-written file not resolved here: its GPU
    #: packages judged by name only)
    unknowns: tuple[str, ...] = ()
    #: every GPU package of the set judged for the node (``decide/cuda_packages``)
    verdicts: tuple[cuda_packages.Verdict, ...] = ()


def _python(request: ProjectRequest, plan: Plan) -> uv_lock.PythonChoice:
    """The project's Python for a build of ``plan`` (``request.python_for``)."""
    return python_for(request, plan.python, f"profile {plan.profile}")


# --- the project's torch ----------------------------------------------------------------


def check_torch_fit(version: str, python: uv_lock.PythonChoice, plan: Plan, facts: Facts) -> None:
    """``NoCompatibleBuild`` (exit 3) before anything is resolved or installed when the
    project's torch ``version`` has no wheel for the project's Python on the node's CPU
    arch, or for the node's glibc: the one check of ``plan``/``resolve``/``audit``
    (``torch_fit.check``), here for the project's torch and Python, which may be neither
    the profile's; uv would otherwise be left to fail with a resolver error."""
    torch_fit.check(
        version,
        plan.arch or facts.arch or platform.machine(),
        python.version,
        facts.glibc,
        where=f"the node ({facts.source or 'this host'})",
        python_where=f"the project's Python: {python.why}",
        runs=torch_wish.runs_on(facts),
    )


_NAME_MAJOR = re.compile(r"(?<=[._-])cu(da)?(\d{2})(x?)(?=$|[._-])")


def other_major(
    name: str, version: str, major: int, target: int | None, *, registry: bool
) -> tuple[str | None, str, str | None]:
    """(requirement instead, why, warning) for a package built for CUDA ``major`` when the
    node's torch is CUDA ``target`` (pure).

    - a name that carries the major (``nixl-cu13``, ``nvidia-cutlass-dsl-libs-cu13``,
      ``cupy-cuda13x``): its twin for ``target`` at the same version (``nixl-cu12==0.7.1``;
      the resolve fails, naming it, where the twin lacks that version);
    - a label that names it (``+cu130``, Astral's ``+cu.13.0.torch.2.11``) from an index:
      its public build (``vllm===0.19.1``, PyPI's);
    - a URL wheel: left out, with a warning (nothing else is known to build it).
    """
    public = str(Version(version).public)
    if target is not None and (m := _NAME_MAJOR.search(name)):
        twin = f"{name[: m.start()]}cu{m.group(1) or ''}{target}{m.group(3)}{name[m.end() :]}"
        return f"{twin}=={public}", f"built for CUDA {major}: its CUDA {target} twin", None
    if registry:
        return f"{name}==={public}", f"built for CUDA {major}: its public build", None
    return (
        None,
        f"a URL wheel built for CUDA {major}",
        f"{name} {version} is a URL wheel built for CUDA {major} and no build for CUDA "
        f"{target} is known: left out (the profile's flash-attn step, if any, installs its own)",
    )


# --- step 1 and 2: the set --------------------------------------------------------------


def _wheel_name(path: str) -> str:
    try:
        return canonicalize_name(parse_wheel_filename(path.rsplit("/", 1)[-1])[0])
    except InvalidWheelFilename as exc:
        raise BadInput(f"uv export printed {path!r}, which is no wheel file name") from exc


def _export_lines(text: str, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``{name: requirement without marker}`` and local paths, for lines whose marker holds."""
    pins: dict[str, str] = {}
    local: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, marker = line.partition(" ;")
        if marker.strip():
            try:
                holds = Requirement(f"x ; {marker.strip()}").marker.evaluate(env)  # type: ignore[union-attr]
            except (InvalidRequirement, ValueError) as exc:
                raise BadInput(
                    f"uv export printed {line!r}, which hpcenv cannot read ({exc})"
                ) from exc
            if not holds:
                continue
        body = body.strip()
        if body.startswith("-e "):
            local.append(body[3:].strip())
        elif body.startswith(("./", "../", ".", "/", "file:")) and " @ " not in body:
            if body.endswith(".whl"):  # a path source: uv prints the file alone
                name = _wheel_name(body)
                url = body if ":" in body else Path(body).absolute().as_uri()
                pins[name] = f"{name} @ {url}"
            else:
                local.append(body)
        elif not body.startswith("-"):
            try:
                pins[canonicalize_name(Requirement(body).name)] = body
            except InvalidRequirement as exc:
                raise BadInput(
                    f"uv export printed {body!r}, which hpcenv cannot read ({exc})"
                ) from exc
    return pins, local


def project_set(
    request: ProjectRequest, plan: Plan, facts: Facts, *, log: IO[str] | None = None
) -> ProjectSet:
    """Steps 1 and 2 of the module docstring (no venv needed; ``uv export`` only)."""
    if not request.locked:
        return handwritten_set(request, plan, facts)
    locked = _read_locked(request, plan, facts)
    if not locked.torch_version:
        return _without_torch(request, locked, plan, facts, log=log)
    require_torch(plan)  # the set installs torch: the profile's must run (exit 3 otherwise)
    directory, resolved, base = request.directory, locked.resolved, locked.base
    check_torch_fit(base, locked.python, plan, facts)
    out = _Decisions()
    if note := readers.precedence_note(directory, lock_path(directory)):
        out.warnings.append(note)
    if plan.torch.version and plan.torch.version != base:
        planned = f"{plan.torch.version} ({plan.torch.backend})"
        plan = torch_wish.plan_for_version(plan, base, facts)
        out.warnings.append(
            f"the project locks torch {base}, the plan chose {planned}: keeping {base} "
            f"(packages compiled against torch are built for it) from the "
            f"{plan.torch.backend} variant resolved for {base} on this node"
        )
        out.warnings += list(plan.torch.warnings)
    variant = plan.torch.backend
    text = locked.exported  # the one ``uv export`` of this command
    pins, local = _export_lines(text, locked.env)
    if "torch" not in pins:
        raise BuildFailed(
            f"{directory}: uv export installs no torch where hpcenv's reading of the lock does "
            f"({resolved.describe()}); please report this lock"
        )
    swapped = Version(locked.torch_version).local != variant
    stack = _torch_stack(resolved)
    for name, line in sorted(pins.items()):
        _decide_pin(out, name, line, locked, plan, swapped=swapped, torch_stack=stack)
    if request.with_profile_packages:
        _profile_packages(out, plan, pins)
    changed = {c.name for c in out.changes}
    verdicts = cuda_verdicts(
        _installed(pins, out.changes, resolved), plan, facts, edges=_lock_edges(resolved),
        files=_lock_files(resolved, [n for n in pins if n not in changed]),
        python=locked.python.version,
    )  # fmt: skip
    out.warnings += warnings_of(verdicts)
    dropped = {c.name for c in out.changes if c.after is None or c.name in TORCH_FAMILY}
    overrides = tuple(
        o for o in locked.project.overrides if req_name(o) in dropped - set(TORCH_FAMILY)
    )
    return ProjectSet(
        requirements=tuple(out.reqs),
        overrides=overrides,
        indexes=tuple(out.indexes),
        local=tuple(local),
        python=locked.python,
        selection=resolved.describe(),
        torch_before=locked.torch_version,
        torch_after=f"{base}+{variant}" if swapped and variant else locked.torch_version,
        variant=variant,
        changes=tuple(out.changes),
        warnings=tuple(out.warnings),
        complete=not swapped and len(out.reqs) == len(pins),
        plan=plan,
        names=tuple(sorted(set(pins) | {c.name for c in out.changes if c.after})),
        verdicts=verdicts,
    )


def _without_torch(
    request: ProjectRequest, locked: _Locked, plan: Plan, facts: Facts, *, log: IO[str] | None
) -> ProjectSet:
    """A locked project that installs no torch (JAX, CuPy ...): its set as it is locked, no
    torch added (the profile's only with ``--with-profile-packages``), its GPU packages
    judged for the node as ``audit`` judges them."""
    directory, resolved = request.directory, locked.resolved
    text = uv.project_export(directory, selection=request.selection.uv_args(), log=log)
    pins, local = _export_lines(text, locked.env)
    out = _Decisions()
    if note := readers.precedence_note(directory, lock_path(directory)):
        out.warnings.append(note)
    out.warnings.append(
        f"the project installs no torch ({resolved.describe()}): it is installed as it is "
        f"locked, without profile {plan.profile}'s torch"
    )
    for name, line in sorted(pins.items()):
        out.reqs.append(line)
        if (url := _own_index(resolved.packages.get(name))) and url not in out.indexes:
            out.indexes.append(url)
    if request.with_profile_packages:
        _profile_packages(out, plan, pins)
    versions = {n: (p.version,) for n in pins if (p := resolved.packages.get(n)) and p.version}
    verdicts = stack_verdicts(
        versions, facts, edges=_lock_edges(resolved), files=_lock_files(resolved, pins),
        python=locked.python.version,
    )  # fmt: skip
    out.warnings += warnings_of(verdicts)
    return ProjectSet(
        requirements=tuple(out.reqs),
        overrides=(),
        indexes=tuple(out.indexes),
        local=tuple(local),
        python=locked.python,
        selection=resolved.describe(),
        torch_before="none",
        torch_after="none",
        variant=None,
        changes=tuple(out.changes),
        warnings=tuple(out.warnings),
        complete=len(out.reqs) == len(pins),
        plan=_no_torch_index(plan),
        names=tuple(sorted(set(pins) | {c.name for c in out.changes if c.after})),
        verdicts=verdicts,
    )


def _no_torch_index(plan: Plan) -> Plan:
    """The plan a set without torch is resolved and installed with: no PyTorch index (its
    packages come from the indexes the project names, and the default one)."""
    return dataclasses.replace(plan, torch=dataclasses.replace(plan.torch, index_url=None))


def stack_verdicts(
    versions: Mapping[str, tuple[str, ...]],
    facts: Facts,
    *,
    edges: Mapping[str, tuple[str, ...]] | None = None,
    files: Mapping[str, cuda_packages.Files] | None = None,
    python: str | None = None,
) -> tuple[cuda_packages.Verdict, ...]:
    """The GPU packages of a set without torch judged for the node, as ``audit`` judges
    them (``decide/cuda_packages``, each CUDA runtime attributed through ``edges``; each
    locked package's ``files`` for the node's arch, glibc and the set's ``python``)."""
    node = cuda_packages.node_of(facts, python=_minor(python))
    return cuda_packages.judge(versions, node, edges=edges, files=files)


def _lock_files(resolved: uv_lock.Resolved, names: Iterable[str]) -> dict[str, cuda_packages.Files]:
    """What each of ``names`` offers to install from, as locked (its wheels and sdist),
    for the judge's wheel verdict (torch's are judged against its own data, a local
    package is built)."""
    return {
        n: cuda_packages.Files(wheels=p.wheels, sdist=p.sdist)
        for n in names
        if n != "torch" and (p := resolved.packages.get(n)) is not None and not p.local
    }


def _minor(version: str | None) -> str | None:
    """``3.12.7`` -> ``3.12`` (the wheels' Python)."""
    return ".".join(version.split(".")[:2]) if version else None


@dataclass(frozen=True, kw_only=True)
class _Locked:
    """What a project's uv.lock installs on the node, and its torch."""

    project: uv_lock.Project
    python: uv_lock.PythonChoice
    env: dict[str, str]
    arch: str
    resolved: uv_lock.Resolved
    torch_version: str  # as locked, with its label ("": the lock installs no torch)
    base: str  # its public version ("": none)
    exported: str  # ``uv export --frozen``'s text for the selection, run once


def _read_locked(request: ProjectRequest, plan: Plan, facts: Facts) -> _Locked:
    directory = request.directory
    lock = uv_lock.read_lock(lock_path(directory))
    project = uv_lock.read_project(directory)
    py = _python(request, plan)
    arch = plan.arch or facts.arch or platform.machine()
    env = marker_environment(arch, py.version)
    exported = uv_lock.export(lock, request.selection)
    resolved = uv_lock.resolve(lock, project, env, request.selection, exported=exported)
    torch = resolved.packages.get("torch")
    if torch is None or torch.version is None:  # JAX, CuPy ...: installed as it is locked
        return _Locked(project=project, python=py, env=env, arch=arch, resolved=resolved,
                       torch_version="", base="", exported=exported)  # fmt: skip
    try:
        base = str(Version(torch.version).public)
    except InvalidVersion as exc:
        raise BuildFailed(f"{directory}: torch version {torch.version!r} is not a version") from exc
    return _Locked(
        project=project, python=py, env=env, arch=arch, resolved=resolved,
        torch_version=torch.version, base=base, exported=exported,
    )  # fmt: skip


@dataclass(kw_only=True)
class _Decisions:
    """The project's set as it is decided: requirements, indexes, changes, warnings."""

    reqs: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def note(self, name: str, before: str | None, after: str | None, why: str) -> None:
        """A decision for the report; ``after`` (when new) joins the requirements."""
        self.changes.append(Change(name=name, before=before, after=after, why=why))
        if after is not None and after != before:
            self.reqs.append(after)


def _decide_pin(
    out: _Decisions,
    name: str,
    line: str,
    locked: _Locked,
    plan: Plan,
    *,
    swapped: bool,
    torch_stack: set[str],
) -> None:
    """One exported pin: kept, replaced by the node's build, or left out (said why). Only
    torch's side of the set (``torch_stack``) follows torch's swap; a package of another
    CUDA major that is the project's own (``jax-cuda13-plugin`` and its CUDA 13 wheels) is
    kept as locked and judged (``cuda_verdicts``), its fix named there."""
    variant = plan.torch.backend
    cuda = knowledge.variant_cuda(variant) if variant else None
    target_major = int(cuda.split(".")[0]) if cuda else None
    pkg = locked.resolved.packages.get(name)
    version = pkg.version if pkg else None
    major = cuda_packages.cuda_major(name, version) if version else None
    if swapped and name in TORCH_FAMILY:
        out.note(name, line, *_family_pin(name, version, locked, plan))
    elif swapped and name in _torch_closure(locked) and name.startswith(("nvidia-", "cuda-")):
        why = f"CUDA wheel of torch {locked.torch_version}: re-resolved for {variant}"
        out.note(name, line, None, why)
    elif (
        swapped and major is not None and major != target_major and version and name in torch_stack
    ):
        registry = pkg is not None and pkg.source.startswith("registry=")
        after, why, warning = other_major(name, version, major, target_major, registry=registry)
        out.note(name, line, after, why)
        if warning:
            out.warnings.append(warning)
    elif (
        swapped
        and version
        and (plain := _plain_build_major(name, version, locked.base, locked.arch))
        and plain[0] != target_major
    ):
        out.note(name, line, None, f"PyPI's build for CUDA {plain[0]} ({plain[1]})")
        out.warnings.append(
            f"{name} {version} is built for CUDA {plain[0]} ({plain[1]}) and no build for "
            f"{variant} is known: left out (install its {variant} build from its own index)"
        )
    else:
        out.reqs.append(line)
        if (url := _own_index(pkg)) and url not in out.indexes:
            out.indexes.append(url)


def _family_pin(name: str, version: str | None, locked: _Locked, plan: Plan) -> tuple[str, str]:
    """(requirement, why) of torch or a companion swapped to the node's variant: torch of
    the locked release, torchvision/torchaudio of its release pair (``torch_wish.pair_for``,
    read from their wheels' METADATA), else of the version the lock has."""
    variant = plan.torch.backend
    if name == "torch":
        return torch_wish.target_requirement(plan, locked.base), f"the {variant} build"
    pair = torch_wish.pair_for(plan, locked.base)
    paired = torch_wish.companion_line(pair, name)
    if paired is not None:
        return paired, f"the {variant} build of torch {locked.base}'s pair"
    public = str(Version(version).public) if version else locked.base
    return f"{name}=={public}+{variant}", f"the {variant} build"


def _lock_edges(resolved: uv_lock.Resolved) -> dict[str, tuple[str, ...]]:
    """The lock's kept dependency edges by name (name -> the names it depends on)."""
    return {a[0]: tuple(d[0] for d in deps) for a, deps in resolved.edges.items()}


def _torch_stack(resolved: uv_lock.Resolved) -> set[str]:
    """torch's side of a locked set, the part a swap of torch rebuilds: torch and the
    packages built against it (those that depend on it, the project's own excepted: vLLM,
    flash-attn, torchvision), with everything they pull. The rest is the project's own
    stack (JAX's plugins and the CUDA wheels they pull): hpcenv swaps torch only."""
    parents: dict[str, set[str]] = {}
    for (name, _, _), deps in resolved.edges.items():
        for dep in deps:
            parents.setdefault(dep[0], set()).add(name)
    local = {n for n, p in resolved.packages.items() if p.local}
    built: set[str] = set()
    todo = ["torch"]
    while todo:
        name = todo.pop()
        if name not in built and name not in local:
            built.add(name)
            todo += parents.get(name, ())
    return {n for root in built for n, _, _ in resolved.reachable(root)}


def _installed(
    pins: Mapping[str, str], changes: Sequence[Change], resolved: uv_lock.Resolved
) -> dict[str, tuple[str, ...]]:
    """What the set installs, by name, for the judge (torch's family aside: torch's own
    verdict is the plan's): a kept pin as locked, a replaced one as its replacement
    (``nixl-cu12==0.7.1``, ``vllm===0.19.1``), none for what is left out."""
    after = {c.name: c.after for c in changes}
    out: dict[str, tuple[str, ...]] = {}
    for name in pins:
        if name in TORCH_FAMILY:
            continue
        if name not in after:
            if (pkg := resolved.packages.get(name)) and pkg.version:
                out[name] = (pkg.version,)
        elif (line := after[name]) is not None:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if exact:
                out[canonicalize_name(req.name)] = (exact[0],)
    return out


def _torch_closure(locked: _Locked) -> set[str]:
    """Every package torch's family pulls in (their CUDA wheels are re-resolved)."""
    return {n for name in TORCH_FAMILY for n, _, _ in locked.resolved.reachable(name)}


def _profile_packages(out: _Decisions, plan: Plan, pins: Mapping[str, str]) -> None:
    """``--with-profile-packages``: the profile's [packages] install joins the set."""
    for req in plan.packages:
        wanted = req_name(req)
        if wanted is not None and wanted in pins:
            why = f"the project pins it (the profile asks for {req})"
            out.note(wanted, pins[wanted], pins[wanted], why)
        elif wanted is not None:
            out.note(wanted, None, req, f"profile {plan.profile}'s [packages] install")


def warnings_of(verdicts: tuple[cuda_packages.Verdict, ...]) -> list[str]:
    return [f"{v.line()}: it cannot run on this node" for v in verdicts if not v.ok]


def cuda_verdicts(
    versions: Mapping[str, tuple[str, ...]],
    plan: Plan,
    facts: Facts,
    *,
    edges: Mapping[str, tuple[str, ...]] | None = None,
    files: Mapping[str, cuda_packages.Files] | None = None,
    python: str | None = None,
) -> tuple[cuda_packages.Verdict, ...]:
    """Every GPU package of the set judged for the node beside the planned torch, as
    ``audit`` judges them (the one judge, ``decide/cuda_packages``; each CUDA runtime
    wheel attributed through ``edges`` to the package that pulls it; each locked
    package's ``files`` for the node's arch, glibc and the set's ``python``)."""
    variant = plan.torch.backend
    node = cuda_packages.node_of(
        facts,
        torch_cuda=knowledge.variant_cuda(variant) if variant else None,
        torch_version=plan.torch.version,
        arch=plan.arch or facts.arch,
        python=_minor(python),
    )
    return cuda_packages.judge(
        {n: v for n, v in versions.items() if n != "torch"}, node, edges=edges, files=files
    )


def _hand_cuda_versions(hand: readers.Request) -> dict[str, str]:
    """A hand-written file's CUDA packages judged by name (``cuda_packages.BY_NAME``): the
    exact pin, else ``(unpinned)``, as ``audit`` judges an unresolved file."""
    out: dict[str, str] = {}
    for line in hand.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name in cuda_packages.BY_NAME:
            pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
            out[name] = pins[0] if pins and "*" not in pins[0] else "(unpinned)"
    return out


def _plain_build_major(name: str, version: str, torch: str, arch: str) -> tuple[int, str] | None:
    """``cuda_packages.implied_major`` for a package kept as the lock pins it."""
    node = cuda_packages.Node(caps=(), driver_cuda=None, torch_version=torch, arch=arch)
    return cuda_packages.implied_major(name, version, node, knowledge.load())


def handwritten_set(request: ProjectRequest, plan: Plan, facts: Facts) -> ProjectSet:
    """The set of a project without a ``uv.lock`` (``project/handwritten.py``)."""
    sel = request.selection
    if sel.groups or sel.no_default_groups or sel.all_extras:
        raise BadInput(
            f"--project {request.directory}: --group/--no-default-groups/--all-extras select "
            "from a uv.lock; this project has none (name its extras with --extra NAME)"
        )
    hand = handwritten.request_of(request.directory, request.selection.extras, file=request.file)
    py = _python(request, plan)
    spec = torch_wish.torch_line(hand)
    arch = plan.arch or facts.arch or platform.machine()
    written: tuple[Packages | None, str | None] | None = None
    if spec is None and not hand.variant:  # torch only where the file's set pulls one
        written = _as_written(hand, py, arch, facts)
        if written[0] is not None and "torch" not in written[0].versions:
            pulled = written[0]
            return _handwritten_without_torch(request, hand, py, plan=plan, facts=facts,
                                              pulled=pulled)  # fmt: skip
    require_torch(plan)  # the set installs torch: the profile's must run (exit 3 otherwise)
    version, why = torch_wish.release_for(hand, plan, facts)
    ranged = ranges.pick(hand, facts, arch=arch, python=py.version, torch=version)
    if ranged.torch and ranged.torch != version and not hand.variant:
        version, why = ranged.torch, ranged.why
    check_torch_fit(version, py, plan, facts)
    pin, why = torch_wish.file_variant(hand, version, facts, why)
    plan = torch_wish.plan_for_version(plan, version, facts, pin=pin)
    torch_req = torch_wish.target_requirement(plan, version)
    pair = torch_wish.pair_for(plan, version)
    lines, local, notes, paired = handwritten.project_lines(hand, request.directory, pair)
    indexes, dropped = handwritten.project_indexes(hand, plan.torch.index_url)
    changes = [Change(name="torch", before=str(spec) if spec else None, after=torch_req, why=why)]
    changes += [Change(name=n, before=old, after=new, why=w) for n, old, new, w in paired]
    reqs = [torch_req, *lines]
    names = {canonicalize_name(n) for n in hand.names()} | {"torch"}
    for req in plan.packages if request.with_profile_packages else ():
        wanted = req_name(req)
        if wanted in names:
            why = f"the project asks for it (the profile for {req})"
            changes.append(Change(name=wanted, before=None, after=None, why=why))
        elif wanted is not None:
            why = f"profile {plan.profile}'s [packages] install"
            changes.append(Change(name=wanted, before=None, after=req, why=why))
            reqs.append(req)
    kind = Path(hand.source).name
    pinned, unresolved = written or _as_written(hand, py, arch, facts)
    judged, edges = _judged(hand, pinned)
    judged |= {n: (v,) for n, v in ranged.versions.items()}
    verdicts = cuda_verdicts(judged, plan, facts, edges=edges)
    return ProjectSet(
        requirements=tuple(reqs),
        overrides=(),
        indexes=tuple(indexes),
        local=tuple(local),
        python=py,
        selection=f"{kind} (no uv.lock: resolved for this node)",
        torch_before=str(spec) if spec else "none",
        torch_after=torch_req,
        variant=plan.torch.backend,
        changes=tuple(changes),
        warnings=(
            *hand.warnings,
            *dropped,
            *notes,
            *hand.notes,
            *ranged.notes,
            *([unresolved] if unresolved else []),
            *warnings_of(verdicts),
        ),
        verdicts=verdicts,
        plan=plan,
        names=tuple(sorted(names)),
        local_requirements=hand.local_requirements,
        dynamic=hand.dynamic,
        unknowns=(unresolved,) if unresolved else (),
        local_deps=True,
        find_links=hand.find_links,
    )


def _compiled_set(hand: readers.Request, py: uv_lock.PythonChoice, arch: str) -> Packages | None:
    """What a compiled file (``uv pip compile``'s: the resolution itself) installs on the
    node, and who pulls what (its ``# via`` lines), read as ``audit`` reads it, no uv run;
    None for a file that is not compiled."""
    from hpcenv.project import audit, read_once

    if not hand.compiled:
        return None
    pins = audit.parse_requirements(read_once.text(Path(hand.source), "requirements file"),
                                    hand.source)  # fmt: skip
    versions = audit.installed_set(pins, marker_environment(arch, py.version))
    return dataclasses.replace(pins, versions=versions)


def _as_written(
    hand: readers.Request, py: uv_lock.PythonChoice, arch: str, facts: Facts
) -> tuple[Packages | None, str | None]:
    """(what the file installs on the node as written, with who pulls what; why it is not
    known here). A compiled file is its own resolution (``_compiled_set``); any other is
    resolved as ``audit`` resolves it: ``audit.as_written``'s request through
    ``compile.resolve`` (cached by content: one ``uv pip compile`` serves audit and the
    model), from the indexes the file names, never the plan's. Where it cannot be made
    here (an index unreachable, ``UV_OFFLINE``, a package uv would have to build, code
    that computes the requirements), (None, one line saying so for the model's unknowns):
    its GPU packages are then judged by name, never refused for that alone."""
    from hpcenv.project import audit

    if hand.compiled:
        return _compiled_set(hand, py, arch), None
    minor = ".".join(py.version.split(".")[:2])
    request, target = audit.as_written(hand, facts, arch=arch, python=minor)
    try:
        resolution = project_resolve.resolve(request, target)
    except (BadInput, CommandFailed) as exc:
        if hand.dynamic:  # its line in the unknowns already: not said twice
            why = "code computes its requirements, and it is not run for this"
        elif isinstance(exc, CommandFailed) and exc.output:
            why = uv.error_summary(exc.output)
        else:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, (
            f"{Path(hand.source).name} not resolved as written for {target.describe()} "
            f"({why}): its GPU packages were judged by name only (flash-attn, vLLM), not "
            "those its lines pull"
        )
    pins = audit.parse_requirements(resolution.text, hand.source)
    versions = audit.installed_set(pins, marker_environment(arch, py.version))
    return dataclasses.replace(pins, versions=versions), None


def _judged(
    hand: readers.Request, pinned: Packages | None
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]] | None]:
    """(the GPU packages to judge beside the plan's torch, who pulls what) of a hand-written
    file. A compiled file: every pin (its lines are installed as they are, torch's NVIDIA
    wheels too). A file resolved as written: every package but torch's side
    (``beside_torch``). Not resolved: its CUDA packages by name."""
    if pinned is None:
        return {n: (v,) for n, v in _hand_cuda_versions(hand).items()}, None
    if hand.compiled or pinned.edges is None:
        return dict(pinned.versions), pinned.edges
    return beside_torch(pinned.versions, pinned.edges)


def beside_torch(
    versions: Mapping[str, tuple[str, ...]], edges: Mapping[str, tuple[str, ...]]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """A resolution as written without torch's side: torch, torchvision/torchaudio and
    what only they pull (``cuda_packages.reachable``) are folded, since the plan's torch
    and its pair come from the plan's index with their own wheels; what another package
    pulls too stays, judged as that package's (torch's edges are dropped)."""
    family = set(TORCH_FAMILY)
    side = cuda_packages.reachable(edges, family)
    rest = {n: deps for n, deps in edges.items() if n not in family}
    others = cuda_packages.reachable(rest, (n for n in versions if n not in side))
    kept = {n: v for n, v in versions.items()
            if n not in family and (n not in side or n in others)}  # fmt: skip
    return kept, rest


def _handwritten_without_torch(
    request: ProjectRequest,
    hand: readers.Request,
    py: uv_lock.PythonChoice,
    *,
    plan: Plan,
    facts: Facts,
    pulled: Packages,
) -> ProjectSet:
    """A hand-written project whose set pulls no torch (JAX ...): its lines as they are,
    its GPU packages judged for the node (``stack_verdicts``)."""
    lines, local, notes, _ = handwritten.project_lines(hand, request.directory, None)
    indexes, dropped = handwritten.project_indexes(hand, None)
    reqs = list(lines)
    changes: list[Change] = []
    names = {canonicalize_name(n) for n in hand.names()}
    for req in plan.packages if request.with_profile_packages else ():
        wanted = req_name(req)
        if wanted is not None and wanted not in names:
            why = f"profile {plan.profile}'s [packages] install"
            changes.append(Change(name=wanted, before=None, after=req, why=why))
            reqs.append(req)
    verdicts = stack_verdicts(pulled.versions, facts, edges=pulled.edges)
    kind = Path(hand.source).name
    said = (f"{kind} installs no torch on this node (nothing in it pulls one): installed as it "
            f"is, without profile {plan.profile}'s torch")  # fmt: skip
    return ProjectSet(
        requirements=tuple(reqs),
        overrides=(),
        indexes=tuple(indexes),
        local=tuple(local),
        python=py,
        selection=f"{kind} (no uv.lock: resolved for this node)",
        torch_before="none",
        torch_after="none",
        variant=None,
        changes=tuple(changes),
        warnings=(said, *hand.warnings, *dropped, *notes, *hand.notes, *warnings_of(verdicts)),
        verdicts=verdicts,
        plan=_no_torch_index(plan),
        names=tuple(sorted(names)),
        local_requirements=hand.local_requirements,
        dynamic=hand.dynamic,
        local_deps=True,
        find_links=hand.find_links,
    )


def _own_index(pkg: uv_lock.LockPackage | None) -> str | None:
    """The project's own index a kept package comes from: not PyPI (the default index, or
    the user's mirror of it), not a PyTorch variant index (the plan's replaces those)."""
    if pkg is None or not pkg.source.startswith("registry="):
        return None
    url = pkg.source.split("=", 1)[1]
    if "pypi.org/simple" in url or _VARIANT_URL.search(url):
        return None
    return url


def req_name(text: str) -> str | None:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return None


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)==([^\s;\\+]+)(?=\s|$)", re.M)


def _exact_pins(resolved: str) -> str:
    """``torchext==0.1.0`` -> ``torchext===0.1.0``: ``==0.1.0`` also matches ``0.1.0+cu130``
    (PEP 440 ignores a candidate's local label), which an index or wheelhouse holding both
    builds would then install instead of the resolved one."""
    return _PIN.sub(r"\1===\2", resolved)


def hint(plan: Plan) -> str:
    where = plan.torch_wheel or plan.torch.index_url or "the torch index"
    return (
        f"torch comes from {where} (set [torch] index_url or "
        "HPCENV_TORCH_INDEX_URL for a mirror, [packages] find_links for a wheelhouse); the "
        "other packages from the default index (UV_DEFAULT_INDEX for a PyPI mirror)"
    )


def _pair_index(wanted: ProjectSet, plan: Plan) -> list[str]:
    """The plan's torch index when torch comes from a wheelhouse and the set holds a
    labelled torchvision/torchaudio (torch's pair, ``+cpu``) that no local wheelhouse has:
    the PyTorch index is the only place that publishes it (never asked otherwise, since
    it may be unreachable where torch comes from a wheelhouse)."""
    url = plan.torch.index_url
    if not plan.torch_wheel or not url or url in wanted.indexes:
        return []
    folders = [Path(f) for f in (*uv.find_links(plan), *wanted.find_links) if Path(f).is_dir()]
    for line in wanted.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        name = canonicalize_name(req.name)
        if name == "torch" or name not in TORCH_FAMILY or not pins or "+" not in pins[0]:
            continue
        if not any(any(f.glob(f"{name}-{pins[0]}-*.whl")) for f in folders):
            return [url]
    return []


def extra_args(wanted: ProjectSet, plan: Plan) -> list[str]:
    """The project's own indexes and wheelhouses for resolving and installing its set, and
    the torch index for a labelled pair no wheelhouse holds (``_pair_index``)."""
    urls = (*wanted.indexes, *_pair_index(wanted, plan))
    extra = [a for url in urls for a in ("--index", url)]
    extra += [a for link in wanted.find_links for a in ("--find-links", link)]
    if extra and "--index-strategy" not in uv.source_args(plan):
        extra += ["--index-strategy", "unsafe-best-match"]
    return extra


def write_input(request: ProjectRequest, wanted: ProjectSet, work: Path) -> tuple[str, ...]:
    """``work/requirements.in``: the set's lines, and a hand-written project's local
    projects from ``work/project``, a copy of the tree (returns what the copy skipped)."""
    lines = list(wanted.requirements)
    skipped: tuple[str, ...] = ()
    if wanted.local_deps and wanted.local:  # resolved with their dependencies, from a copy
        copy = work / "project"
        skipped = copy_tree.copy_project(request.directory, copy).skipped
        lines += [str((copy / rel).resolve()) for rel in wanted.local]
    fsio.write_bytes(work / "requirements.in", "".join(f"{r}\n" for r in lines).encode())
    return skipped


def resolve_set(
    request: ProjectRequest,
    wanted: ProjectSet,
    facts: Facts,
    work: Path,
    *,
    log: IO[str] | None = None,
    hashes: bool = False,
) -> tuple[str, ...]:
    """Step 3: ``work/resolved.txt``, the exact pins of ``wanted`` for the node (``uv pip
    compile`` with the plan's sources; the lock's own set when nothing changed). Local
    projects of a hand-written project are resolved from ``work/project``, a copy of the
    tree; returns what that copy skipped. Raises ``CommandFailed`` when uv fails."""
    assert wanted.plan is not None
    plan = wanted.plan
    arch = plan.arch or facts.arch or platform.machine()
    extra = extra_args(wanted, plan)
    skipped = write_input(request, wanted, work)
    extra_compile = list(extra)
    if wanted.overrides:
        overrides = "".join(f"{o}\n" for o in wanted.overrides)
        fsio.write_bytes(work / "overrides.txt", overrides.encode())
        extra_compile += ["--override", str(work / "overrides.txt")]
    if wanted.local_deps:  # torch comes from the plan, not the project's sources
        extra_compile.append("--no-sources")
    if hashes:  # a lock for the user: the file names where its packages come from
        extra_compile += ["--emit-index-url", "--emit-find-links"]
    if wanted.complete and not wanted.local_deps and not hashes:
        shutil.copy(work / "requirements.in", work / "resolved.txt")  # the lock's set as it is
    else:
        uv.compile_lock(
            work / "requirements.in",
            work / "resolved.txt",
            plan=plan,
            python_platform=uv.python_platform(arch, facts.glibc),
            python_version=wanted.python.version,
            log=log,
            extra=extra_compile,
        )
    if not hashes:
        exact = _exact_pins(fsio.read_text(work / "resolved.txt", "uv's output"))
        fsio.write_bytes(work / "resolved.txt", exact.encode())
    return skipped


def install_list(text: str) -> list[str]:
    """``name==version`` per resolved package (URL requirements as given)."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith(("#", "--")):
            continue
        if line.endswith(".whl") and " @ " not in line:  # a wheelhouse file: its pin
            name, version = parse_wheel_filename(line.rsplit("/", 1)[-1])[:2]
            line = f"{name}=={version}"
        out.append(line.replace("===", "==", 1) if " @ " not in line else line)
    return out


def project_plan(
    request: ProjectRequest,
    plan: Plan,
    facts: Facts,
    *,
    hashes: bool = False,
    allow_build: bool = True,
    offline_ok: bool = False,
    wanted: ProjectSet | None = None,
) -> tuple[ProjectSet, str, list[str]]:
    """What ``build --project`` would install on the node, before anything is downloaded
    but metadata: (the set, uv's resolved text (hashed with ``hashes``), the install list).
    Without ``allow_build`` (``plan``) no code of the project runs: its local projects'
    requirements are those read as data, and one whose code computes them is named (BadInput).
    Raises ``CommandFailed`` naming uv's reason and where torch comes from; with
    ``offline_ok``, an index that cannot be reached leaves the set as decided (torch, its
    variant, the Python) with an empty install list and a warning saying what was not
    resolved. ``wanted``: the set already computed (``model.on_node``)."""
    wanted = wanted or project_set(request, plan, facts)
    local = wanted.local if wanted.local_deps else ()  # installed from a copy by a build
    if not allow_build:
        wanted = as_data(wanted)
    assert wanted.plan is not None
    with fsio.work_dir("hpcenv-plan-") as work:
        try:
            resolve_set(request, wanted, facts, work, hashes=hashes)
        except CommandFailed as exc:
            detail = uv.error_summary(exc.output) or str(exc)
            if offline_ok and project_resolve.unreachable(exc.output or ""):
                why = f"not resolved: an index is unreachable ({detail}); {hint(wanted.plan)}"
                return dataclasses.replace(wanted, warnings=(*wanted.warnings, why)), "", []
            raise CommandFailed(
                f"resolving project {request.directory.name} for the node failed: {detail}; "
                f"{hint(wanted.plan)}",
                returncode=exc.returncode,
                output=exc.output,
            ) from exc
        text = fsio.read_text(work / "resolved.txt", "uv's output")
        copy = (work / "project").resolve()
        text = text.replace(copy.as_uri(), ".").replace(str(copy), ".")
    install = install_list(text)
    return wanted, text, [*install, *(rel for rel in local if rel not in install)]


def as_data(wanted: ProjectSet) -> ProjectSet:
    """A hand-written project's set resolved without running its code: its local projects
    replaced by the requirements they declare (BadInput naming one whose code computes
    them)."""
    if not wanted.local_deps:
        return wanted
    if wanted.dynamic:
        raise BadInput(wanted.dynamic[0])
    extra = [r for r in wanted.local_requirements if r not in wanted.requirements]
    kept = [r for r in extra if req_name(r) != "torch"]  # torch comes from the plan
    return dataclasses.replace(wanted, requirements=(*wanted.requirements, *kept), local=())


__all__ = [
    "Change",
    "ProjectSet",
    "as_data",
    "beside_torch",
    "check_torch_fit",
    "cuda_verdicts",
    "extra_args",
    "handwritten_set",
    "hint",
    "install_list",
    "other_major",
    "project_plan",
    "project_set",
    "req_name",
    "resolve_set",
    "stack_verdicts",
    "warnings_of",
    "write_input",
]
