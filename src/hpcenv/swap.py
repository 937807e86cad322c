"""Swap torch's variant inside an existing project's environment, durably and copy-free.

A training codebase (open-instruct, say) brings its own ``pyproject.toml`` and
``uv.lock``, and that lock may send a GH200 node to a cu130 torch its 565 driver
cannot run. ``sync_and_swap``:

1. ``uv sync --frozen`` of the project into the new build directory
   (``UV_PROJECT_ENVIRONMENT``): the project's lock as it is; its files are never
   written (no ``.venv`` in it, no lock update);
2. replaces torch by the *same version* (``torch==2.9.1+cu126`` from the variant
   index, or the wheelhouse file), because packages compiled against torch (vLLM,
   flash-attn) are built for that version. The variant is the plan's when the project
   locks the plan's torch version; otherwise it is resolved afresh for the project's
   version on this node (``plan_for_version``): variants differ between releases
   (cu128 carries sm_70 in torch 2.9.1 but not in 2.11), so the plan's pick for its
   own version may not run at all with the project's;
3. uninstalls the CUDA runtime packages the old torch pulled that nothing needs any
   more (``nvidia-*-cu13`` after cu130 -> cu126), so two CUDA majors never mix;
4. imports every installed package that depends on torch, with the new torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hpcenv import fixes, import_check, uv
from hpcenv.errors import BadInput, BuildFailed, NoCompatibleBuild
from hpcenv.facts_model import Facts
from hpcenv.plan_model import Plan
from hpcenv.resolve import DEFAULT_INDEX_URL, resolve_torch

PROJECT_FILES = ("pyproject.toml", "uv.lock", ".python-version")


def project_digest(project: Path) -> str:
    """Hash of the project's dependency files (part of the build stamp)."""
    h = hashlib.sha256()
    for name in PROJECT_FILES:
        path = project / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def installed(venv: Path) -> dict[str, dict[str, Any]]:
    """``{name: {"version", "requires"}}`` of what is installed in ``venv``.

    Read from the venv's ``*.dist-info`` metadata in this process (the venv need not
    have ``packaging``); markers are evaluated for the venv's Python version.
    """
    site = fixes.site_packages(venv)
    py = site.parent.name.removeprefix("python")  # lib/python3.11/site-packages
    env = {"extra": "", "python_version": py, "python_full_version": f"{py}.0"}
    out: dict[str, dict[str, Any]] = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        reqs = set()
        for line in dist.requires or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate(env):
                reqs.add(canonicalize_name(req.name))
        out[canonicalize_name(dist.metadata["Name"])] = {
            "version": dist.version,
            "requires": sorted(reqs),
        }
    return out


def removable_runtimes(
    old_torch_requires: list[str], after: dict[str, dict[str, Any]]
) -> list[str]:
    """nvidia-* packages the old torch pulled that no remaining package requires."""
    candidates = {n for n in old_torch_requires if n.startswith("nvidia-") and n in after}
    while True:
        needed = {
            req
            for name, info in after.items()
            if name not in candidates
            for req in info["requires"]
        }
        keep = candidates & needed
        if not keep:
            return sorted(candidates)
        candidates -= keep


def _pinned(plan: Plan) -> str:
    """The profile's backend pin behind ``plan`` ('auto' when the resolver chose).

    The resolver records a pin as the reason "the profile pins the <backend> build".
    """
    backend = plan.torch.backend
    if backend and f"the profile pins the {backend} build" in plan.torch.reasons:
        return backend
    return "auto"


def _index_base(plan: Plan) -> str:
    """The index base the plan's variant URL was made from (``<base>/<backend>``)."""
    url, backend = plan.torch.index_url, plan.torch.backend
    if url and backend and url.rstrip("/").endswith(f"/{backend}"):
        return url.rstrip("/").removesuffix(f"/{backend}")
    return DEFAULT_INDEX_URL


def plan_for_version(plan: Plan, version: str, facts: Facts) -> Plan:
    """``plan`` with its torch choice made for torch ``version`` (the project's) on ``facts``.

    The plan's variant was chosen for the plan's torch version; another release may not
    publish it or may not carry this node's GPU code, so the variant is resolved again for
    ``version`` with the profile's pin (if any) and index base. The plan's wheelhouse torch
    is for the plan's version, so it is dropped. Raises ``BuildFailed`` when hpcenv knows
    no build of ``version`` that this node can run.
    """
    if plan.torch.version == version:
        return plan
    if facts.arch is None and plan.arch:
        facts = dataclasses.replace(facts, arch=plan.arch)
    try:
        choice = resolve_torch(
            facts, f"=={version}", pin=_pinned(plan), index_base=_index_base(plan)
        )
    except (BadInput, NoCompatibleBuild) as exc:
        raise BuildFailed(
            f"the project locks torch {version}, not the plan's {plan.torch.version}, "
            f"and no variant of {version} can be chosen for this node: {exc}"
        ) from exc
    return dataclasses.replace(plan, torch=choice, torch_wheel=None)


def target_requirement(plan: Plan, version: str) -> str:
    """torch of ``version``'s release from the planned variant (``plan`` already made for
    ``version`` by :func:`plan_for_version`)."""
    if plan.torch_wheel and Version(uv.wheel_version(plan.torch_wheel)).public == version:
        return str(plan.torch_wheel)
    if not plan.torch.backend:
        raise BuildFailed(f"profile {plan.profile}: no torch variant planned")
    return f"torch=={version}+{plan.torch.backend}"


def sync_and_swap(
    project: Path,
    venv: Path,
    plan: Plan,
    *,
    log: IO[str] | None,
    facts: Facts | None = None,
) -> dict[str, Any]:
    """Sync ``project`` into ``venv`` and swap its torch (see the module docstring).

    ``facts`` describe the node the build is for; they are needed only when the project
    locks another torch version than the plan's, and default to this host's.
    """
    if not (project / "uv.lock").is_file():
        raise BadInput(
            f"{project}: no uv.lock; run 'uv lock' in the project first "
            "(hpcenv never writes a project's files)"
        )
    uv.project_sync(project, venv, log=log)
    before = installed(venv)
    if "torch" not in before:
        raise BadInput(f"{project}: the project does not install torch; nothing to swap")
    old = before["torch"]["version"]
    try:
        base = Version(old).public
    except InvalidVersion as exc:
        raise BuildFailed(f"{project}: torch version {old!r} is not a version") from exc
    result: dict[str, Any] = {"project": str(project), "torch_before": old, "warnings": []}
    if plan.torch.version and plan.torch.version != base:
        if facts is None:
            from hpcenv.facts import collect

            facts = collect(network=False)
        planned = f"{plan.torch.version} ({plan.torch.backend})"
        plan = plan_for_version(plan, base, facts)
        result["warnings"].append(
            f"the project locks torch {base}, the plan chose {planned}: keeping {base} "
            f"(packages compiled against torch are built for it) from the "
            f"{plan.torch.backend} variant resolved for {base} on this node"
        )
        result["warnings"] += list(plan.torch.warnings)
    result["variant"] = plan.torch.backend
    want = f"{base}+{plan.torch.backend}" if plan.torch.backend else base
    if old == want:
        result.update(torch_after=old, swapped=False, removed=[])
    else:
        req = target_requirement(plan, base)
        uv.install(venv, [req], plan=plan, extra=["--reinstall-package", "torch"], log=log)
        after = installed(venv)
        removed = removable_runtimes(before["torch"]["requires"], after)
        if removed:
            uv.uninstall(venv, removed, log=log)
            for name in removed:
                after.pop(name, None)
        result.update(
            torch_after=after["torch"]["version"], swapped=True, removed=removed, source=req
        )
        before = after
    dependents = sorted(n for n, info in before.items() if "torch" in info["requires"])
    result["checked"] = dependents
    result["imports"] = dict(import_check.check(venv, dependents, log=log).imports)
    return result
