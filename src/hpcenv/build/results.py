"""What the build's steps hand on, typed: up to the command that prints them, and into the
build report (``builder.BuildReport``), which writes JSON only at the edge (``serialize``,
for the report file, the build's marker and ``build --json``).

Each ``serialize()`` writes exactly the JSON the build wrote before these types existed
(key order included): the report's JSON is a contract (docs/design.md, the tests that read
it). The one result read back from disk, the build's marker, is parsed at the read
(:meth:`BuildMarker.parse`), with one line naming the file and key when it is not hpcenv's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpcenv.utils.errors import BadInput

if TYPE_CHECKING:
    from hpcenv.binaries.cudalibs import LinkCheck
    from hpcenv.project.install_set import Change


@dataclass(frozen=True, kw_only=True)
class FactsSummary:
    """The facts a lock or build depends on (a lock's header, a build's report)."""

    hostname: str | None
    arch: str | None
    glibc: str | None
    driver: str | None
    compute_capabilities: tuple[str, ...]
    source: str | None

    def serialize(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "arch": self.arch,
            "glibc": self.glibc,
            "driver": self.driver,
            "compute_capabilities": list(self.compute_capabilities),
            "source": self.source,
        }


@dataclass(frozen=True, kw_only=True)
class LockInputs:
    """Everything a lock's resolution depends on, and nothing else (its inputs digest)."""

    requirements: tuple[str, ...]
    sources: tuple[str, ...]
    python_version: str
    python_platform: str

    def serialize(self) -> dict[str, Any]:
        return {
            "requirements": list(self.requirements),
            "sources": list(self.sources),
            "python_version": self.python_version,
            "python_platform": self.python_platform,
        }


@dataclass(frozen=True, kw_only=True)
class TorchSource:
    """The torch a build installs: the plan's version and variant, and where it comes from
    (the wheelhouse file or the index)."""

    version: str | None
    backend: str | None
    source: str  # "from" in the JSON

    def serialize(self) -> dict[str, Any]:
        return {"version": self.version, "backend": self.backend, "from": self.source}


@dataclass(frozen=True, kw_only=True)
class LockUsed:
    """The lock a build installed and what was done with it (kept, or compiled and why)."""

    path: str
    action: str

    def serialize(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action}


@dataclass(frozen=True, kw_only=True)
class NoIsolation:
    """Packages whose setup.py imports torch, built against the venv's torch without build
    isolation (``torch_first``): the torch they were built against, the build requirements
    installed for them, and the source that says why, per package."""

    packages: tuple[str, ...]
    torch: str
    build_requires: tuple[str, ...]
    why: Mapping[str, str]

    def serialize(self) -> dict[str, Any]:
        return {
            "packages": list(self.packages),
            "torch": self.torch,
            "build_requires": list(self.build_requires),
            "why": dict(self.why),
        }


@dataclass(frozen=True, kw_only=True)
class FlashAttnBuilt:
    """A flash-attn wheel built from source (or taken from the wheel cache) and installed."""

    wheel: str  # "from" in the JSON: the cached wheel's path
    hit: bool  # taken from the cache (else built now)
    key: Mapping[str, str]  # what the cache entry's digest covers
    build_env: Mapping[str, str]
    seconds: float

    def serialize(self) -> dict[str, Any]:
        return {
            "from": self.wheel,
            "cache": "hit" if self.hit else "built",
            "key": dict(self.key),
            "build_env": dict(self.build_env),
            "seconds": self.seconds,
        }


#: Why the plan's flash-attn step is skipped when the project installs flash-attn itself.
BY_PROJECT = "the project installs flash-attn"


@dataclass(frozen=True, kw_only=True)
class FlashAttnOutcome:
    """What the build's flash-attn step did: the plan's action, and the wheel installed
    (``wheel``, a prebuilt wheel's URL) or built (``built``); ``by_project``: the step was
    skipped because the project installs flash-attn (no plan version then)."""

    action: str  # "wheel" | "build" | "skip"
    reason: str
    version: str | None = None
    wheel: str | None = None
    built: FlashAttnBuilt | None = None
    by_project: bool = False

    @classmethod
    def left_to_project(cls) -> FlashAttnOutcome:
        return cls(action="skip", reason=BY_PROJECT, by_project=True)

    def serialize(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "reason": self.reason}
        if self.by_project:
            return out
        out["version"] = self.version
        if self.wheel is not None:
            out["from"] = self.wheel
        if self.built is not None:
            out.update(self.built.serialize())
        return out


@dataclass(frozen=True, kw_only=True)
class InstalledDist:
    """A distribution installed in a venv, read from its metadata: its version, the
    distributions it requires (markers evaluated for the venv's Python) and whether it was
    installed from a directory (PEP 610: the project itself, or one of its local packages)."""

    version: str
    requires: tuple[str, ...] = ()
    local: bool = False
    optional: tuple[str, ...] = ()  # required under one of its extras only (``with-cuda``)


@dataclass(frozen=True, kw_only=True)
class ProjectInstall:
    """What installing a project with the node's torch did (``swap.sync_and_swap``): the
    project's Python and why, torch before and after, what changed in its set and why,
    what was built without isolation, the CUDA stack check and the distributions the
    build's import check must import."""

    project: str
    selection: str
    python: str
    python_why: str
    torch_before: str
    variant: str | None
    warnings: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()  # project/install_set.Change: each change and why
    copy_skipped: tuple[str, ...] = ()  # what the copy of the project's tree left out
    no_build_isolation: NoIsolation | None = None
    installed_from_copy: tuple[str, ...] | None = None  # None: nothing installed from a copy
    torch_after: str | None = None
    swapped: bool = False
    libraries: LinkCheck | None = None  # None: no CUDA variant, nothing checked
    checked: tuple[str, ...] = ()
    flash_attn_from_project: bool = False

    def serialize(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "project": self.project,
            "selection": self.selection,
            "python": self.python,
            "python_why": self.python_why,
            "torch_before": self.torch_before,
            "variant": self.variant,
            "warnings": list(self.warnings),
            "changes": [
                {"name": c.name, "before": c.before, "after": c.after, "why": c.why}
                for c in self.changes
            ],
            "copy_skipped": list(self.copy_skipped),
            "no_build_isolation": (
                self.no_build_isolation.serialize() if self.no_build_isolation else None
            ),
        }
        if self.installed_from_copy is not None:
            out["installed_from_copy"] = list(self.installed_from_copy)
        out["torch_after"] = self.torch_after
        out["swapped"] = self.swapped
        if self.libraries is not None:
            out["libraries"] = self.libraries.to_json()
        out["checked"] = list(self.checked)
        out["flash_attn_from_project"] = self.flash_attn_from_project
        return out


_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True, kw_only=True)
class BuildMarker:
    """A complete build's marker (``.hpcenv-build.json``, its report), as far as a later
    build reads it: the stamp it was built for and what it installed (name -> version)."""

    stamp: str
    installed: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Mapping[str, object], where: str) -> BuildMarker:
        """The marker from its JSON object; BadInput naming ``where`` and the key when a
        value is not what hpcenv writes."""
        stamp = data.get("stamp")
        if not isinstance(stamp, str):
            raise _not_ours(where, "'stamp' must be a string", _kind(data, "stamp"))
        installed = data.get("installed", {})
        if not isinstance(installed, dict):
            got = _kind(data, "installed")
            raise _not_ours(where, "'installed' must be an object of name: version", got)
        for name, version in installed.items():
            if not isinstance(version, str):
                got = f"{name!r} is {_kind(installed, name)}"
                raise _not_ours(where, "'installed' must map names to version strings", got)
        return cls(stamp=stamp, installed=installed)


def _kind(data: Mapping[str, object], key: str) -> str:
    """What ``data[key]`` is, in JSON's words ("missing" when absent)."""
    return f"a JSON {_JSON_TYPE.get(type(data[key]), 'value')}" if key in data else "missing"


def _not_ours(where: str, rule: str, got: str) -> BadInput:
    return BadInput(
        f"{where}: {rule}, not {got}: not a build marker hpcenv wrote "
        "(build again with --force, which replaces the build)"
    )
