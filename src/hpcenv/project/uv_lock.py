"""What ``uv sync`` installs from a project's universal ``uv.lock`` on one node.

A ``uv.lock`` holds every fork of a resolution at once: per platform and Python
(``resolution-markers``) and, with ``[tool.uv] conflicts``, per conflicting extra or
dependency group (open-instruct: groups ``cuda12``/``cuda13``; nanochat: extras
``cpu``/``gpu``). Which of its packages ``uv sync`` installs is uv's to say: :func:`resolve`
runs ``uv export --frozen`` with the user's selection (``--extra``/``--all-extras``/
``--group``/``--no-default-groups``; uv resolves groups, extras and conflicts and prints
PEP 508 markers for the platform only), evaluates each line's marker for the node with
``packaging.markers`` (its arch, Python and platform) and matches each line to its package
in the lock (``hpcenv audit`` starts that export before it imports this module:
``uv_export.early``). The lock itself is read thinly (:func:`read_lock`, kept between
runs as what was taken from it): each package's source,
wheel file names and dependency lists, for what uv export does not print (torch's wheels
and index, the packages torch pulls). The selection is described for messages as
``uv sync`` reads it: the project's ``default-groups`` (``[tool.uv]``, else ``dev``),
``--group``/``--no-default-groups``, no extras unless ``--extra``/``--all-extras``.

:func:`resolve` returns the packages installed (and the lock's edges between them), the
forks whose ``resolution-markers`` hold, and the selection, described for messages.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hpcenv.models import wheel_fit
from hpcenv.project import read_once, uv_export
from hpcenv.project.uv_export import DEFAULT_SELECTION, Selection
from hpcenv.tools import uv
from hpcenv.utils import answers, data_cache, fsio
from hpcenv.utils.errors import BadInput, CommandFailed, NoCompatibleBuild
from hpcenv.utils.names import canonicalize_name

if TYPE_CHECKING:  # packaging's markers, requirements and specifiers are imported where
    # used: a lock read before, audited again on a node, asks them nothing (utils/answers)
    from packaging.markers import Marker

#: (name, version, source) of one package of a lock; version is None for virtual roots
PackageId = tuple[str, str | None, str]


@dataclass(frozen=True, kw_only=True)
class LockDep:
    name: str  # canonical
    version: str | None = None  # named when the lock holds several versions of ``name``
    source: str | None = None  # named when several sources hold that version
    marker: str | None = None
    extras: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class LockPackage:
    name: str  # canonical
    version: str | None
    source: str  # "registry=https://pypi.org/simple", "editable=.", "url=https://..."
    deps: tuple[LockDep, ...] = ()
    optional: Mapping[str, tuple[LockDep, ...]] = field(default_factory=dict)
    groups: Mapping[str, tuple[LockDep, ...]] = field(default_factory=dict)
    wheels: tuple[str, ...] = ()  # wheel file names
    sdist: bool = False
    resolution_markers: tuple[str, ...] = ()

    @property
    def id(self) -> PackageId:
        return (self.name, self.version, self.source)

    @property
    def local(self) -> bool:
        """The project itself or a workspace member (built from a path, not downloaded)."""
        return self.source.split("=", 1)[0] in ("editable", "virtual", "directory", "path")


@dataclass(frozen=True, kw_only=True)
class ConflictItem:
    package: str
    extra: str | None = None
    group: str | None = None

    @property
    def encoded(self) -> str:
        """uv's name of the item in its lock's markers (crates/uv-resolver
        ``universal_marker.rs``): ``extra-<len>-<package>-<extra>``, ``group-...``,
        ``project-<len>-<package>``, ``<len>`` the normalised name's length in bytes."""
        name = canonicalize_name(self.package)
        head = f"{len(name.encode())}-{name}"
        if self.extra is not None:
            return f"extra-{head}-{canonicalize_name(self.extra)}"
        if self.group is not None:
            return f"group-{head}-{canonicalize_name(self.group)}"
        return f"project-{head}"

    def describe(self) -> str:
        if self.extra is not None:
            return f"extra {self.extra}"
        if self.group is not None:
            return f"group {self.group}"
        return f"package {self.package}"


@dataclass(frozen=True, kw_only=True)
class Lock:
    path: Path
    requires_python: str | None
    resolution_markers: tuple[str, ...]
    supported_markers: tuple[str, ...]
    conflicts: tuple[tuple[ConflictItem, ...], ...]
    members: tuple[str, ...]
    packages: tuple[LockPackage, ...]
    requirements: tuple[LockDep, ...] = ()  # [manifest] requirements (a PEP 723 script's lock)
    #: its bytes' key (read_lock; None: parsed from data given): where the lock came from,
    #: not what it holds, so two reads of one lock are equal however they were read
    digest: str | None = field(default=None, compare=False)

    def by_name(self, name: str) -> list[LockPackage]:
        key = canonicalize_name(name)
        return [p for p in self.packages if p.name == key]

    def root(self) -> LockPackage | None:
        """The project at the lock's directory (``source = { editable|virtual = "." }``)."""
        for p in self.packages:
            kind, _, where = p.source.partition("=")
            if kind in ("editable", "virtual", "directory") and where in (".", "./"):
                return p
        return None


@dataclass(frozen=True, kw_only=True)
class Project:
    """What a project's ``pyproject.toml`` and ``.python-version`` say about installing it."""

    directory: Path
    name: str | None = None
    requires_python: str | None = None
    python_pin: str | None = None  # .python-version
    default_groups: tuple[str, ...] | None = None  # None: uv's default, ("dev",)
    all_groups_default: bool = False  # default-groups = "all"
    overrides: tuple[str, ...] = ()  # [tool.uv] override-dependencies


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """The packages ``uv sync`` installs on one node with one selection."""

    lock: Lock
    packages: dict[str, LockPackage]  # canonical name -> the one package installed
    edges: dict[PackageId, tuple[PackageId, ...]]  # kept dependency edges
    forks: tuple[str, ...]  # resolution-markers that hold ("" when the lock has none)
    extras: tuple[str, ...]  # active extras of the root
    groups: tuple[str, ...]  # active groups of the root
    groups_why: str  # "default-groups dev, cuda12", "--no-default-groups", ...

    def describe(self) -> str:
        """``fork "platform_machine == 'aarch64' ...", groups dev, cuda12, no extras``."""
        if self.forks == ("",):
            fork = "the lock's only fork"
        elif not self.forks:
            fork = "the lock's forks"
        elif len(self.forks) == 1:
            fork = f'fork "{self.forks[0]}"'
        else:
            fork = "forks " + "; ".join(f'"{f}"' for f in self.forks)
        groups = f"groups {', '.join(self.groups)}" if self.groups else "no groups"
        extras = f"extras {', '.join(self.extras)}" if self.extras else "no extras"
        return f"{fork}, {groups} ({self.groups_why}), {extras}"

    def reachable(self, start: str) -> set[PackageId]:
        """Packages reachable from package ``start`` through the kept edges (itself included)."""
        first = self.packages.get(canonicalize_name(start))
        if first is None:
            return set()
        seen: set[PackageId] = set()
        todo = [first.id]
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            todo += self.edges.get(node, ())
        return seen


# --- reading --------------------------------------------------------------------------


#: ``canonicalize_name``, once per name: a lock names each package in every edge to it
_name = functools.cache(canonicalize_name)


def _source_key(source: object) -> str:
    if not isinstance(source, dict) or not source:
        return "unknown="
    kind = next(iter(source))
    return f"{kind}={source[kind]}"


def _deps(path: Path, owner: str, entries: object) -> tuple[LockDep, ...]:
    if not isinstance(entries, list):
        return ()
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            continue
        marker = entry.get("marker")
        if marker is not None:
            from packaging.markers import InvalidMarker

            try:
                _marker(str(marker))
            except InvalidMarker as exc:
                raise BadInput(
                    f"{path}: package {owner}: dependency {entry['name']} has an invalid "
                    f"marker {marker!r} ({exc}); regenerate the lock with 'uv lock'"
                ) from exc
        extras = entry.get("extra", ())
        out.append(
            LockDep(
                name=_name(str(entry["name"])),
                version=str(entry["version"]) if "version" in entry else None,
                source=_source_key(entry["source"]) if "source" in entry else None,
                marker=str(marker) if marker is not None else None,
                extras=tuple(str(e) for e in extras) if isinstance(extras, list) else (),
            )
        )
    return tuple(out)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in _list(value))


def _wheel_names(pkg: Mapping[str, object]) -> tuple[str, ...]:
    names = []
    for w in _list(pkg.get("wheels")):
        if isinstance(w, dict):
            ref = w.get("url") or w.get("path") or w.get("filename") or ""
            names.append(str(ref).rsplit("/", 1)[-1].split("#", 1)[0].replace("%2B", "+"))
    source = pkg.get("source")
    if isinstance(source, dict) and "url" in source and str(source["url"]).endswith(".whl"):
        names.append(str(source["url"]).rsplit("/", 1)[-1].replace("%2B", "+"))
    return tuple(names)


def read_lock(path: Path, data: Mapping[str, object] | None = None) -> Lock:
    """Read ``path`` (a ``uv.lock``); ``data`` is its parsed TOML when already read. A lock
    read before (the same bytes) is neither parsed nor checked again: what this function
    took from it, once its markers were checked, is kept as plain data (``data_cache``,
    :func:`_plain`): ~3 ms, not ~150 (tomllib) or ~10 (its whole TOML from the cache)."""
    if data is not None:
        return _parse(path, data)
    raw = read_once.content(path, "uv.lock")  # opened once per command (read_once)
    digest = data_cache.key([("uv.lock", raw), ("plain", _PLAIN_FORMAT)])
    where = data_cache.entry("uv-lock", digest)
    plain = data_cache.read(where, digest)
    if isinstance(plain, dict):
        with contextlib.suppress(KeyError, TypeError, ValueError):  # not that shape: a miss
            return replace(_from_plain(path, plain), digest=digest)
    lock = _parse(path, fsio.parse_toml(fsio.decode(raw, str(path), "uv.lock"), str(path)))
    data_cache.write(where, digest, _plain(lock), keep=32)
    return replace(lock, digest=digest)


def _parse(path: Path, data: Mapping[str, object]) -> Lock:
    """The lock in ``data`` (the parsed TOML of ``path``), its markers checked."""
    packages = []
    for pkg in _list(data.get("package")):
        if not isinstance(pkg, dict) or "name" not in pkg:
            continue
        name = _name(str(pkg["name"]))
        optional = pkg.get("optional-dependencies")
        groups = pkg.get("dev-dependencies")
        packages.append(
            LockPackage(
                name=name,
                version=str(pkg["version"]) if "version" in pkg else None,
                source=_source_key(pkg.get("source")),
                deps=_deps(path, name, pkg.get("dependencies")),
                optional={
                    canonicalize_name(str(k)): _deps(path, name, v) for k, v in optional.items()
                }
                if isinstance(optional, dict)
                else {},
                groups={canonicalize_name(str(k)): _deps(path, name, v) for k, v in groups.items()}
                if isinstance(groups, dict)
                else {},
                wheels=_wheel_names(pkg),
                sdist="sdist" in pkg,
                resolution_markers=_strings(pkg.get("resolution-markers")),
            )
        )
    conflicts = []
    for group in _list(data.get("conflicts")):
        items = tuple(
            ConflictItem(
                package=canonicalize_name(str(i.get("package", ""))),
                extra=canonicalize_name(str(i["extra"])) if "extra" in i else None,
                group=canonicalize_name(str(i["group"])) if "group" in i else None,
            )
            for i in _list(group)
            if isinstance(i, dict)
        )
        if items:
            conflicts.append(items)
    manifest = data.get("manifest")
    members = _strings(manifest.get("members")) if isinstance(manifest, dict) else ()
    script = (
        _deps(path, "manifest", manifest.get("requirements")) if isinstance(manifest, dict) else ()
    )
    requires = data.get("requires-python")
    return Lock(
        path=path,
        requires_python=str(requires) if requires is not None else None,
        resolution_markers=_strings(data.get("resolution-markers")),
        supported_markers=_strings(data.get("supported-markers")),
        conflicts=tuple(conflicts),
        members=tuple(canonicalize_name(m) for m in members),
        packages=tuple(packages),
        requirements=script,
    )


#: the shape of :func:`_plain` (part of its cache key)
_PLAIN_FORMAT = b"1"

#: one dependency as plain data: name, version, source, marker, extras
_PlainDep = tuple[str, "str | None", "str | None", "str | None", tuple[str, ...]]


def _plain(lock: Lock) -> dict[str, object]:
    """``lock`` as plain data for ``marshal`` (:func:`_from_plain` reads it back)."""

    def deps(ds: tuple[LockDep, ...]) -> tuple[_PlainDep, ...]:
        return tuple((d.name, d.version, d.source, d.marker, d.extras) for d in ds)

    return {
        "requires_python": lock.requires_python,
        "resolution_markers": lock.resolution_markers,
        "supported_markers": lock.supported_markers,
        "conflicts": tuple(tuple((i.package, i.extra, i.group) for i in g) for g in lock.conflicts),
        "members": lock.members,
        "requirements": deps(lock.requirements),
        "packages": tuple(
            (
                p.name,
                p.version,
                p.source,
                deps(p.deps),
                {k: deps(v) for k, v in p.optional.items()},
                {k: deps(v) for k, v in p.groups.items()},
                p.wheels,
                p.sdist,
                p.resolution_markers,
            )
            for p in lock.packages
        ),
    }


def _from_plain(path: Path, data: dict[str, Any]) -> Lock:
    """The lock :func:`_plain` kept (the cache holds only what hpcenv wrote: data_cache)."""

    made: dict[_PlainDep, LockDep] = {}  # one object per distinct edge (frozen: shared)

    def dep(d: _PlainDep) -> LockDep:
        found = made.get(d)
        if found is None:
            n, v, s, m, e = d
            found = made[d] = LockDep(name=n, version=v, source=s, marker=m, extras=e)
        return found

    def deps(ds: tuple[_PlainDep, ...]) -> tuple[LockDep, ...]:
        return tuple(dep(d) for d in ds)

    return Lock(
        path=path,
        requires_python=data["requires_python"],
        resolution_markers=data["resolution_markers"],
        supported_markers=data["supported_markers"],
        conflicts=tuple(
            tuple(ConflictItem(package=p, extra=e, group=g) for p, e, g in group)
            for group in data["conflicts"]
        ),
        members=data["members"],
        requirements=deps(data["requirements"]),
        packages=tuple(
            LockPackage(
                name=n,
                version=v,
                source=s,
                deps=deps(ds),
                optional={k: deps(x) for k, x in opt.items()},
                groups={k: deps(x) for k, x in grp.items()},
                wheels=w,
                sdist=sd,
                resolution_markers=rm,
            )
            for n, v, s, ds, opt, grp, w, sd, rm in data["packages"]
        ),
    )


def _beside(directory: Path, name: str) -> Path:
    """``directory/name``, a file of the project read with its lock; a symlink there that
    leaves the project is refused naming it (``uv_export.beside``), before anything reads
    it (hpcenv, or uv's export)."""
    path = directory / name
    if not uv_export.beside(path):
        from hpcenv.project import containment

        containment.require_inside(path, containment.root_of(path), "a file read with the lock")
    return path


def python_pin_of(directory: Path) -> str | None:
    """The first line of ``directory/.python-version`` (uv's pin of the project's Python),
    comments skipped; None without one."""
    pin_file = _beside(directory, ".python-version")
    if not pin_file.is_file():
        return None
    try:
        lines = [ln.strip() for ln in pin_file.read_text().splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{pin_file}: not readable ({exc})") from exc
    return next((ln for ln in lines if ln and not ln.startswith("#")), None)


def read_project(directory: Path) -> Project:
    """The install settings of the project in ``directory`` (missing files: defaults; each
    file read once, ``read_once``)."""
    pyproject = _beside(directory, "pyproject.toml")
    pin = read_once.identity(_beside(directory, ".python-version"))
    return read_once.kept(
        "project", pyproject, (str(directory), pin), lambda: _read_project(directory, pyproject)
    )


def _read_project(directory: Path, pyproject: Path) -> Project:
    data: dict[str, object] = {}
    if pyproject.is_file():  # parsed once per content, like the lock (data_cache)
        data = read_once.toml(pyproject, "pyproject.toml")
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    uv_cfg = tool.get("uv") if isinstance(tool, dict) and isinstance(tool.get("uv"), dict) else {}
    assert isinstance(project, dict) and isinstance(uv_cfg, dict)
    defaults = uv_cfg.get("default-groups")
    pin = python_pin_of(directory)
    return Project(
        directory=directory,
        name=canonicalize_name(str(project["name"])) if "name" in project else None,
        requires_python=str(project["requires-python"]) if "requires-python" in project else None,
        python_pin=pin,
        default_groups=tuple(canonicalize_name(str(g)) for g in defaults)
        if isinstance(defaults, list)
        else None,
        all_groups_default=defaults == "all",
        overrides=_strings(uv_cfg.get("override-dependencies")),
    )


# --- Python ---------------------------------------------------------------------------


def admits(requires_python: str | None, version: str) -> bool:
    """Whether ``requires_python`` admits Python ``version`` (``3.12`` means ``3.12.x``)."""
    if not requires_python:
        return True
    return answers.remembered(
        "admits", (requires_python, version), lambda: _admits(requires_python, version)
    )


def _admits(requires_python: str, version: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        specs = SpecifierSet(requires_python)
        v = Version(version)
    except (InvalidSpecifier, InvalidVersion):
        return True
    if len(v.release) >= 3:
        return specs.contains(v, prereleases=True)
    # a minor version: admitted when some patch release of it is (==3.12.* , >=3.12.1)
    return any(specs.contains(Version(f"{v.major}.{v.minor}.{p}")) for p in range(0, 40))


def lowest_admitted(requires_python: str | None, floor: str = "3.8") -> str | None:
    """The oldest ``X.Y`` from 3.8 to 3.20 that ``requires_python`` admits."""
    from packaging.version import Version

    start = Version(floor)
    for minor in range(start.minor, 21):
        candidate = f"3.{minor}"
        if admits(requires_python, candidate):
            return candidate
    return None


# --- the install set: uv export ------------------------------------------------------------


def _selected_groups(root: LockPackage, project: Project, sel: Selection) -> tuple[list[str], str]:
    known = set(root.groups)
    for g in sel.groups:
        if canonicalize_name(g) not in known:
            raise BadInput(
                f"--group {g}: the project {root.name} has no dependency group {g!r} "
                f"(it has: {', '.join(sorted(known)) or 'none'})"
            )
    if sel.no_default_groups:
        chosen, why = [], "--no-default-groups"
    elif project.all_groups_default:
        chosen, why = sorted(known), 'default-groups = "all"'
    elif project.default_groups is not None:
        chosen = [g for g in project.default_groups if g in known]
        why = "the project's default-groups" if project.default_groups else "default-groups = []"
    else:
        chosen = ["dev"] if "dev" in known else []
        why = "uv's default group dev" if chosen else "uv's default group dev: none here"
    extra = [canonicalize_name(g) for g in sel.groups if canonicalize_name(g) not in chosen]
    if extra:
        why += " + --group " + ", ".join(extra)
    return chosen + extra, why


def _selected_extras(root: LockPackage, sel: Selection) -> list[str]:
    known = set(root.optional)
    if sel.all_extras:
        return sorted(known)
    out: list[str] = []
    for e in sel.extras:
        name = canonicalize_name(e)
        if name not in known:
            raise BadInput(
                f"--extra {e}: the project {root.name} has no optional dependency {e!r} "
                f"(it has: {', '.join(sorted(known)) or 'none'})"
            )
        out.append(name)
    return out


def _check_conflicts(lock: Lock, active: Iterable[ConflictItem], how: Mapping[str, str]) -> None:
    keys = {i.encoded for i in active}
    for group in lock.conflicts:
        on = [i for i in group if i.encoded in keys]
        if len(on) > 1:
            names = " and ".join(f"{i.describe()}{how.get(i.encoded, '')}" for i in on)
            raise BadInput(
                f"{lock.path}: {names} conflict ([tool.uv] conflicts); select one of them "
                "(e.g. --no-default-groups --group NAME, or a single --extra)"
            )


@functools.lru_cache(maxsize=4096)
def _marker(text: str) -> Marker:
    """``packaging``'s parse of a marker (a lock repeats the same few hundred markers)."""
    from packaging.markers import Marker

    return Marker(text)


def _holds(
    marker: str, env: Mapping[str, str], where: Path, env_key: tuple[object, ...] | None = None
) -> bool:
    """A PEP 508 marker (as ``uv export`` prints it) evaluated for the node by ``packaging``
    (its answer kept for the next audit of the lock: ``utils/answers``, under ``env_key``,
    :func:`_env_key` of ``env``, made once per node by the caller that asks many)."""
    key = env_key or _env_key(env)
    return answers.remembered("marker", (marker, key), lambda: _evaluated(marker, env, where))


def _env_key(env: Mapping[str, str]) -> tuple[object, ...]:
    """A marker environment as plain data, the same for the same values."""
    return tuple(sorted(env.items()))


def _evaluated(marker: str, env: Mapping[str, str], where: Path) -> bool:
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.version import InvalidVersion

    try:
        return _marker(marker).evaluate(dict(env))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, InvalidVersion) as exc:
        raise BadInput(
            f"{where}: marker {marker!r} cannot be evaluated for this node ({exc}); "
            "regenerate the lock with 'uv lock'"
        ) from exc


def export(lock: Lock, selection: Selection = DEFAULT_SELECTION) -> str:
    """``uv export --frozen`` of the project that holds ``lock`` with the selection flags:
    one requirement line per package ``uv sync`` installs, with platform-only markers.

    A lock without its project's ``pyproject.toml`` beside it (a ``uv.lock`` copied out of
    its project) is exported from a temporary directory holding a copy of it and a
    ``pyproject.toml`` that names only its project (``--frozen`` reads the install set from
    the lock; uv checks the project's name against it); the selection is then uv's default.
    """
    directory = lock.path.parent
    if lock.path.name == "uv.lock" and (directory / "pyproject.toml").is_file():
        return _export_in(lock, directory, selection)
    root = lock.root()
    if root is None or (root.version is None and root.source.startswith("editable")):
        raise BadInput(
            f"{lock.path}: no pyproject.toml beside this lock; audit it in its project's "
            "directory (uv export reads the project's pyproject.toml)"
        )
    with fsio.work_dir("hpcenv-lock-") as tmp:  # a SIGKILLed run's is removed by the next
        shutil.copyfile(lock.path, Path(tmp) / "uv.lock")
        version = f"version = {json.dumps(root.version)}\n" if root.version else ""
        requires = (
            f"requires-python = {json.dumps(lock.requires_python)}\n"
            if lock.requires_python
            else ""
        )
        fsio.write_text(
            Path(tmp) / "pyproject.toml",
            f"[project]\nname = {json.dumps(root.name)}\n{version}{requires}",
        )
        return _export_in(lock, Path(tmp), selection)


def _export_in(lock: Lock, directory: Path, selection: Selection) -> str:
    try:
        return uv_export.run(directory, selection)
    except CommandFailed as exc:
        raise BadInput(
            f"{lock.path}: uv export --frozen {' '.join(selection.uv_args())} failed: "
            f"{uv.error_summary(exc.output) or exc}"
        ) from exc


def resolve(
    lock: Lock,
    project: Project,
    env: Mapping[str, str],
    selection: Selection = DEFAULT_SELECTION,
    *,
    exported: str | None = None,
) -> Resolved:
    """What ``uv sync`` installs from ``lock`` on a node with marker environment ``env``:
    ``uv export --frozen`` with the selection (uv decides forks, groups, extras and
    conflicts), each line's marker evaluated for the node by ``packaging``, each line
    matched to its package in the lock (sources, wheels, dependencies). ``exported``: the
    export's text when already run (:func:`export`)."""
    _check_supported(lock, env)
    roots = _roots(lock)
    chosen = _selection(lock, roots, project, selection)
    if exported is None:
        exported = export(lock, selection)
    active = ("", *(i.encoded for i in chosen.active))
    index = _Index(lock)
    markers = _Markers(env, lock.path)
    installed: dict[PackageId, LockPackage] = {r.id: r for r in roots}
    ambiguous: list[tuple[str, list[LockPackage]]] = []
    for line, marker in _export_lines(exported):
        if marker and not markers.holds(marker):
            continue
        found = index.match(line)
        if len(found) == 1:
            installed[found[0].id] = found[0]
        else:
            ambiguous.append((line, found))
    for line, found in ambiguous:
        pkg = _by_edges(
            lock, line, found, installed=installed, chosen=chosen, markers=markers, active=active
        )
        installed[pkg.id] = pkg
    forks = tuple(m for m in lock.resolution_markers if markers.holds_with(m, active))
    return Resolved(
        lock=lock,
        packages=_one_per_name(lock, installed),
        edges=_edges(installed, markers, active),
        forks=forks or (("",) if not lock.resolution_markers else ()),
        extras=tuple(e for _, e in chosen.extras),
        groups=tuple(g for _, g in chosen.groups),
        groups_why=chosen.groups_why,
    )


def _holds_with(marker: str, env: Mapping[str, str], active: Iterable[str], where: Path) -> bool:
    """A lock marker, which may name uv's conflict items as extras (``extra ==
    'group-13-open-instruct-cuda12'``), evaluated by ``packaging`` for the node with each
    active item in turn as ``extra``: it holds when it holds for one of them. Two items of
    one ``[tool.uv] conflicts`` set are never active together (checked first), so a clause
    ``extra == 'A' and extra != 'B'`` means what uv means by it."""
    return _Markers(env, where).holds_with(marker, active)


class _Markers:
    """Markers evaluated for one node (:func:`_holds`, :func:`_holds_with`), each marker
    once per ``extra``: a lock repeats the same few dozen over its thousands of edges."""

    def __init__(self, env: Mapping[str, str], where: Path) -> None:
        self.env = env
        self.where = where
        self._seen: dict[tuple[str, str | None], bool] = {}
        self._keys: dict[str | None, tuple[object, ...]] = {}  # per extra: one object, kept once

    def holds(self, marker: str, extra: str | None = None) -> bool:
        key = (marker, extra)
        hit = self._seen.get(key)
        if hit is None:
            env = self.env if extra is None else {**self.env, "extra": extra}
            env_key = self._keys.get(extra) or self._keys.setdefault(extra, _env_key(env))
            hit = self._seen[key] = _holds(marker, env, self.where, env_key)
        return hit

    def holds_with(self, marker: str, active: Iterable[str]) -> bool:
        if "extra" not in marker:
            return self.holds(marker)
        return any(self.holds(marker, a) for a in active)


def _by_edges(
    lock: Lock,
    line: str,
    found: list[LockPackage],
    *,
    installed: Mapping[PackageId, LockPackage],
    chosen: _Chosen,
    markers: _Markers,
    active: tuple[str, ...],
) -> LockPackage:
    """One of several lock packages of the same name and version (one per index: nanochat's
    torch 2.9.1 from PyPI and from the CPU index): the one an installed package's edge
    whose marker holds leads to."""
    ids = {p.id for p in found}
    hits: set[PackageId] = set()
    for pkg in installed.values():
        deps = [*pkg.deps, *(d for _, e in chosen.extras for d in pkg.optional.get(e, ()))]
        deps += [d for _, g in chosen.groups for d in pkg.groups.get(g, ())]
        for dep in deps:
            if dep.marker and not markers.holds_with(dep.marker, active):
                continue
            hits |= {p.id for p in found if p.id in ids and _leads_to(dep, p)}
    chosen_ones = [p for p in found if p.id in hits]
    if len(chosen_ones) != 1:
        raise BadInput(
            f"{lock.path}: uv export names {line!r}, which matches {len(found)} packages of "
            f"the lock ({', '.join(p.source for p in found)}) and hpcenv cannot tell which "
            "one this node installs; please report this lock"
        )
    return chosen_ones[0]


def _leads_to(dep: LockDep, pkg: LockPackage) -> bool:
    return (
        dep.name == pkg.name
        and dep.version in (None, pkg.version)
        and dep.source in (None, pkg.source)
    )


def _export_lines(text: str) -> Iterator[tuple[str, str]]:
    """(requirement, marker) of each line of ``uv export``'s requirements-txt output."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("--"):
            continue
        body, _, marker = line.partition(" ;")
        yield body.strip(), marker.strip()


class _Index:
    """The lock's packages by name, to match ``uv export``'s lines with."""

    def __init__(self, lock: Lock) -> None:
        self.lock = lock
        self.by_name: dict[str, list[LockPackage]] = {}
        for p in lock.packages:
            self.by_name.setdefault(p.name, []).append(p)

    def match(self, line: str) -> list[LockPackage]:
        """The lock packages ``line`` can be (one, or several of one name and version)."""
        if line.startswith("-e "):
            return [self._local(line[3:].strip(), line)]
        if line.startswith((".", "/", "file:")) and " @ " not in line:
            return [self._local(line, line)]
        name, url, pins = _requirement(line, self.lock.path)
        found = self.by_name.get(_name(name), [])
        if len(found) > 1 and url:
            url = unquote(url.split("#", 1)[0])
            found = [p for p in found if _source_in(p, url)] or found
        elif len(found) > 1:
            found = [p for p in found if p.version in pins]
        if not found:
            raise BadInput(
                f"{self.lock.path}: uv export names {line!r}, which the lock does not hold; "
                "regenerate it with 'uv lock'"
            )
        return found

    def _local(self, path: str, line: str) -> LockPackage:
        """A workspace member or path source (``-e ./deps/x``, ``./wheels/x.whl``)."""
        want = _norm_path(path)
        for pkgs in self.by_name.values():
            for p in pkgs:
                kind, _, where = p.source.partition("=")
                if (
                    kind in ("editable", "virtual", "directory", "path")
                    and _norm_path(where) == want
                ):
                    return p
        raise BadInput(
            f"{self.lock.path}: uv export names {line!r}, a local package the lock does not "
            "hold; regenerate it with 'uv lock'"
        )


#: ``name==version``, how uv export prints a package from an index (its normalised name
#: and version): read by this, ~40x faster than ``Requirement``; any other line by packaging
_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==(?P<pin>[0-9][0-9a-z.+!]*)"
)


def _requirement(line: str, where: Path) -> tuple[str, str | None, tuple[str, ...]]:
    """The name, URL and exact pins of one export line (``==``/``===`` versions)."""
    if pin := _PIN.fullmatch(line):
        return pin["name"], None, (pin["pin"],)
    return answers.remembered("requirement", (line,), lambda: _parsed(line, where))


def _parsed(line: str, where: Path) -> tuple[str, str | None, tuple[str, ...]]:
    """:func:`_requirement` of a line that is not ``name==version``, by ``packaging``."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement as exc:
        raise BadInput(f"{where}: uv export printed {line!r} ({exc})") from exc
    pins = tuple(s.version for s in req.specifier if s.operator in ("==", "==="))
    return req.name, req.url, pins


def _source_in(pkg: LockPackage, url: str) -> bool:
    where = unquote(pkg.source.partition("=")[2]).split("#", 1)[0].split("?", 1)[0]
    return bool(where) and (where in url or any(w in url for w in pkg.wheels))


_LOCAL_KINDS = ("editable", "virtual", "directory", "path")


def _norm_path(path: str) -> str:
    return path.removeprefix("file://").rstrip("/").removeprefix("./") or "."


def _edges(
    installed: Mapping[PackageId, LockPackage], markers: _Markers, active: tuple[str, ...]
) -> dict[PackageId, tuple[PackageId, ...]]:
    """The lock's dependency edges between installed packages (base and optional
    dependencies) whose markers hold for the node (:func:`_holds_with`)."""
    by_name: dict[str, list[LockPackage]] = {}
    for p in installed.values():
        by_name.setdefault(p.name, []).append(p)
    edges: dict[PackageId, tuple[PackageId, ...]] = {}
    for pkg in installed.values():
        out: list[PackageId] = []
        for dep in (*pkg.deps, *(d for ds in pkg.optional.values() for d in ds)):
            if dep.marker and not markers.holds_with(dep.marker, active):
                continue
            out += [t.id for t in by_name.get(dep.name, ()) if _leads_to(dep, t)]
        edges[pkg.id] = tuple(dict.fromkeys(out))
    return edges


def _check_supported(lock: Lock, env: Mapping[str, str]) -> None:
    if lock.supported_markers and not any(
        _holds(m, env, lock.path) for m in lock.supported_markers
    ):
        raise NoCompatibleBuild(
            f"{lock.path}: this node ({env.get('platform_machine')} Linux, Python "
            f"{env.get('python_full_version')}) is outside the lock's supported environments "
            f"({'; '.join(lock.supported_markers)}); add it to [tool.uv] environments and "
            "run 'uv lock'"
        )


def _roots(lock: Lock) -> list[LockPackage]:
    """What ``uv sync`` installs from: the project, the workspace members."""
    root = lock.root()
    if root is not None:
        return [root]
    roots = [p for p in lock.packages if p.name in lock.members and p.local]
    if not roots:
        raise BadInput(
            f"{lock.path}: no project in this lock (no package with source '.'); "
            "audit the lock of a uv project, or a requirements file from 'uv pip compile'"
        )
    return roots


@dataclass(frozen=True, kw_only=True)
class _Chosen:
    """The roots' extras and groups the selection turns on, checked against conflicts."""

    active: tuple[ConflictItem, ...]
    how: Mapping[str, str]  # why an item is on ("enabled by default")
    groups: tuple[tuple[LockPackage, str], ...]
    extras: tuple[tuple[LockPackage, str], ...]
    groups_why: str


def _selection(lock: Lock, roots: list[LockPackage], project: Project, sel: Selection) -> _Chosen:
    active: list[ConflictItem] = []
    how: dict[str, str] = {}
    groups_all: list[tuple[LockPackage, str]] = []
    extras_all: list[tuple[LockPackage, str]] = []
    groups_why = ""
    for r in roots:
        active.append(ConflictItem(package=r.name))
        groups, groups_why = _selected_groups(r, project, sel)
        for e in _selected_extras(r, sel):
            active.append(ConflictItem(package=r.name, extra=e))
            extras_all.append((r, e))
        for g in groups:
            item = ConflictItem(package=r.name, group=g)
            active.append(item)
            if g not in sel.groups:
                how[item.encoded] = " (enabled by default)"
            groups_all.append((r, g))
    _check_conflicts(lock, active, how)
    return _Chosen(
        active=tuple(active),
        how=how,
        groups=tuple(groups_all),
        extras=tuple(extras_all),
        groups_why=groups_why,
    )


def _one_per_name(lock: Lock, installed: Mapping[PackageId, LockPackage]) -> dict[str, LockPackage]:
    by_name: dict[str, LockPackage] = {}
    for pkg in installed.values():
        other = by_name.get(pkg.name)
        if other is not None and other.id != pkg.id:
            raise BadInput(
                f"{lock.path}: {pkg.name} {other.version} and {pkg.version} would both be "
                "installed on this node; run 'uv lock' with a current uv"
            )
        by_name[pkg.name] = pkg
    return by_name


# --- wheels -----------------------------------------------------------------------------


def wheel_fits(filename: str, arch: str, python: str, glibc: str | None = None) -> bool:
    """Whether a wheel file can be installed on Linux ``arch`` with CPython ``python`` and
    glibc ``glibc`` (None: unknown, every manylinux tag admitted): the one rule of
    ``models.wheel_fit`` (packaging.tags; musllinux never fits). A Python that is not a
    version admits any CPython 3."""
    if wheel_fit.python_key(python) is None:
        return any(
            wheel_fit.wheel_fits(filename, python=f"3.{m}", arch=arch, glibc=glibc)
            for m in range(6, 16)
        )
    return wheel_fit.wheel_fits(filename, python=python, arch=arch, glibc=glibc)


# --- Python -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PythonChoice:
    version: str  # "3.12" or "3.12.3"
    why: str  # one sentence: which Python and why


__all__ = [
    "DEFAULT_SELECTION",
    "ConflictItem",
    "Lock",
    "LockDep",
    "LockPackage",
    "Project",
    "PythonChoice",
    "Resolved",
    "Selection",
    "admits",
    "export",
    "lowest_admitted",
    "python_pin_of",
    "read_lock",
    "read_project",
    "resolve",
    "wheel_fits",
]
