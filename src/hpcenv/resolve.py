"""Choose the torch build (variant) this node can really run, and say why.

uv's ``--torch-backend auto`` and light-the-torch look at the driver only. A wheel that
imports fine can still fail at the first kernel ("no kernel image is available") when
it carries no machine code (SASS) for the GPU, and a cu130 wheel cannot start CUDA on
a 565 driver at all. So a variant qualifies here only when

1. the chosen torch release publishes it for the node's CPU arch (aarch64 differs),
2. it carries SASS for *every* GPU on the node (SASS for X.Y also runs on X.Z, Z >= Y,
   the CUDA binary-compatibility rule; PTX of a lower arch counts only when the driver
   runs the toolkit outright, because an older driver cannot JIT newer PTX), and
3. the driver runs its CUDA version outright (driver >= the toolkit's GA minimum), or,
   failing any such variant, under minor-version compatibility (same major, driver >=
   the major's minimum) - with a warning saying what that does not cover.

Among qualifying variants the newest outright-supported one wins; in the fallback, the
one nearest above the driver's CUDA. All numbers come from ``hpcenv.knowledge``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.errors import BadInput, NoCompatibleBuild
from hpcenv.facts_model import Facts, Gpu
from hpcenv.knowledge import ArchSet, Knowledge, cap_key, cuda_key, driver_key, variant_cuda
from hpcenv.plan_model import DEFAULT_INDEX_URL, TorchChoice

INDEX_ENV = "HPCENV_TORCH_INDEX_URL"


def index_base(profile_base: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Base of the PyTorch index: $HPCENV_TORCH_INDEX_URL > profile torch.index_url > default."""
    env = os.environ if environ is None else environ
    return (env.get(INDEX_ENV) or profile_base or DEFAULT_INDEX_URL).rstrip("/")


def index_url(base: str, variant: str) -> str:
    return f"{base.rstrip('/')}/{variant}"


# --- picking the torch version ----------------------------------------------------------


def parse_spec(spec: str) -> SpecifierSet:
    """A torch SPEC: ``==2.9.1``, ``>=2.9,<2.11``, ``torch==2.9.1`` or a bare ``2.9.1``."""
    text = spec.strip()
    if text.lower().startswith("torch"):
        text = text[5:].strip()
    if not text:
        raise BadInput(f"torch spec {spec!r} is empty; write e.g. '==2.9.1' or '>=2.9,<2.11'")
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


def pick_version(spec: str, know: Knowledge | None = None) -> str:
    """The highest torch release hpcenv knows that satisfies ``spec`` (BadInput if none)."""
    know = know or knowledge.load()
    wanted = parse_spec(spec)
    known = know.known_versions()
    matches = sorted(wanted.filter(known), key=Version)
    if not matches:
        raise BadInput(
            f"torch spec {spec!r} matches no torch release hpcenv knows "
            f"({', '.join(known)}); pick one of these, or add the release with its "
            "variants to src/hpcenv/knowledge/torch.toml"
        )
    return str(matches[-1])


# --- judging one variant ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """Whether one variant of one torch release can run on one node, and why (not)."""

    variant: str
    cuda: str | None  # "12.6"; None for cpu
    min_driver: str | None  # GA minimum driver of that toolkit
    outright: bool  # driver >= min_driver
    minor_compat: bool  # not outright, but same-major minor-version compatibility holds
    major_min_driver: str | None
    archs: ArchSet | None
    missing: tuple[str, ...]  # compute capabilities the variant has no code for
    covered_by: tuple[str, ...]  # per distinct cap: how it is covered ("sm_90", "PTX 12.0")

    @property
    def arch_ok(self) -> bool:
        return self.archs is not None and not self.missing

    @property
    def runs(self) -> bool:
        return self.arch_ok and (self.outright or self.minor_compat)


def _covers(archs: ArchSet, cap: str, *, ptx_usable: bool) -> str | None:
    """How ``archs`` runs on a GPU of ``cap``: 'sm_XY' (SASS), 'PTX X.Y', or None."""
    major, minor = cap_key(cap)
    same_major = [s for s in archs.sass if cap_key(s)[0] == major and cap_key(s)[1] <= minor]
    if same_major:
        best = max(same_major, key=cap_key)
        return "sm_" + best.replace(".", "")
    if ptx_usable:
        lower = [p for p in archs.ptx if cap_key(p) <= (major, minor)]
        if lower:
            return "PTX " + max(lower, key=cap_key)
    return None


def assess(facts: Facts, version: str, variant: str, know: Knowledge | None = None) -> Assessment:
    """Judge ``variant`` of torch ``version`` against the node in ``facts``."""
    know = know or knowledge.load()
    cuda = variant_cuda(variant)
    release = know.release_of(version)
    minor = release.minor if release else ".".join(version.split(".")[:2])
    if cuda is None:
        return Assessment(
            variant=variant, cuda=None, min_driver=None, outright=True, minor_compat=False,
            major_min_driver=None, archs=None, missing=(), covered_by=(),
        )  # fmt: skip
    tk = know.toolkit(cuda)
    major = cuda_key(cuda)[0]
    mm = know.major_minimum(major)
    driver = _driver(facts)
    outright = bool(tk and driver is not None and driver >= driver_key(tk.min_driver))
    compat = bool(
        not outright and mm and driver is not None and driver >= driver_key(mm.min_driver)
    )
    archs = know.arch_set(variant, facts.arch or "", minor)
    caps = facts.compute_capabilities
    missing: list[str] = []
    covered: list[str] = []
    if archs is not None:
        for cap in caps:
            how = _covers(archs, cap, ptx_usable=outright)
            if how is None:
                missing.append(cap)
            else:
                covered.append(how)
    else:
        missing = list(caps)
    return Assessment(
        variant=variant,
        cuda=cuda,
        min_driver=tk.min_driver if tk else None,
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


# --- describing -------------------------------------------------------------------------


def describe_gpus(gpus: tuple[Gpu, ...]) -> str:
    """``4 x NVIDIA GH200 120GB (9.0)``, ``1 x Tesla V100 (7.0) + 1 x A100 (8.0)``."""
    if not gpus:
        return "no GPU"
    counts = Counter((g.name, g.compute_capability or "?") for g in gpus)
    return " + ".join(f"{n} x {name} ({cap})" for (name, cap), n in counts.items())


def _gpus_with_cap(gpus: tuple[Gpu, ...], cap: str) -> str:
    return describe_gpus(tuple(g for g in gpus if g.compute_capability == cap)).rsplit(" (", 1)[0]


def driver_reason(driver: str, know: Knowledge | None = None, reported: str | None = None) -> str:
    """``driver 565.57.01 runs CUDA <= 12.6 builds outright (12.8 needs >= 570.26)``."""
    know = know or knowledge.load()
    best = know.max_cuda_outright(driver)
    newer = [
        t for t in know.toolkits if best is None or cuda_key(t.version) > cuda_key(best.version)
    ]
    said = f"; nvidia-smi reports CUDA {reported}" if reported else ""
    if best is None:
        first = know.toolkits[0]
        return (
            f"driver {driver} is older than every CUDA toolkit hpcenv knows "
            f"({first.version} needs >= {first.min_driver}){said}"
        )
    tail = f" ({newer[0].version} needs >= {newer[0].min_driver})" if newer else ""
    return f"driver {driver} runs CUDA <= {best.version} builds outright{tail}{said}"


def _why_not(a: Assessment, facts: Facts) -> str:
    """One short clause: why variant ``a`` does not run here."""
    parts = []
    if a.archs is None:
        parts.append(f"hpcenv has no GPU-arch list for {a.variant} on {facts.arch}")
    elif a.missing:
        miss = ", ".join(
            f"sm_{c.replace('.', '')} ({_gpus_with_cap(facts.gpus, c)})" for c in a.missing
        )
        parts.append(f"no {miss} (carries {' '.join(a.archs.sass)})")
    if not a.outright and not a.minor_compat:
        parts.append(f"CUDA {a.cuda} needs driver >= {a.min_driver or a.major_min_driver}")
    elif not a.outright:
        parts.append(
            f"CUDA {a.cuda} needs driver >= {a.min_driver} to run outright "
            "(only minor-version compatible here)"
        )
    return f"{a.variant}: " + " and ".join(parts)


def _compat_warning(a: Assessment, driver: str) -> str:
    major = cuda_key(a.cuda or "0.0")[0]
    return (
        f"{a.variant} runs on driver {driver} only under CUDA minor-version compatibility "
        f"({major}.x builds on drivers >= {a.major_min_driver}): the kernels compiled into the "
        "wheel work, but PTX cannot be JIT-compiled and calls that need a newer driver fail "
        f"with cudaErrorCallRequiresNewerDriver; update the driver to >= {a.min_driver} for "
        "full support"
    )


# --- choosing ---------------------------------------------------------------------------


def _cuda_order(v: str) -> tuple[int, int]:
    return cuda_key(variant_cuda(v) or "0.0")


def _auto(
    facts: Facts, version: str, know: Knowledge
) -> tuple[Assessment | None, list[Assessment]]:
    """(chosen, all assessed CUDA variants newest first) under the auto rules."""
    release = know.release_of(version)
    if release is None or facts.arch not in release.platforms:
        return None, []
    plat = release.platforms[facts.arch]
    cands = sorted((v for v in plat.variants if v != "cpu"), key=_cuda_order, reverse=True)
    assessed = [assess(facts, version, v, know) for v in cands]
    outright = [a for a in assessed if a.arch_ok and a.outright]
    if outright:
        return outright[0], assessed
    compat = [a for a in assessed if a.arch_ok and a.minor_compat]
    if compat:
        return compat[-1], assessed  # nearest above the driver's CUDA: the lowest one
    return None, assessed


def _fixes(facts: Facts, version: str, assessed: list[Assessment], know: Knowledge) -> list[str]:
    fixes = []
    arch_ok = [a for a in assessed if a.arch_ok and a.min_driver]
    if arch_ok:
        low = min(arch_ok, key=lambda a: driver_key(a.min_driver or "0"))
        fixes.append(f"update the driver to >= {low.min_driver} (runs {low.variant})")
    for other in reversed(know.known_versions()):
        if other == version:
            continue
        chosen, _ = _auto(facts, other, know)
        if chosen is not None:
            fixes.append(f"use torch {other} (its {chosen.variant} runs here)")
            break
    beyond = [a for a in arch_ok if not a.minor_compat and not a.outright]
    if beyond:
        pick = min(beyond, key=lambda a: _cuda_order(a.variant))
        major, minor = cuda_key(pick.cuda or "0.0")
        fixes.append(
            f"install NVIDIA's cuda-compat-{major}-{minor} forward-compatibility package "
            f"(datacenter GPUs only) for {pick.variant}"
        )
    if not arch_ok:
        caps = ", ".join(facts.compute_capabilities)
        fixes.append(f"no {facts.arch} variant of torch {version} carries code for {caps}")
    fixes.append("pin the cpu build (--backend cpu / [torch] backend = 'cpu') to run without GPUs")
    return fixes


def _pypi_note(facts: Facts, version: str, chosen: str, know: Knowledge) -> str | None:
    release = know.release_of(version)
    if release is None or facts.arch not in release.platforms:
        return None
    pypi = release.platforms[facts.arch].pypi
    if pypi == chosen:
        return f"PyPI's {facts.arch} torch {version} is this same {chosen} build"
    if pypi == "cpu":
        what = "a CPU build"
    else:
        tk = know.toolkit(variant_cuda(pypi) or "")
        need = f", needs driver >= {tk.min_driver}" if tk else ""
        what = f"the {pypi} build (CUDA {variant_cuda(pypi)}{need})"
    return f"PyPI's {facts.arch} torch {version} is {what}; using the {chosen} index"


def _unconfirmed(facts: Facts, version: str, variant: str, know: Knowledge) -> list[str]:
    out = []
    release = know.release_of(version)
    if release and facts.arch in release.platforms and not release.platforms[facts.arch].confirmed:
        p = release.platforms[facts.arch]
        out.append(
            f"the {facts.arch} variant list of torch {release.minor} is unconfirmed ({p.source})"
        )
    a = know.arch_set(variant, facts.arch or "", release.minor if release else "")
    if a is not None and not a.confirmed:
        out.append(
            f"the GPU-arch list of {variant} for torch {release.minor if release else version} "
            f"on {facts.arch} is unconfirmed ({a.source})"
        )
    return out


def try_resolve_torch(
    facts: Facts, spec: str, *, pin: str = "auto", index_base: str = DEFAULT_INDEX_URL
) -> TorchChoice:
    """Like ``resolve_torch`` but a node nothing runs on gives ``backend=None, error=...``."""
    know = knowledge.load()
    version = pick_version(spec, know)
    release = know.release_of(version)
    assert release is not None
    if not facts.arch:
        raise BadInput(
            f"{facts.source or 'facts'}: 'arch' is unknown; record facts on the node "
            "('hpcenv facts --json') or set [platform] arch in the profile"
        )
    if facts.arch not in release.platforms:
        raise BadInput(
            f"torch {version} has no wheels for CPU arch {facts.arch!r} in hpcenv's data "
            f"(known: {', '.join(release.platforms)})"
        )
    plat = release.platforms[facts.arch]
    _driver(facts)  # a driver string that is not a version is bad input, named here
    base = index_base.rstrip("/")
    reasons: list[str] = [
        f"torch {version} is the newest release hpcenv knows that matches {spec.strip()!r}",
        f"torch {version} publishes {', '.join(plat.variants)} for {facts.arch}",
    ]
    warnings: list[str] = []
    gpus = facts.gpus
    nv = facts.nvidia
    unknown_caps = [g for g in gpus if not g.compute_capability]
    if unknown_caps:
        warnings.append(
            f"compute capability unknown for {describe_gpus(tuple(unknown_caps))}: "
            "their GPU architecture could not be checked"
        )

    if pin != "auto":
        if pin not in plat.variants:
            raise BadInput(
                f"torch backend pin {pin!r}: torch {version} publishes no {pin} build for "
                f"{facts.arch} (it has {', '.join(plat.variants)}); pick one of these or 'auto'"
            )
        reasons.append(f"the profile pins the {pin} build")
        chosen_pin = assess(facts, version, pin, know)
        if pin == "cpu":
            if gpus:
                warnings.append(
                    f"the cpu build is pinned but the node has {describe_gpus(gpus)}: "
                    "torch will not use them"
                )
        elif nv is None or not gpus:
            warnings.append(
                f"{pin} is pinned but these facts show no NVIDIA GPU: it imports, "
                "but only CPU tensors work here"
            )
        elif not chosen_pin.runs:
            auto, _ = _auto(facts, version, know)
            alt = f"; hpcenv would pick {auto.variant}" if auto else ""
            warnings.append(
                f"pinned {pin} cannot run on this node ({_why_not(chosen_pin, facts)}){alt}"
            )
        elif chosen_pin.minor_compat:
            warnings.append(_compat_warning(chosen_pin, nv.driver_version))
        if nv is not None and gpus:
            reasons.insert(0, driver_reason(nv.driver_version, know, nv.cuda_driver_version))
        warnings += _unconfirmed(facts, version, pin, know)
        return TorchChoice(
            version=version, backend=pin, index_url=index_url(base, pin),
            reasons=tuple(reasons), warnings=tuple(warnings), pin=pin, index_base=base,
        )  # fmt: skip

    if nv is None or not gpus:
        why = (
            "no NVIDIA driver in the facts"
            if nv is None
            else (f"driver {nv.driver_version} is loaded but no GPU is visible")
        )
        reasons.append(f"{why}: the cpu build")
        note = _pypi_note(facts, version, "cpu", know)
        if note and "same" not in note:
            reasons.append(note)
        return TorchChoice(
            version=version, backend="cpu", index_url=index_url(base, "cpu"),
            reasons=tuple(reasons), warnings=tuple(warnings), pin=pin, index_base=base,
        )  # fmt: skip

    driver = nv.driver_version
    reasons.insert(0, driver_reason(driver, know, nv.cuda_driver_version))
    chosen, assessed = _auto(facts, version, know)
    if chosen is None:
        why = "; ".join(_why_not(a, facts) for a in assessed)
        fixes = "; or ".join(_fixes(facts, version, assessed, know))
        error = (
            f"no torch {version} build for {facts.arch} runs on this node: driver {driver}, "
            f"GPUs {describe_gpus(gpus)} ({why}); fixes: {fixes}"
        )
        return TorchChoice(
            version=version, backend=None, index_url=None, reasons=tuple(reasons),
            warnings=tuple(warnings), error=error, pin=pin, index_base=base,
        )  # fmt: skip
    for a in assessed:
        if a is chosen:
            break
        reasons.append(f"not {_why_not(a, facts)}")
    caps = facts.compute_capabilities
    carried = ", ".join(
        f"{how} for the {_gpus_with_cap(gpus, cap)}"
        for cap, how in zip(caps, chosen.covered_by, strict=True)
    )
    if carried:
        reasons.append(f"{chosen.variant} carries {carried}")
    if chosen.outright:
        reasons.append(
            f"{chosen.variant} is the newest variant that runs: CUDA {chosen.cuda} needs "
            f"driver >= {chosen.min_driver}, this node has {driver}"
        )
    else:
        reasons.append(
            f"no variant runs outright; {chosen.variant} is the nearest above the driver's CUDA "
            "under minor-version compatibility"
        )
        warnings.append(_compat_warning(chosen, driver))
    note = _pypi_note(facts, version, chosen.variant, know)
    if note:
        reasons.append(note)
    warnings += _unconfirmed(facts, version, chosen.variant, know)
    return TorchChoice(
        version=version, backend=chosen.variant, index_url=index_url(base, chosen.variant),
        reasons=tuple(reasons), warnings=tuple(warnings), pin=pin, index_base=base,
    )  # fmt: skip


def resolve_torch(
    facts: Facts, spec: str, *, pin: str = "auto", index_base: str = DEFAULT_INDEX_URL
) -> TorchChoice:
    """The torch version, variant and index for ``facts`` (see the module docstring).

    Raises ``BadInput`` (exit 2) for a spec hpcenv cannot satisfy and
    ``NoCompatibleBuild`` (exit 3) when no variant can run, with one line naming the
    driver, the GPUs and the fixes.
    """
    choice = try_resolve_torch(facts, spec, pin=pin, index_base=index_base)
    if choice.error:
        raise NoCompatibleBuild(choice.error)
    return choice


__all__ = [
    "DEFAULT_INDEX_URL",
    "Assessment",
    "assess",
    "driver_reason",
    "index_base",
    "pick_version",
    "resolve_torch",
    "try_resolve_torch",
]
