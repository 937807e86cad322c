"""A range of a GPU package (``vllm>=0.8.5,<=0.12.0``) resolved for the node, never
judged as "unpinned": the release the resolver picks for the node's platform and the
project's Python (``project/compile``, the cached ``uv pip compile`` that ``audit`` makes
too), and where it cannot run on the node (``decide/cuda_packages``), the newest older
release of the range that can, from the judge's data (``knowledge/vllm.toml``'s ranges).
``install_set.handwritten_set`` (plan, lock, build) and ``audit.resolve_for`` ask it alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement

from hpcenv import knowledge
from hpcenv.decide import cuda_packages
from hpcenv.models.facts import Facts
from hpcenv.project import compile as project_resolve
from hpcenv.project import readers, torch_wish
from hpcenv.tools import uv
from hpcenv.utils.errors import BadInput, CommandFailed
from hpcenv.utils.names import canonicalize_name


@dataclass(frozen=True, kw_only=True)
class Ranged:
    """A hand-written file's CUDA packages given as a range, resolved for the node."""

    versions: dict[str, str] = field(default_factory=dict)  # name -> the release picked
    torch: str | None = None  # the torch release that resolution holds
    why: str = ""
    notes: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()  # what the resolution that picked them was given


#: How many older releases of a range are tried when the newest cannot run on the node.
_OLDER_TRIES = 3


def pick(
    hand: readers.Request, facts: Facts, *, arch: str, python: str, torch: str | None
) -> Ranged:
    """A range of a CUDA package (``vllm>=0.8.5,<=0.12.0``) is judged by the release the
    resolver picks for the node, never as "unpinned": the file resolved with uv for the
    node's platform and the project's Python (``project/compile``, the resolution ``audit``
    makes and caches), with the torch chosen so far when the range admits one that works
    with it. Where the release picked cannot run on the node, the newest older one of the
    range that can is picked, and said. An unreachable index or code that computes the
    requirements leaves the range judged by name, with a note."""
    ranges = {name: req for name, req in _cuda_lines(hand) if _is_range(req)}
    if not ranges:
        return Ranged()
    target = project_resolve.Target(arch=arch, glibc=facts.glibc, python=_minor(python))
    spec = torch_wish.torch_line(hand)
    exact = spec is not None and readers.exact_release(spec.specifier)
    held: tuple[str, ...] = () if exact or torch is None else (f"torch=={torch}",)
    tried: list[str] = []
    picked: dict[str, str] = {}
    pinned: str | None = None
    older: tuple[str, ...] = ()
    for attempt in range(_OLDER_TRIES + 1):
        found = None
        for extra in (held, ()) if held else ((),):
            try:
                text = project_resolve.resolve(
                    dataclasses.replace(hand, constraints=(*hand.constraints, *extra, *older)),
                    target,
                ).text
            except BadInput:
                held = ()  # the range does not work with the torch so far: never asked again
                continue
            except CommandFailed as exc:
                why = uv.error_summary(exc.output or "") or str(exc).splitlines()[0]
                return Ranged(notes=(f"{_ranges_text(ranges)}: not resolved for this node "
                                      f"({why}); judged by name",))  # fmt: skip
            found = _pins(text)
            break
        if found is None:
            break
        picked = {n: found[n] for n in ranges if n in found}
        pinned = found.get("torch")
        node = _node(facts, pinned or torch or "", arch)
        bad = [v for v in cuda_packages.judge({n: (v,) for n, v in picked.items()}, node)
               if not v.ok]  # fmt: skip
        if not bad or attempt == _OLDER_TRIES:
            break
        below = [b for v in bad if (b := _below_release(v))]
        if len(below) < len(bad):  # no older release is known to do better: the newest said
            break
        tried += [f"{v.name} {v.version} ({v.why})" for v in bad]
        older = (*older, *below)
    if not picked:
        return Ranged(notes=(f"{_ranges_text(ranges)}: no release resolves for this node; "
                              "judged by name",))  # fmt: skip
    words = ", ".join(f"{n} {v} (of {ranges[n]})" for n, v in sorted(picked.items()))
    notes = [f"{words}: the release the resolver picks for this node"]
    if tried and not bad:
        notes.append(f"cannot run on this node: {'; '.join(tried)}; the newest older release of "
                     "the range that can is picked")  # fmt: skip
    elif tried:
        notes.append(f"cannot run on this node: {'; '.join(tried)}, nor the release below "
                     f"them: the range's newest {len(tried) + 1} releases were tried")  # fmt: skip
    why = f"the project's set resolved for this node ({words}) holds torch {pinned}"
    return Ranged(
        versions=picked, torch=pinned, why=why, notes=tuple(notes), constraints=(*held, *older)
    )


def _below_release(verdict: cuda_packages.Verdict) -> str | None:
    """The constraint that skips a release that cannot run, from the judge's data: below
    the first release of its vLLM compute-capability range (``knowledge/vllm.toml``); None
    where the data knows no older release that differs (flash-attn 2's floor is every 2.x's)."""
    if verdict.name != "vllm" or (rng := knowledge.load().vllm_min_cc(verdict.version)) is None:
        return None
    return f"vllm<{rng.versions.split(',')[0].removeprefix('>=')}"


def _cuda_lines(hand: readers.Request) -> list[tuple[str, Requirement]]:
    out: list[tuple[str, Requirement]] = []
    for line in hand.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if (name := canonicalize_name(req.name)) in cuda_packages.BY_NAME:
            out.append((name, req))
    return out


def _is_range(req: Requirement) -> bool:
    return bool(req.specifier) and not any(s.operator in ("==", "===") for s in req.specifier)


def _ranges_text(ranges: Mapping[str, Requirement]) -> str:
    return ", ".join(str(r) for r in ranges.values())


def _pins(text: str) -> dict[str, str]:
    """``{name: public version}`` of ``uv pip compile``'s output."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split(";", 1)[0].strip()
        name, sep, version = line.partition("==")
        if sep and name and not line.startswith(("#", "-")):
            out[canonicalize_name(name.strip())] = version.strip()
    return out


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _node(facts: Facts, torch: str, arch: str) -> cuda_packages.Node:
    """The node as the judge sees it beside PyPI's build of ``torch`` (the resolver's)."""
    nv = facts.nvidia
    return cuda_packages.Node(
        caps=tuple(g.compute_capability for g in facts.gpus if g.compute_capability),
        driver_cuda=nv.cuda_driver_version if nv else None,
        torch_version=torch,
        arch=arch,
    )


__all__ = ["Ranged", "pick"]
