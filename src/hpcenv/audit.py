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
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.markers import (
    InvalidMarker,
    Marker,
    UndefinedComparison,
    UndefinedEnvironmentName,
    default_environment,
)
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.errors import BadInput
from hpcenv.facts_model import Facts
from hpcenv.resolve import assess, describe_gpus, driver_reason, try_resolve_torch

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

#: Wheels whose version is the CUDA runtime version of the build, in order of trust.
RUNTIME_PACKAGES = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
)

_REQ_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;\\]+)")
_LABEL = re.compile(r"^(cpu|cu\d{3}|rocm[\d.]+|xpu)$")
_OPTION = re.compile(r"\s--[A-Za-z]")  # where a line's options (--hash=...) begin


@dataclass(frozen=True, kw_only=True)
class Dep:
    """One dependency edge of a ``uv.lock`` package."""

    name: str  # canonical
    version: str | None = None  # uv names it when the lock holds several versions of ``name``
    marker: str | None = None  # PEP 508 environment marker; None: always
    extras: tuple[str, ...] = ()  # extras of ``name`` requested (their optional deps follow)


#: (canonical name, version) of one package in a lock
Node = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class Packages:
    """Name -> versions found in one lock, requirements file or venv."""

    source: str
    kind: str  # "uv.lock" | "requirements" | "venv"
    versions: dict[str, tuple[str, ...]]
    #: torch version -> wheel file names listed for it (uv.lock only): tells platform forks apart
    torch_wheels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: uv.lock only: each package's dependencies, and its optional ones per extra
    deps: dict[Node, tuple[Dep, ...]] = field(default_factory=dict)
    optional: dict[Node, dict[str, tuple[Dep, ...]]] = field(default_factory=dict)
    #: requirements only: the ``; marker`` of a pinned line, for pins that have one
    markers: dict[Node, str] = field(default_factory=dict)
    requires_python: str | None = None  # uv.lock's ``requires-python``


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

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "kind": self.kind,
            "torch": self.torch_version,
            "build": self.build,
            "cuda": self.cuda,
            "evidence": self.evidence,
            "ok": self.ok,
            "message": self.message,
            "fix": self.fix,
            "warnings": list(self.warnings),
        }


# --- reading --------------------------------------------------------------------------


def _add(found: dict[str, list[str]], name: str, version: str) -> None:
    key = canonicalize_name(name)
    if version not in found.setdefault(key, []):
        found[key].append(version)


def _deps(path: Path, owner: str, entries: object) -> tuple[Dep, ...]:
    if not isinstance(entries, list):
        return ()
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            continue
        marker = entry.get("marker")
        if marker is not None:
            try:
                Marker(str(marker))
            except InvalidMarker as exc:
                raise BadInput(
                    f"{path}: package {owner}: dependency {entry['name']} has an invalid "
                    f"marker {marker!r} ({exc}); regenerate the lock with 'uv lock'"
                ) from exc
        extras = entry.get("extra", ())
        out.append(
            Dep(
                name=canonicalize_name(str(entry["name"])),
                version=str(entry["version"]) if "version" in entry else None,
                marker=str(marker) if marker is not None else None,
                extras=tuple(str(e) for e in extras) if isinstance(extras, list) else (),
            )
        )
    return tuple(out)


def read_uv_lock(path: Path) -> Packages:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: not a readable uv.lock ({exc})") from exc
    found: dict[str, list[str]] = {}
    wheels: dict[str, tuple[str, ...]] = {}
    deps: dict[Node, tuple[Dep, ...]] = {}
    optional: dict[Node, dict[str, tuple[Dep, ...]]] = {}
    for pkg in data.get("package", []):
        if isinstance(pkg, dict) and "name" in pkg and "version" in pkg:
            name, version = str(pkg["name"]), str(pkg["version"])
            _add(found, name, version)
            node = (canonicalize_name(name), version)
            deps[node] = deps.get(node, ()) + _deps(path, name, pkg.get("dependencies"))
            extras = pkg.get("optional-dependencies")
            if isinstance(extras, dict):
                optional[node] = {str(k): _deps(path, name, v) for k, v in extras.items()}
            if node[0] == "torch":
                names = tuple(
                    str(w["url"]).rsplit("/", 1)[-1].split("#", 1)[0]
                    for w in pkg.get("wheels", [])
                    if isinstance(w, dict) and "url" in w
                )
                wheels[version] = wheels.get(version, ()) + names
    requires = data.get("requires-python")
    return Packages(
        source=str(path),
        kind="uv.lock",
        versions=_freeze(found),
        torch_wheels=wheels,
        deps=deps,
        optional=optional,
        requires_python=str(requires) if requires is not None else None,
    )


def read_requirements(path: Path) -> Packages:
    try:
        text = path.read_text()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from exc
    found: dict[str, list[str]] = {}
    markers: dict[Node, str] = {}
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.split("#", 1)[0].strip()
        match = _REQ_LINE.match(line)
        if not match:
            continue
        name, version = match.group(1), match.group(2)
        _add(found, name, version)
        rest = line[match.end() :].lstrip()
        if rest.startswith(";"):
            marker = _OPTION.split(rest[1:], 1)[0].strip()
            try:
                Marker(marker)
            except InvalidMarker as exc:
                raise BadInput(
                    f"{path}: {name}=={version}: invalid marker {marker!r} ({exc}); "
                    "regenerate the file with 'uv pip compile'"
                ) from exc
            markers[(canonicalize_name(name), version)] = marker
    return Packages(source=str(path), kind="requirements", versions=_freeze(found), markers=markers)


def read_venv(path: Path) -> Packages:
    found: dict[str, list[str]] = {}
    metas = sorted(path.glob("lib/python*/site-packages/*.dist-info/METADATA"))
    metas += sorted(path.glob("Lib/site-packages/*.dist-info/METADATA"))
    for meta in metas:
        try:
            headers = HeaderParser().parsestr(meta.read_text(errors="replace"), headersonly=True)
        except OSError:
            continue
        name, version = headers.get("Name"), headers.get("Version")
        if name and version:
            _add(found, name, version)
    if not metas:
        raise BadInput(
            f"{path}: no lib/python*/site-packages/*.dist-info found; give a venv directory, "
            "a uv.lock or a requirements file from 'uv pip compile'"
        )
    return Packages(source=str(path), kind="venv", versions=_freeze(found))


def _freeze(found: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in found.items()}


def read(path: str | Path) -> Packages:
    """Packages of a venv directory, a ``uv.lock`` or a requirements file."""
    p = Path(path)
    if p.is_dir():
        return read_venv(p)
    if not p.is_file():
        raise BadInput(f"{p}: no such file or directory (give a uv.lock, requirements or venv)")
    if p.name.endswith(".lock") or p.read_text(errors="replace").lstrip().startswith("version ="):
        return read_uv_lock(p)
    return read_requirements(p)


# --- judging --------------------------------------------------------------------------


def _cuda_from_runtime(version: str) -> str | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}"


def _for_arch(pkgs: Packages, torches: tuple[str, ...], arch: str | None) -> tuple[str, ...]:
    """Of several torch versions in a multi-platform uv.lock, those with a wheel for ``arch``."""
    if not arch or len(torches) < 2 or not pkgs.torch_wheels:
        return torches
    keep = tuple(
        v
        for v in torches
        if any(
            name.removesuffix(".whl").endswith(f"_{arch}") for name in pkgs.torch_wheels.get(v, ())
        )
    )
    return keep or torches


def _lowest_python(requires_python: str | None) -> str | None:
    """The oldest Python a ``requires-python`` such as ``>=3.11`` admits (None: unknown)."""
    if not requires_python:
        return None
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
    env = {k: str(v) for k, v in default_environment().items()}
    env.update(
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
        break
    return env


class _MarkerError(Exception):
    """A marker that parses but cannot be evaluated (named with its file by ``identify``)."""


def _applies(marker: str | None, env: dict[str, str] | None) -> bool:
    """Whether ``marker`` holds in ``env`` (no environment: every marker holds)."""
    if marker is None or env is None:
        return True
    try:
        return Marker(marker).evaluate(env)
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidVersion) as exc:
        raise _MarkerError(f"marker {marker!r} cannot be evaluated for this node ({exc})") from exc


def _reachable(pkgs: Packages, torch: str, env: dict[str, str] | None) -> set[Node]:
    """Packages of a uv.lock that torch ``torch`` pulls on ``env``: its dependency edges
    (and the optional ones of requested extras) whose markers hold, transitively."""
    by_name: dict[str, list[Node]] = {}
    for node in pkgs.deps:
        by_name.setdefault(node[0], []).append(node)
    start: Node = ("torch", torch)
    seen: set[Node] = set()
    seen_extras: set[tuple[Node, str]] = set()
    todo: list[tuple[Node, tuple[str, ...]]] = [(start, ())]
    while todo:
        node, extras = todo.pop()
        edges: list[Dep] = []
        if node not in seen:
            seen.add(node)
            edges += pkgs.deps.get(node, ())
        for extra in extras:
            if (node, extra) not in seen_extras:
                seen_extras.add((node, extra))
                edges += pkgs.optional.get(node, {}).get(extra, ())
        for dep in edges:
            if not _applies(dep.marker, env):
                continue
            exact = (dep.name, dep.version) if dep.version else None
            targets = [exact] if exact in pkgs.deps else by_name.get(dep.name, [])
            todo += [(t, dep.extras) for t in targets if t is not None]
    return seen


def _applying(pkgs: Packages, env: dict[str, str] | None) -> dict[str, tuple[str, ...]]:
    """``pkgs.versions`` less the requirements lines whose marker does not hold."""
    return {
        name: kept
        for name, versions in pkgs.versions.items()
        if (kept := tuple(v for v in versions if _applies(pkgs.markers.get((name, v)), env)))
    }


def identify(
    pkgs: Packages, arch: str | None = None, *, python: str | None = None
) -> tuple[str, str, str | None, str]:
    """(torch version, build, cuda, evidence) of the torch in ``pkgs`` on a Linux node with
    CPU ``arch`` and Python ``python``: markers of lock edges and requirements lines are
    evaluated for that node (without ``arch``, every marker is taken to hold)."""
    env = marker_environment(arch, python, pkgs.requires_python) if arch else None
    try:
        return _identify(pkgs, arch, env)
    except _MarkerError as exc:
        raise BadInput(f"{pkgs.source}: {exc}; regenerate it with uv") from exc


def _identify(
    pkgs: Packages, arch: str | None, env: dict[str, str] | None
) -> tuple[str, str, str | None, str]:
    versions = _applying(pkgs, env)
    torches = _for_arch(pkgs, versions.get("torch", ()), arch)
    if not torches:
        raise BadInput(f"{pkgs.source}: no torch in this {pkgs.kind}; nothing to audit")
    if len(torches) > 1:
        raise BadInput(
            f"{pkgs.source}: several torch versions ({', '.join(torches)}), one per platform "
            "fork; audit the lock made for this node's platform"
        )
    version = torches[0]
    try:
        label = Version(version).local
    except InvalidVersion as exc:
        raise BadInput(f"{pkgs.source}: torch version {version!r} is not a version") from exc
    if label and _LABEL.match(label):
        cuda = knowledge.variant_cuda(label)
        return version, label, cuda, f"local version label +{label}"
    if pkgs.kind == "uv.lock":
        pulled: dict[str, list[str]] = {}
        for name, v in sorted(_reachable(pkgs, version, env)):
            pulled.setdefault(name, []).append(v)
        versions = _freeze(pulled)
    for name in RUNTIME_PACKAGES:
        for rt in versions.get(name, ()):
            cuda = _cuda_from_runtime(rt)
            if cuda:
                build = "cu" + cuda.replace(".", "")
                return version, build, cuda, f"pulls {name} {rt}"
    others = [f"{n} {v}" for n in RUNTIME_PACKAGES for v in pkgs.versions.get(n, ())]
    if others and arch:
        return (
            version,
            "cpu",
            None,
            f"pulls no nvidia-cuda-runtime wheel on {arch}: {', '.join(others)} is listed, "
            f"but not as a dependency of torch on {arch}; a CPU build",
        )
    return version, "cpu", None, "pulls no nvidia-cuda-runtime wheel (a CPU build)"


def audit(path: str | Path, facts: Facts) -> Audit:
    """Which torch build ``path`` holds and whether the node in ``facts`` can run it."""
    pkgs = read(path)
    version, build, cuda, evidence = identify(pkgs, facts.arch, python=facts.python)
    public = str(Version(version).public)
    gpus = facts.gpus
    nv = facts.nvidia

    def result(
        ok: bool, message: str, fix: str | None = None, warnings: tuple[str, ...] = ()
    ) -> Audit:
        return Audit(
            source=pkgs.source,
            kind=pkgs.kind,
            torch_version=version,
            build=build,
            cuda=cuda,
            evidence=evidence,
            ok=ok,
            message=message,
            fix=fix,
            warnings=warnings,
        )

    head = f"torch {version} ({evidence})"

    def better() -> str | None:
        try:
            choice = try_resolve_torch(facts, f"=={public}")
        except BadInput:
            return None
        if choice.backend is None or choice.backend == build:
            return None
        return (
            f"use the {choice.backend} build from {choice.index_url} "
            "('hpcenv plan PROFILE' picks it)"
        )

    if build == "cpu":
        if gpus:
            fix = better()
            return result(
                False,
                message=f"{head} is a CPU-only build, but this node has {describe_gpus(gpus)}: "
                "torch.cuda.is_available() will be False",
                fix=fix,
            )
        return result(
            True,
            message=f"{head} is a CPU build; this node has no NVIDIA GPU",
        )
    if nv is None or not gpus:
        return result(
            True,
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
    if a.archs is None:
        warnings.append(
            f"hpcenv does not know the GPU archs of {build} in torch {public} on {facts.arch}; "
            "only the driver was checked"
        )
    elif a.missing:
        caps = ", ".join(f"sm_{c.replace('.', '')}" for c in a.missing)
        problems.append(f"carries no code for {caps} ({' '.join(a.archs.sass)} only)")
    if problems:
        return result(
            False,
            message=f"{head} is a CUDA {cuda} build: {'; '.join(problems)} ({describe_gpus(gpus)})",
            fix=better(),
            warnings=tuple(warnings),
        )
    return result(
        True,
        message=f"{head} is a CUDA {cuda} build that runs here: "
        f"{driver_reason(nv.driver_version)}; GPUs {describe_gpus(gpus)}",
        warnings=tuple(warnings),
    )


__all__ = ["Audit", "Dep", "Packages", "audit", "identify", "marker_environment", "read"]
