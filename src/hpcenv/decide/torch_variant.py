"""Choose the torch build (release and variant) this node can really run: the decisions.

uv's ``--torch-backend auto`` and light-the-torch look at the driver only. A wheel that
imports fine can still fail at the first kernel ("no kernel image is available") when
it carries no machine code (SASS) for the GPU, and a cu130 wheel cannot start CUDA on
a 565 driver at all. So a variant qualifies here only when

1. the torch release publishes it for the node's CPU arch (aarch64 differs),
2. it carries code for *every* GPU on the node (``hpcenv.kit.coverage.covers``: SASS of
   the same major at or below the GPU's capability; PTX only when the driver runs the
   variant's toolkit outright, because an older driver cannot JIT newer PTX), and
3. the driver runs its CUDA version outright (driver >= the toolkit's GA minimum), or,
   failing any such variant, under minor-version compatibility (same major, driver >=
   the major's minimum), with a warning saying what that does not cover. A toolkit with
   no known minimum driver (CUDA 13.4, 13.5) never runs "outright".

Among qualifying variants the newest outright-supported one wins; in the fallback, the
one nearest above the driver's CUDA. A version range picks the newest release with a
qualifying variant and says which newer one matched but cannot run. A release the data
lacks is looked up (``knowledge.lookup``); its variants come only from a listing of that
release, never from a neighbour (offline, or where no index lists it: exit 3 with the fix).
Only the GPU code of a variant may be inferred from the nearest release whose wheel was
read, and that is said. When nothing runs, ``Fixes`` says what would: the newest release
that runs, the driver needed, NVIDIA's forward-compatibility package (data center GPUs).

This module decides (``decide`` -> ``Decision``, pure data, its types in ``torch_decision``);
``torch_variant_words`` words it.
``try_resolve_torch``/``resolve_torch`` do both; ``resolve_torch`` is the one place that
turns "no compatible build" into ``NoCompatibleBuild`` (exit 3).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.decide.torch_assessment import Assessment
from hpcenv.decide.torch_variant_words import REFRESH, describe_gpus, driver_reason, explain
from hpcenv.kit.coverage import covers
from hpcenv.knowledge import (
    Knowledge,
    PlatformVariants,
    cuda_key,
    driver_key,
    variant_cuda,
)
from hpcenv.knowledge.releases import ARCHES
from hpcenv.models import DEFAULT_INDEX_URL
from hpcenv.models.facts import Facts
from hpcenv.utils import answers
from hpcenv.utils.errors import BadInput, NoCompatibleBuild

if TYPE_CHECKING:  # types only: an audit's verdict needs neither the plan nor a lookup,
    # nor the decision's types (imported where a decision is made)
    from packaging.specifiers import SpecifierSet

    from hpcenv.decide.torch_decision import Candidate, Decision, Fixes
    from hpcenv.knowledge.lookup import Listed, Lookup
    from hpcenv.models.torch_choice import TorchChoice

INDEX_ENV = "HPCENV_TORCH_INDEX_URL"


def index_base(profile_base: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Base of the PyTorch index: $HPCENV_TORCH_INDEX_URL > profile torch.index_url > default."""
    env = os.environ if environ is None else environ
    return (env.get(INDEX_ENV) or profile_base or DEFAULT_INDEX_URL).rstrip("/")


def index_url(base: str, variant: str) -> str:
    return f"{base.rstrip('/')}/{variant}"


# --- the torch spec ---------------------------------------------------------------------


def parse_spec(spec: str) -> SpecifierSet:
    """A torch SPEC: ``==2.9.1``, ``>=2.9,<2.11``, ``torch==2.9.1`` or a bare ``2.9.1``."""
    text = spec.strip()
    if text.lower().startswith("torch"):
        text = text[5:].strip()
    if not text:
        raise BadInput(f"torch spec {spec!r} is empty; write e.g. '==2.9.1' or '>=2.9,<2.11'")
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        Version(text)
    except InvalidVersion:
        pass
    else:
        text = f"=={text}"
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise BadInput(
            f"torch spec {spec!r} is not a version specifier; write e.g. '==2.9.1' or '>=2.9,<2.11'"
        ) from exc


def pinned_version(wanted: SpecifierSet) -> str | None:
    """The one release an exact spec names (``==2.16.0`` -> 2.16.0, ``==2.16.*`` ->
    2.16.0), or None for a range."""
    specs = list(wanted)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    text = specs[0].version.removesuffix(".*")
    try:
        v = Version(text)
    except InvalidVersion:
        return None
    parts = [*v.release, 0, 0][:3] if len(v.release) < 3 else list(v.release)
    return ".".join(str(p) for p in parts)


def _no_release(spec: str, know: Knowledge, looked: str = "") -> str:
    known = know.known_versions()
    return (
        f"torch spec {spec.strip()!r} matches no torch release hpcenv knows "
        f"({known[0]} to {known[-1]}){looked}; {REFRESH}, or pin a release"
    )


# --- judging one variant ------------------------------------------------------------------


def assess(facts: Facts, version: str, variant: str, know: Knowledge | None = None) -> Assessment:
    """Judge ``variant`` of torch ``version`` against the node in ``facts``."""
    know = know or knowledge.load()
    cuda = variant_cuda(variant)
    if cuda is None:
        return Assessment(
            variant=variant, cuda=None, min_driver=None, outright=True, minor_compat=False,
            major_min_driver=None, archs=None, missing=(), covered_by=(),
        )  # fmt: skip
    tk = know.toolkit(cuda)
    min_driver = tk.min_driver if tk else None
    mm = know.major_minimum(cuda_key(cuda)[0])
    driver = _driver(facts)
    outright = bool(min_driver and driver is not None and driver >= driver_key(min_driver))
    compat = bool(
        not outright and mm and driver is not None and driver >= driver_key(mm.min_driver)
    )
    archs = know.arch_set(variant, facts.arch or "", version)
    missing: list[str] = []
    covered: list[str] = []
    for cap in facts.compute_capabilities:
        how = covers(cap, archs.sass, archs.ptx, ptx_jit=outright) if archs else None
        if how is None:
            missing.append(cap)
        else:
            covered.append(how)
    return Assessment(
        variant=variant,
        cuda=cuda,
        min_driver=min_driver,
        outright=outright,
        minor_compat=compat,
        major_min_driver=mm.min_driver if mm else None,
        archs=archs,
        missing=tuple(missing),
        covered_by=tuple(covered),
    )


def _driver(facts: Facts) -> Version | None:
    if facts.nvidia is None:
        return None
    text = facts.nvidia.driver_version
    try:
        return driver_key(text)
    except InvalidVersion as exc:
        where = facts.source or "facts"
        raise BadInput(
            f"{where}: nvidia.driver_version {text!r} is not a driver version like '565.57.01'"
        ) from exc


def _cuda_order(v: str) -> tuple[int, int]:
    return cuda_key(variant_cuda(v) or "0.0")


def auto_choice(
    facts: Facts, version: str, plat: PlatformVariants | None, know: Knowledge
) -> tuple[Assessment | None, tuple[Assessment, ...]]:
    """(chosen, every CUDA variant assessed, newest first) under the auto rules."""
    if plat is None:
        return None, ()
    cands = sorted((v for v in plat.variants if v != "cpu"), key=_cuda_order, reverse=True)
    assessed = tuple(assess(facts, version, v, know) for v in cands)
    outright = [a for a in assessed if a.arch_ok and a.outright]
    if outright:
        return outright[0], assessed
    compat = [a for a in assessed if a.arch_ok and a.minor_compat]
    if compat:
        return compat[-1], assessed  # nearest above the driver's CUDA: the lowest one
    return None, assessed


# --- which releases the spec names --------------------------------------------------------


def selected(spec: str, known: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(the release an exact ``spec`` pins (:func:`pinned_version`), the releases of
    ``known`` it matches, newest first): packaging's answer, kept for a lock's next audit
    (``utils/answers``). ``BadInput`` for a malformed spec (:func:`parse_spec`)."""

    def compute() -> tuple[str | None, tuple[str, ...]]:
        wanted = parse_spec(spec)
        return pinned_version(wanted), tuple(
            sorted(wanted.filter(known), key=Version, reverse=True)
        )

    return answers.remembered("torch_spec", (spec, known), compute)


def candidates(
    spec: str,
    chosen: tuple[str | None, tuple[str, ...]],
    arch: str,
    know: Knowledge,
    lookup: Lookup | None,
) -> list[Candidate]:
    """Releases matching ``spec`` (``chosen``: what :func:`selected` says of it), newest
    first (see the module docstring).

    A release the data lacks is looked up; its variants come only from a listing of that
    release (the PyTorch index, or a lead for exactly that release), never from a
    neighbour's row. Offline, or where nothing lists its variants: ``NoCompatibleBuild``.
    """
    from hpcenv.decide.torch_decision import Candidate

    known = know.known_versions()
    exact, matches = chosen
    if matches and (exact is None or exact in known):
        out = []
        for v in matches:
            release = know.release_of(v)
            assert release is not None
            out.append(Candidate(version=v, platform=release.platforms.get(arch), known=True))
        return out
    what = f"torch {exact}" if exact else f"torch spec {spec.strip()!r}"
    if lookup is None:
        raise NoCompatibleBuild(
            f"{what} is not in hpcenv's data and nothing was consulted (offline: resolve "
            f"--offline, plan and build never go online): look it up with 'hpcenv resolve' "
            f"without --offline, add it with 'hpcenv knowledge update', or pin a release "
            f"hpcenv knows ({known[0]} to {known[-1]})"
        )
    hint = {v for r in know.releases[-3:] for p in r.platforms.values() for v in p.variants}
    found = lookup(parse_spec(spec), known, sorted(hint))
    if found.releases:
        return _listed(found.releases, arch, know, lookup)
    if found.consulted:
        looked = f" and {' nor '.join(found.consulted)} lists none"
        raise NoCompatibleBuild(_no_release(spec, know, looked))
    raise NoCompatibleBuild(
        f"{what} is not in hpcenv's data and looking it up failed "
        f"({'; '.join(found.unreachable) or 'no source to ask'}): run where the PyTorch index "
        f"or PyPI is reachable, or pin a release hpcenv knows ({known[0]} to {known[-1]})"
    )


def _listed(
    releases: tuple[Listed, ...], arch: str, know: Knowledge, lookup: Lookup
) -> list[Candidate]:
    """Candidates for releases a lookup found: variants from the index's listing of that
    release (or a lead for exactly it); a release only PyPI lists has unknown variants."""
    from hpcenv.decide.torch_decision import Candidate

    out = []
    unknown = []
    for listed in releases:
        plat = know.torch.listed_lead(listed.version, arch)
        if arch in listed.variants:
            plat = PlatformVariants(
                variants=listed.variants[arch],
                pypi=None,
                pythons=(),
                source=listed.source,
                confirmed=True,
            )
        elif plat is None and not listed.variants:
            unknown.append(listed.version)
            continue
        out.append(
            Candidate(
                version=listed.version, platform=plat, known=False, learned_from=listed.source
            )
        )
    if not out:
        where = lookup.index_base or "no PyTorch index"
        raise NoCompatibleBuild(
            f"torch {', '.join(unknown)} is listed by PyPI but not in hpcenv's data, and the "
            f"PyTorch index ({where}) did not list it: which CUDA builds it publishes is "
            f"unknown, and hpcenv does not guess them from another release; run "
            f"'hpcenv knowledge update --index URL' where the index is reachable, or pin a "
            f"release hpcenv knows ({know.known_versions()[0]} to {know.known_versions()[-1]})"
        )
    return out


# --- deciding -------------------------------------------------------------------------------


def _nearest_with_arch(version: str, arch: str, know: Knowledge) -> str | None:
    """The known release nearest to ``version`` (a tie goes to the newer) with ``arch`` wheels."""
    known = [r.version for r in know.releases if arch in r.platforms]
    if not known:
        return None
    order = sorted({*known, version}, key=Version)
    at = order.index(version)
    return min(known, key=lambda v: (abs(order.index(v) - at), -order.index(v)))


def _fixes(facts: Facts, c: Candidate, assessed: tuple[Assessment, ...], know: Knowledge) -> Fixes:
    from hpcenv.decide.torch_decision import Fixes

    older = None
    for other in reversed(know.known_versions()):
        if other == c.version:
            continue
        release = know.release_of(other)
        assert release is not None
        chosen, _ = auto_choice(facts, other, release.platforms.get(facts.arch or ""), know)
        if chosen is not None:
            older = (other, chosen.variant)
            break
    arch_ok = [a for a in assessed if a.arch_ok]
    known_min = [a for a in arch_ok if a.min_driver]
    driver = None
    if known_min:
        low = min(known_min, key=lambda a: driver_key(a.min_driver or "0"))
        driver = (low.min_driver or "", low.variant)
    compat = refused = None
    beyond = [a for a in arch_ok if not a.minor_compat and not a.outright]
    if beyond:
        pick = min(beyond, key=lambda a: _cuda_order(a.variant))
        not_dc = sorted({g.name for g in facts.gpus if not know.forward_compat.covers(g.name)})
        if not_dc:
            refused = f"{', '.join(not_dc)} is not a data center GPU"
        else:
            major, minor = cuda_key(pick.cuda or "0.0")
            package = know.forward_compat.package.format(major=major, minor=minor)
            compat = (package, pick.variant)
    unknown = tuple(a.variant for a in assessed if a.archs is None)
    return Fixes(
        older=older, driver=driver, cuda_compat=compat, compat_refused=refused,
        no_code=not arch_ok and any(a.archs is not None for a in assessed), unknown_code=unknown,
    )  # fmt: skip


def decide(
    facts: Facts,
    spec: str,
    *,
    pin: str = "auto",
    index_base: str = DEFAULT_INDEX_URL,
    lookup: Lookup | None = None,
    know: Knowledge | None = None,
) -> Decision:
    """The torch release and variant for ``facts`` (see the module docstring).

    ``BadInput`` (exit 2) for a malformed spec, facts without a CPU arch or a pin the
    release does not publish; ``NoCompatibleBuild`` (exit 3) when the spec matches no
    release at all. A release with no build that runs is a ``Decision`` with
    ``chosen=None`` and its ``fixes``.
    """
    from hpcenv.decide.torch_decision import Blocked, Decision

    know = know or knowledge.load()
    picked = selected(spec, know.known_versions())
    if not facts.arch:
        raise BadInput(
            f"{facts.source or 'facts'}: 'arch' is unknown; record facts on the node "
            "('hpcenv facts --json') or set [platform] arch in the profile"
        )
    _driver(facts)  # a driver string that is not a version is bad input, named here
    arch = facts.arch
    cands = candidates(spec, picked, arch, know, lookup)
    with_arch = [c for c in cands if c.platform is not None]
    if not with_arch:
        top = cands[0]
        release = know.release_of(top.version)
        have = ", ".join(release.platforms) if release else "none known"
        if arch not in ARCHES:
            raise BadInput(
                f"torch {top.version} has no wheels for CPU arch {arch!r} in hpcenv's data "
                f"(known: {have})"
            )
        nearest = _nearest_with_arch(top.version, arch, know)
        fix = f": use torch {nearest}, the nearest release with {arch} wheels" if nearest else ""
        raise NoCompatibleBuild(
            f"torch {top.version} has no wheels for {arch} (PyPI and hpcenv's data have it "
            f"for {have}){fix}"
        )
    base = index_base.rstrip("/")
    newest = know.known_versions()[-1]

    def decision(**kw: Any) -> Decision:
        return Decision(spec=spec, newest_known=newest, pin=pin, index_base=base, **kw)

    nv = facts.nvidia
    gpus = facts.gpus
    if pin != "auto":
        c = next((c for c in with_arch if c.platform and pin in c.platform.variants), None)
        if c is None:
            top = with_arch[0]
            have = ", ".join(top.platform.variants) if top.platform else ""
            raise BadInput(
                f"torch backend pin {pin!r}: torch {top.version} publishes no {pin} build for "
                f"{arch} (it has {have}); pick one of these or 'auto'"
            )
        auto = None
        if nv is not None and gpus and pin != "cpu":
            auto, _ = auto_choice(facts, c.version, c.platform, know)
        return decision(
            candidate=c, mode="pin", assessed=(), chosen=assess(facts, c.version, pin, know),
            auto=auto,
        )  # fmt: skip
    if nv is None or not gpus:
        c = with_arch[0]
        return decision(
            candidate=c, mode="cpu", assessed=(), chosen=assess(facts, c.version, "cpu", know)
        )
    blocked: list[Blocked] = []
    for c in with_arch:
        chosen, assessed = auto_choice(facts, c.version, c.platform, know)
        if chosen is not None:
            return decision(
                candidate=c, mode="auto", assessed=assessed, chosen=chosen,
                blocked=tuple(blocked[:1]),
            )  # fmt: skip
        blocked.append(Blocked(version=c.version, assessed=assessed))
    top = with_arch[0]
    assessed = blocked[0].assessed
    return decision(
        candidate=top, mode="auto", assessed=assessed, chosen=None,
        fixes=_fixes(facts, top, assessed, know),
    )  # fmt: skip


def try_resolve_torch(
    facts: Facts,
    spec: str,
    *,
    pin: str = "auto",
    index_base: str = DEFAULT_INDEX_URL,
    lookup: Lookup | None = None,
) -> TorchChoice:
    """Like ``resolve_torch`` but a node nothing runs on gives ``backend=None, error=...``."""
    know = knowledge.load()
    decision = decide(facts, spec, pin=pin, index_base=index_base, lookup=lookup, know=know)
    return explain(decision, facts, know)


def resolve_torch(
    facts: Facts,
    spec: str,
    *,
    pin: str = "auto",
    index_base: str = DEFAULT_INDEX_URL,
    lookup: Lookup | None = None,
) -> TorchChoice:
    """The torch version, variant and index for ``facts`` (see the module docstring).

    Raises ``BadInput`` (exit 2) for a malformed spec and ``NoCompatibleBuild`` (exit 3)
    when no variant can run, with one line naming the driver, the GPUs and the fixes.
    """
    return raise_if_none(
        try_resolve_torch(facts, spec, pin=pin, index_base=index_base, lookup=lookup)
    )


def raise_if_none(choice: TorchChoice, where: str = "this node") -> TorchChoice:
    """The one place a choice without a build becomes ``NoCompatibleBuild`` (exit 3)."""
    if choice.error or not choice.backend:
        raise NoCompatibleBuild(choice.error or f"{where}: no torch build runs on this node")
    return choice


__all__ = [
    "DEFAULT_INDEX_URL",
    "Assessment",
    "assess",
    "decide",
    "describe_gpus",
    "driver_reason",
    "index_base",
    "raise_if_none",
    "resolve_torch",
    "try_resolve_torch",
]
