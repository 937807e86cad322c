"""The project's torch, asked of the one torch decision (``decide/torch_choice.py``).

This module is the one place outside ``decide/`` that asks for a torch build: ``audit``
(a fix it offers), ``plan``/``lock``/``build --project`` (the project's torch on the node:
``version_for``, ``plan_for_version``, ``file_variant``; the release a file that names its
build installs, ``variant_release``) and ``resolve`` (``choice_for``).
Each turns the project's or the user's wish (a pin, a range, the variant its file names:
conda's ``cudatoolkit=11.3``, the index base) into a ``TorchWish`` and the answer into
what the caller needs: a plan made for the project's torch, the requirement line
(``target_requirement``, spelled once in ``tools/uv.torch_requirement``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.decide.companions import Companions
from hpcenv.decide.torch_choice import (
    TorchWish,
    choose_torch,
    newest_with_variant,
    pair_of,
    runs_on,
)
from hpcenv.decide.torch_variant import assess
from hpcenv.models import DEFAULT_INDEX_URL
from hpcenv.models.facts import Facts
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.tools import uv
from hpcenv.utils.errors import BadInput, BuildFailed, NoCompatibleBuild

if TYPE_CHECKING:  # imported where used: an audit of a uv.lock needs no file reader, and
    # its fix no requirement or specifier of packaging's (a lock audited again: utils/answers)
    from packaging.requirements import Requirement

    from hpcenv.knowledge.lookup import Lookup
    from hpcenv.models.plan import Plan
    from hpcenv.project import readers

#: Packages published per torch variant with the variant as local label.
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


def torch_line(request: readers.Request) -> Requirement | None:
    """The project's torch requirement (its first ``torch`` line), if it has one."""
    from packaging.requirements import InvalidRequirement, Requirement

    from hpcenv.utils.names import canonicalize_name

    for line in request.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch":
            return req
    return None


def choice_for(
    facts: Facts,
    spec: str,
    *,
    pin: str = "auto",
    index_base: str = DEFAULT_INDEX_URL,
    lookup: Lookup | None = None,
) -> TorchChoice:
    """The torch build for ``spec`` on the node (``resolve``; ``audit``'s fix): the choice,
    with ``backend=None`` and the error when nothing runs."""
    wish = TorchWish(spec=spec, pin=pin, index_base=index_base)
    return choose_torch(facts, wish, lookup=lookup).choice


def version_for(
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
        return planned, (
            f"the project names no torch itself (its dependencies may pull one): profile "
            f"{plan.profile}'s torch"
        )
    text = str(spec.specifier)
    from hpcenv.project import readers

    version = readers.exact_release(spec.specifier)
    if version is not None:
        return version, f"the project pins torch{text}: the node's build of {version}"
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        wanted = SpecifierSet(text) if text else SpecifierSet()
    except InvalidSpecifier as exc:
        raise BadInput(f"torch{text}: not a version range ({exc})") from exc
    if planned and wanted.contains(planned, prereleases=True):
        why = f"the project asks for torch{text or ' (any)'}: profile {plan.profile}'s {planned}"
        return planned, why
    if facts.arch is None and plan.arch:
        facts = dataclasses.replace(facts, arch=plan.arch)
    try:
        wish = TorchWish(spec=text or ">=0", pin=plan.torch.pin)
        choice = choose_torch(facts, wish).require()
    except (BadInput, NoCompatibleBuild) as exc:
        if isinstance(exc, NoCompatibleBuild):
            raise NoCompatibleBuild(f"the project asks for torch{text}: {exc}") from exc
        raise BadInput(f"the project asks for torch{text}: {exc}") from exc
    return str(choice.version), f"the newest torch{text} with a build that runs here"


def variant_release(request: readers.Request, arch: str) -> str | None:
    """The torch release a file that names its build installs (conda's ``pytorch>=1.13``
    beside ``pytorch-cuda=11.7``): the newest of its range that published that build for
    ``arch`` (the knowledge data), as conda resolves it; None when the file names no build.
    No such release is ``NoCompatibleBuild`` (exit 3) naming the file's choice."""
    torch = torch_line(request)
    if not request.variant or torch is None:
        return None
    from packaging.specifiers import SpecifierSet

    from hpcenv.project import readers

    exact = readers.exact_release(torch.specifier)
    wanted = SpecifierSet(f"=={exact}") if exact else torch.specifier
    version = newest_with_variant(wanted, request.variant, arch)
    if version is None:
        release = knowledge.load().release_of(exact) if exact else None
        plat = release.platforms.get(arch) if release else None
        has = f" (it has {', '.join(plat.variants)})" if plat else ""
        raise NoCompatibleBuild(
            f"{request.source}: no torch{wanted or ' release'} published a "
            f"{request.variant} build for {arch}{has} ({request.variant_why}; hpcenv's torch "
            "data); fix: name a variant that release published for this CPU arch"
        )
    return version


def release_for(hand: readers.Request, plan: Plan, facts: Facts) -> tuple[str, str]:
    """(torch release, why) a project without a lock gets on this node: the one answer of
    ``plan``/``lock``/``build --project`` (``install_set.project_torch``, the build's check
    before any venv, and ``install_set.handwritten_set``). A file that names its build
    (conda's ``pytorch-cuda=11.7``) gets the newest release of its range that published
    that build (``variant_release``); any other file ``version_for``."""
    spec = torch_line(hand)
    import platform  # only here: an audit asked again imports no more than it reads

    if held := variant_release(hand, plan.arch or facts.arch or platform.machine()):
        return held, f"the project asks for torch{spec.specifier if spec else ''}"
    return version_for(spec, plan, facts, hand.project_file)


def plan_for_version(plan: Plan, version: str, facts: Facts, pin: str | None = None) -> Plan:
    """``plan`` with its torch choice made for torch ``version`` (the project's) on ``facts``.

    The plan's variant was chosen for the plan's torch version; another release may not
    publish it or may not carry this node's GPU code, so the variant is resolved again for
    ``version`` with the profile's pin (or ``pin``, the variant the project's own file
    asks for: conda's ``cudatoolkit=11.3``) and index base. The plan's wheelhouse torch is
    for the plan's version, so it is dropped. Raises ``NoCompatibleBuild`` (exit 3) when
    hpcenv knows no build of ``version`` that this node can run.
    """
    pin = pin or plan.torch.pin
    if plan.torch.version == version and pin in (plan.torch.pin, plan.torch.backend):
        return plan
    if facts.arch is None and plan.arch:
        facts = dataclasses.replace(facts, arch=plan.arch)
    try:
        wish = TorchWish(spec=f"=={version}", pin=pin, index_base=plan.torch.index_base)
        choice = choose_torch(facts, wish).require()
    except (BadInput, NoCompatibleBuild) as exc:
        raise NoCompatibleBuild(
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
    for_version = dataclasses.replace(plan.torch, version=version)
    line = uv.torch_requirement(dataclasses.replace(plan, torch=for_version, torch_wheel=None))
    assert line is not None  # a version is set
    return line  # the one spelling of the torch line: tools/uv.torch_requirement


def pair_for(plan: Plan, version: str) -> Companions:
    """torchvision/torchaudio of torch ``version``'s release pair, for the variant of the
    torch line the set installs (``target_requirement``: ``plan`` made for ``version``)."""
    line = target_requirement(plan, version)
    pinned = uv.wheel_version(line) if line.endswith(".whl") else line.split("==", 1)[-1]
    try:
        label = Version(pinned).local
    except InvalidVersion:
        label = None
    return pair_of(version, label)


def companion_line(pair: Companions, name: str) -> str | None:
    """``torchvision==0.24.1+cu126``: ``name`` of ``pair``, with torch's label (None: none
    is published for that torch, ``pair.reason_of(name)``)."""
    version = pair.version_of(name)
    if version is None:
        return None
    return f"{name}=={version}+{pair.label}" if pair.label else f"{name}=={version}"


def file_variant(
    hand: readers.Request, version: str, facts: Facts, why: str
) -> tuple[str | None, str]:
    """The variant a file names (conda's ``cudatoolkit=11.3``) when it runs on the node,
    as audit judges it (``assess``); else the node's build, the way a lock's ``+cu128``
    that cannot run here is replaced. (pin or None, why)."""
    if not hand.variant:
        return None, why
    if facts.nvidia is not None and facts.gpus and not assess(facts, version, hand.variant).runs:
        return None, (
            f"{why}; {hand.variant_why}, but that {hand.variant} build cannot run on this node: "
            "the node's build instead"
        )
    return hand.variant, f"{why}; {hand.variant_why}: its {hand.variant} build"


__all__ = [
    "TORCH_FAMILY",
    "choice_for",
    "companion_line",
    "file_variant",
    "pair_for",
    "plan_for_version",
    "release_for",
    "runs_on",
    "target_requirement",
    "torch_line",
    "variant_release",
    "version_for",
]
