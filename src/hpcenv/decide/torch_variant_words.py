"""The resolver's decision in words: reasons, warnings and the one-line error.

``resolve.decide`` decides (pure data: each variant's assessment, the choice, the fixes);
``explain`` turns a ``resolve.Decision`` into the ``TorchChoice`` people and scripts read.
Nothing here decides anything, and nothing downstream parses these sentences back
(``TorchChoice.pin`` and ``.index_base`` carry the data).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcenv import knowledge
from hpcenv.knowledge import Knowledge, cuda_key
from hpcenv.models.facts import Facts, Gpu

if TYPE_CHECKING:
    from hpcenv.decide.torch_assessment import Assessment
    from hpcenv.decide.torch_decision import Candidate, Decision, Fixes
    from hpcenv.models.torch_choice import TorchChoice

REFRESH = "'hpcenv knowledge update' refreshes hpcenv's data"


def describe_gpus(gpus: tuple[Gpu, ...]) -> str:
    """``4 x NVIDIA GH200 120GB (9.0)``, ``1 x Tesla V100 (7.0) + 1 x A100 (8.0)``."""
    if not gpus:
        return "no GPU"
    counts = Counter((g.name, g.compute_capability or "?") for g in gpus)
    return " + ".join(f"{n} x {name} ({cap})" for (name, cap), n in counts.items())


def gpus_with_cap(gpus: tuple[Gpu, ...], cap: str) -> str:
    return describe_gpus(tuple(g for g in gpus if g.compute_capability == cap)).rsplit(" (", 1)[0]


def driver_reason(driver: str, know: Knowledge | None = None, reported: str | None = None) -> str:
    """``driver 565.57.01 runs CUDA <= 12.6 builds outright (12.8 needs >= 570.26)``."""
    know = know or knowledge.load()
    best = know.max_cuda_outright(driver)
    newer = [
        t
        for t in know.toolkits
        if t.min_driver and (best is None or cuda_key(t.version) > cuda_key(best.version))
    ]
    said = f"; nvidia-smi reports CUDA {reported}" if reported else ""
    if best is None:
        first = next(t for t in know.toolkits if t.min_driver)
        return (
            f"driver {driver} is older than every CUDA toolkit hpcenv knows "
            f"({first.version} needs >= {first.min_driver}){said}"
        )
    tail = f" ({newer[0].version} needs >= {newer[0].min_driver})" if newer else ""
    return f"driver {driver} runs CUDA <= {best.version} builds outright{tail}{said}"


def _sm(cap: str) -> str:
    return "sm_" + cap.replace(".", "")


def why_not(a: Assessment, facts: Facts) -> str:
    """One short clause: why variant ``a`` does not run here."""
    parts = []
    if a.archs is None:
        parts.append(f"hpcenv has no GPU-arch list for {a.variant} on {facts.arch}")
    elif a.missing:
        miss = ", ".join(f"{_sm(c)} ({gpus_with_cap(facts.gpus, c)})" for c in a.missing)
        parts.append(f"no {miss} (carries {' '.join(a.archs.sass) or 'no SASS'})")
    if a.min_driver is None and not a.minor_compat:
        parts.append(
            f"CUDA {a.cuda} has no known minimum driver and needs >= {a.major_min_driver} at least"
        )
    elif not a.outright and not a.minor_compat:
        parts.append(f"CUDA {a.cuda} needs driver >= {a.min_driver or a.major_min_driver}")
    elif not a.outright and a.min_driver:
        parts.append(
            f"CUDA {a.cuda} needs driver >= {a.min_driver} to run outright "
            "(only minor-version compatible here)"
        )
    return f"{a.variant}: " + " and ".join(parts)


def compat_warning(a: Assessment, driver: str) -> str:
    major = cuda_key(a.cuda or "0.0")[0]
    full = (
        f"update the driver to >= {a.min_driver} for full support"
        if a.min_driver
        else f"no source gives CUDA {a.cuda}'s minimum driver, so hpcenv cannot say which "
        "driver gives full support"
    )
    return (
        f"{a.variant} runs on driver {driver} only under CUDA minor-version compatibility "
        f"({major}.x builds on drivers >= {a.major_min_driver}): the kernels compiled into the "
        "wheel work, but PTX cannot be JIT-compiled and calls that need a newer driver fail "
        f"with cudaErrorCallRequiresNewerDriver; {full}"
    )


def _fix_sentences(f: Fixes, version: str, facts: Facts) -> list[str]:
    out = []
    if f.older is not None:
        out.append(f"use torch {f.older[0]} (its {f.older[1]} runs here)")
    if f.driver is not None:
        out.append(f"update the driver to >= {f.driver[0]} (runs {f.driver[1]})")
    if f.cuda_compat is not None:
        package, variant = f.cuda_compat
        out.append(
            f"install NVIDIA's {package} forward-compatibility package for {variant} "
            "(data center GPUs only; check that your driver branch is supported)"
        )
    elif f.compat_refused:
        out.append(f"(NVIDIA's cuda-compat package is no fix here: {f.compat_refused})")
    if f.unknown_code:
        out.append(
            f"hpcenv has no data on the GPU code of {', '.join(f.unknown_code)} for torch "
            f"{version} on {facts.arch} ('hpcenv knowledge update --index URL' reads it from a "
            "reachable PyTorch index)"
        )
    if f.no_code:
        caps = ", ".join(facts.compute_capabilities)
        out.append(f"no {facts.arch} variant of torch {version} carries code for {caps}")
    out.append("pin the cpu build (--backend cpu / [torch] backend = 'cpu') to run without GPUs")
    return out


def _pypi_note(c: Candidate, chosen: str, facts: Facts, know: Knowledge) -> str | None:
    plat = c.platform
    if plat is None or plat.pypi is None:
        return None
    if plat.pypi == chosen:
        return f"PyPI's {facts.arch} torch {c.version} is this same {chosen} build"
    if plat.pypi == "cpu":
        what = "a CPU build"
    else:
        cuda = knowledge.variant_cuda(plat.pypi) or ""
        tk = know.toolkit(cuda)
        need = f", needs driver >= {tk.min_driver}" if tk and tk.min_driver else ""
        what = f"the {plat.pypi} build (CUDA {cuda}{need})"
    return f"PyPI's {facts.arch} torch {c.version} is {what}; using the {chosen} index"


def _data_warnings(d: Decision, facts: Facts) -> list[str]:
    """Unknown release, inferred or unconfirmed rows behind the answer."""
    c = d.candidate
    out = []
    if not c.known:
        how = c.learned_from or "no index was consulted (offline) or reachable"
        out.append(
            f"torch {c.version} is not in hpcenv's data (newest known: {d.newest_known}); "
            f"its release and variants come from: {how}; {REFRESH}"
        )
    plat = c.platform
    unconfirmed = []
    if plat is not None and plat.inferred_from:
        unconfirmed.append(
            f"the {facts.arch} variant list of torch {c.version} is inferred from torch "
            f"{plat.inferred_from}"
        )
    elif plat is not None and not plat.confirmed:
        unconfirmed.append(
            f"the {facts.arch} variant list of torch {c.version} is unconfirmed ({plat.source})"
        )
    a = d.chosen
    if a is not None and a.archs is not None:
        if a.archs.inferred_from:
            unconfirmed.append(
                f"the GPU code of {a.variant} for torch {c.version} on {facts.arch} is inferred "
                f"from torch {a.archs.inferred_from}'s wheel"
            )
        elif not a.archs.confirmed:
            unconfirmed.append(
                f"the GPU-arch list of {a.variant} for torch {c.version} on {facts.arch} is "
                f"unconfirmed ({a.archs.source})"
            )
    if unconfirmed:
        out.append(
            "; ".join(unconfirmed)
            + " ('hpcenv knowledge update --index URL' reads them from a reachable PyTorch index)"
        )
    return out


def explain(d: Decision, facts: Facts, know: Knowledge | None = None) -> TorchChoice:
    """The ``TorchChoice`` (reasons, warnings, error) for decision ``d``."""
    # here: the audit of a lock never calls this, and so creates no TorchChoice type
    from hpcenv.models.torch_choice import TorchChoice

    know = know or knowledge.load()
    words = _Words(reasons=_release_reasons(d, facts, know), warnings=_gpu_warnings(facts))
    error = None
    if d.mode == "pin":
        backend: str | None = _pinned(d, facts, words)
    elif d.mode == "cpu":
        backend = _cpu(d, facts, know, words)
    elif d.chosen is None:
        backend, error = None, _none_runs(d, facts, words)
    else:
        backend = _auto(d, d.chosen, facts, know, words)
    return TorchChoice(
        version=d.candidate.version,
        backend=backend,
        index_url=f"{d.index_base}/{backend}" if backend else None,
        reasons=tuple(words.reasons),
        warnings=tuple(words.warnings),
        error=error,
        pin=d.pin,
        index_base=d.index_base,
    )


@dataclass(kw_only=True)
class _Words:
    reasons: list[str]
    warnings: list[str]


def _release_reasons(d: Decision, facts: Facts, know: Knowledge) -> list[str]:
    """Why this release: the newest matching, the newer ones that cannot run, its variants,
    and (on a GPU node) what the driver runs."""
    c, spec, nv = d.candidate, d.spec.strip(), facts.nvidia
    reasons = [
        f"torch {c.version} is the newest release hpcenv knows that matches {spec!r}"
        if c.known
        else f"torch {c.version} matches {spec!r}"
    ]
    for blocked in d.blocked:
        why = "; ".join(why_not(a, facts) for a in blocked.assessed) or "no variant published"
        reasons.append(
            f"torch {blocked.version} also matches {spec!r} but no build of it runs here ({why})"
        )
    if c.platform is not None:
        variants = ", ".join(c.platform.variants)
        reasons.append(f"torch {c.version} publishes {variants} for {facts.arch}")
    if nv is not None and facts.gpus and d.mode != "cpu":
        reasons.insert(0, driver_reason(nv.driver_version, know, nv.cuda_driver_version))
    return reasons


def _gpu_warnings(facts: Facts) -> list[str]:
    unknown_caps = [g for g in facts.gpus if not g.compute_capability]
    if not unknown_caps:
        return []
    return [
        f"compute capability unknown for {describe_gpus(tuple(unknown_caps))}: "
        "their GPU architecture could not be checked"
    ]


def _pinned(d: Decision, facts: Facts, words: _Words) -> str:
    """A backend pinned by the profile: used as pinned, with what is wrong said."""
    nv, gpus, a = facts.nvidia, facts.gpus, d.chosen
    assert a is not None
    words.reasons.append(f"the profile pins the {d.pin} build")
    if d.pin == "cpu":
        if gpus:
            words.warnings.append(
                f"the cpu build is pinned but the node has {describe_gpus(gpus)}: "
                "torch will not use them"
            )
    elif nv is None or not gpus:
        words.warnings.append(
            f"{d.pin} is pinned but these facts show no NVIDIA GPU: it imports, "
            "but only CPU tensors work here"
        )
    elif not a.runs:
        alt = f"; hpcenv would pick {d.auto.variant}" if d.auto else ""
        words.warnings.append(f"pinned {d.pin} cannot run on this node ({why_not(a, facts)}){alt}")
    elif a.minor_compat:
        words.warnings.append(compat_warning(a, nv.driver_version))
    words.warnings.extend(_data_warnings(d, facts))
    return d.pin


def _cpu(d: Decision, facts: Facts, know: Knowledge, words: _Words) -> str:
    nv = facts.nvidia
    why = (
        "no NVIDIA driver in the facts"
        if nv is None
        else f"driver {nv.driver_version} is loaded but no GPU is visible"
    )
    words.reasons.append(f"{why}: the cpu build")
    note = _pypi_note(d.candidate, "cpu", facts, know)
    if note and "same" not in note:
        words.reasons.append(note)
    words.warnings.extend(w for w in _data_warnings(d, facts) if "not in hpcenv's data" in w)
    return "cpu"


def _none_runs(d: Decision, facts: Facts, words: _Words) -> str:
    """The one-line error when no variant runs, with every fix."""
    nv = facts.nvidia
    assert nv is not None and d.fixes is not None
    why = "; ".join(why_not(a, facts) for a in d.assessed) or "no CUDA variant published"
    fixes = "; or ".join(_fix_sentences(d.fixes, d.candidate.version, facts))
    words.warnings.extend(w for w in _data_warnings(d, facts) if "not in hpcenv's data" in w)
    return (
        f"no torch {d.candidate.version} build for {facts.arch} runs on this node: driver "
        f"{nv.driver_version}, GPUs {describe_gpus(facts.gpus)} ({why}); fixes: {fixes}"
    )


def _auto(d: Decision, chosen: Assessment, facts: Facts, know: Knowledge, words: _Words) -> str:
    """The variant hpcenv chose: why the newer ones cannot, what it carries, the driver."""
    nv, gpus = facts.nvidia, facts.gpus
    assert nv is not None
    driver = nv.driver_version
    for a in d.assessed:
        if a is chosen:
            break
        words.reasons.append(f"not {why_not(a, facts)}")
    carried = ", ".join(
        f"{how} for the {gpus_with_cap(gpus, cap)}"
        for cap, how in zip(facts.compute_capabilities, chosen.covered_by, strict=True)
    )
    if carried:
        words.reasons.append(f"{chosen.variant} carries {carried}")
    if chosen.outright:
        words.reasons.append(
            f"{chosen.variant} is the newest variant that runs: CUDA {chosen.cuda} needs "
            f"driver >= {chosen.min_driver}, this node has {driver}"
        )
    else:
        words.reasons.append(
            f"no variant runs outright; {chosen.variant} is the nearest above the driver's CUDA "
            "under minor-version compatibility"
        )
        words.warnings.append(compat_warning(chosen, driver))
    note = _pypi_note(d.candidate, chosen.variant, facts, know)
    if note:
        words.reasons.append(note)
    words.warnings.extend(_data_warnings(d, facts))
    return chosen.variant


__all__ = ["compat_warning", "describe_gpus", "driver_reason", "explain", "why_not"]
