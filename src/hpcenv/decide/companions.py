"""torchvision and torchaudio of torch's release pair, and whether a set holds another.

The pairing is read from the companions' own wheels (``torch_companions.toml``: each
release's ``Requires-Dist: torch==X``); this module only asks it. ``companions_for`` answers
for one torch version, local label or not (``2.6.0+cu124`` has 2.6.0's pair; the label is
the variant, which the pair shares on a PyTorch index). Where a companion is not published
for that torch (torchaudio after 2.10) the answer is None with the reason, never a
neighbour release. ``mismatches`` judges a set: a torchvision/torchaudio whose own
METADATA does not admit the set's torch, or whose local label names another variant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.knowledge.companions import FILE, NAMES, CompanionData, Pairing
from hpcenv.utils import answers
from hpcenv.utils.errors import BadInput


@dataclass(frozen=True, kw_only=True)
class Companions:
    """The torchvision and torchaudio of one torch's release pair."""

    torch: str  # as asked: "2.6.0+cu124"
    torchvision: str | None  # "0.21.0" (public version); None: see torchvision_reason
    torchaudio: str | None
    source: str  # where each was read: "torchvision 0.21.0: <wheel URL#sha256>; ..."
    torchvision_reason: str | None = None  # why there is no torchvision, when None
    torchaudio_reason: str | None = None

    @property
    def label(self) -> str | None:
        """torch's local label (``cu124``, ``cpu``), the variant the pair shares on an
        index; None for PyPI's unlabelled build."""
        return Version(self.torch).local

    def version_of(self, name: str) -> str | None:
        return {"torchvision": self.torchvision, "torchaudio": self.torchaudio}.get(name)

    def reason_of(self, name: str) -> str | None:
        return {"torchvision": self.torchvision_reason, "torchaudio": self.torchaudio_reason}.get(
            name
        )

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(r for r in (self.torchvision_reason, self.torchaudio_reason) if r)


def _release(torch_version: str) -> Version:
    try:
        return Version(torch_version)
    except InvalidVersion as exc:
        raise BadInput(
            f"torch version {torch_version!r} is not a version (e.g. 2.6.0 or 2.6.0+cu124)"
        ) from exc


def _unknown(release: str, data: CompanionData) -> str:
    return (
        f"hpcenv's pairing data ({FILE}: torch {data.span()}) has no row for torch {release}; "
        "run 'hpcenv knowledge update' where PyPI is reachable, or pin a torch it has"
    )


def companions_for(torch_version: str, know: knowledge.Knowledge | None = None) -> Companions:
    """torchvision/torchaudio of ``torch_version``'s release pair (see the module doc)."""
    v = _release(torch_version)
    data = (know or knowledge.load()).companions
    release = v.public
    row = data.pairing(release)
    if row is None:
        why = _unknown(release, data)
        return Companions(
            torch=torch_version,
            torchvision=None,
            torchaudio=None,
            source=FILE,
            torchvision_reason=why,
            torchaudio_reason=why,
        )
    return _from_row(torch_version, row)


def _from_row(torch_version: str, row: Pairing) -> Companions:
    vision, audio = (row.companion(n) for n in NAMES)
    source = "; ".join(f"{r.name} {r.version}: {r.source}" for r in row.paired) or FILE
    return Companions(
        torch=torch_version,
        torchvision=vision.version if vision else None,
        torchaudio=audio.version if audio else None,
        source=source,
        torchvision_reason=row.reason("torchvision"),
        torchaudio_reason=row.reason("torchaudio"),
    )


# --- judging a set ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """A torchvision/torchaudio in a set that is not of its torch's release pair."""

    name: str  # "torchvision"
    version: str  # as in the set: "0.28.0"
    torch: str  # as in the set: "2.9.1+cu126"
    why: str  # words: what the companion requires, or the variant it names
    fix: str  # words: the paired version(s), or that none is published
    source: str = FILE  # where the companion's torch requirement was read (its wheel)


def _admits(requires: str | None, torch: Version) -> bool:
    """Whether a companion's torch requirement admits ``torch`` (its answer kept for a
    lock's next audit: ``utils/answers``)."""
    if not requires:
        return False
    return answers.in_specifier(requires, torch.public, prereleases=True)


def _pinned_pair(name: str, pair: Companions, data: CompanionData) -> bool:
    """Whether torch's pair of ``name`` pins that torch exactly (``torch==2.9.1``): then a
    release of ``name`` naming no torch is another release's. A pair that admits a range
    (torchaudio 2.11.1: ``torch>=2.11``) ties no release to this torch, so one naming no
    torch (2.11.0) cannot be held to it."""
    paired = pair.version_of(name)
    read = data.release(name, paired) if paired else None
    return bool(read and read.requires and read.requires.startswith("=="))


def _fix(name: str, torch: str, pair: Companions) -> str:
    paired = pair.version_of(name)
    if paired is None:
        return f"remove {name} ({pair.reason_of(name)})"
    label = Version(torch).local
    return f"use {name}=={paired}{f'+{label}' if label else ''} (torch {torch}'s pair)"


def _family(variant: str) -> str:
    """``cu126`` -> ``cu12`` (one CUDA major runs together), ``cpu`` -> ``cpu``."""
    cuda = knowledge.variant_cuda(variant)
    return f"cu{cuda.split('.')[0]}" if cuda else variant


def _variant_of(
    have: Version, torch: Version, arch: str | None, know: knowledge.Knowledge
) -> str | None:
    """The variant a companion was built for: its local label, else (unlabelled: PyPI's
    build, made beside PyPI's torch of its release) PyPI's torch build on ``arch``."""
    if have.local:
        return have.local
    release = know.release_of(torch.public) if arch else None
    plat = release.platforms.get(arch or "") if release else None
    return plat.pypi if plat else None


def _variant_mismatch(
    name: str, version: str, torch: str, arch: str | None, know: knowledge.Knowledge
) -> str | None:
    have, t = Version(version), Version(torch)
    if not t.local:
        return None
    built = _variant_of(have, t, arch, know)
    if built is None or _family(built) == _family(t.local):
        return None
    what = f"the {built} build" if have.local else f"PyPI's build ({built} on {arch})"
    return f"{name} {version} is {what}, torch {torch} the {t.local} build"


def _judge(
    name: str,
    version: str,
    *,
    torch: str,
    pair: Companions,
    arch: str | None,
    know: knowledge.Knowledge,
) -> Mismatch | None:
    try:
        have = Version(version)
        t = Version(torch)
    except InvalidVersion:
        return None
    variant = _variant_mismatch(name, version, torch, arch, know)
    if variant:
        fix = _fix(name, torch, pair)
        return Mismatch(name=name, version=version, torch=torch, why=variant, fix=fix)
    data = know.companions
    if pair.version_of(name) == have.public:
        return None
    read = data.release(name, have.public)
    if read is None or _admits(read.requires, t):
        return None  # not in the data (not judged), or its own METADATA admits this torch
    if read.requires is None and not _pinned_pair(name, pair, data):
        return None  # it names no torch, and no pair of this torch pins one release
    said = f"requires torch{read.requires}" if read.requires else "names no torch in its METADATA"
    why = f"{name} {version} {said}; torch {t.public}'s " + (
        f"pair is {name} {pair.version_of(name)}"
        if pair.version_of(name)
        else f"has no {name} ({pair.reason_of(name)})"
    )
    fix = _fix(name, torch, pair)
    return Mismatch(name=name, version=version, torch=torch, why=why, fix=fix, source=read.source)


def mismatches(
    versions: Mapping[str, str],
    know: knowledge.Knowledge | None = None,
    *,
    arch: str | None = None,
) -> tuple[Mismatch, ...]:
    """The companions in ``versions`` (name -> version as pinned, local label kept) that are
    not of its torch's release pair: their own METADATA does not admit that torch (or names
    none, and that torch's pair pins it exactly to another release), or they are built for
    another variant than a labelled torch (another CUDA major, or CUDA beside CPU): their
    label, or unlabelled, PyPI's build on ``arch`` (not judged without ``arch``). A
    companion release the data lacks is not judged."""
    torch = versions.get("torch")
    if not torch:
        return ()
    know = know or knowledge.load()
    try:
        pair = companions_for(torch, know)
    except BadInput:
        return ()
    found = (
        _judge(n, versions[n], torch=torch, pair=pair, arch=arch, know=know)
        for n in NAMES
        if versions.get(n)
    )
    return tuple(m for m in found if m is not None)


__all__ = ["NAMES", "Companions", "Mismatch", "companions_for", "mismatches"]
