"""The torch variant decision as data: the release chosen (``Candidate``), a newer one that
cannot run (``Blocked``), what would fix a node where none runs (``Fixes``), and the whole
``Decision``; each variant judged is ``torch_assessment.Assessment``. ``torch_variant``
decides, ``torch_variant_words`` words it; both read these types, so neither imports the
other's half. Only a decision imports this module: an audit whose torch runs judges one
variant (``Assessment``) and creates none of these types (start-up time)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcenv.decide.torch_assessment import Assessment
from hpcenv.knowledge import PlatformVariants


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A torch release the spec matches, and where hpcenv knows it from."""

    version: str
    platform: PlatformVariants | None  # the node's CPU arch; None: no wheels for it
    known: bool  # in hpcenv's data
    learned_from: str | None = None  # for a release the data lacks: what listed it


@dataclass(frozen=True, kw_only=True)
class Blocked:
    """A newer release the spec matches that cannot run here."""

    version: str
    assessed: tuple[Assessment, ...]


@dataclass(frozen=True, kw_only=True)
class Fixes:
    """What would make a build run when none does (each None when it would not help)."""

    older: tuple[str, str] | None  # (release, variant): the newest release that runs here
    driver: tuple[str, str] | None  # (minimum driver, variant) of a variant with the GPU code
    cuda_compat: tuple[str, str] | None  # (package, variant): forward compatibility
    compat_refused: str | None  # why cuda-compat is no fix here (not a data center GPU)
    no_code: bool  # no variant whose GPU code is known carries code for the node's GPUs
    unknown_code: tuple[str, ...] = ()  # variants whose GPU code hpcenv has no data for


@dataclass(frozen=True, kw_only=True)
class Decision:
    """Everything the resolver decided, as data (``torch_variant_words.explain`` words it)."""

    spec: str
    candidate: Candidate  # the release chosen (or, when nothing runs, the one asked for)
    newest_known: str
    mode: str  # "pin" (a backend pin), "cpu" (no GPU), "auto"
    pin: str  # "auto" or the pinned variant
    index_base: str
    assessed: tuple[Assessment, ...]  # auto: every CUDA variant, newest first
    chosen: Assessment | None  # None: no compatible build
    auto: Assessment | None = None  # under a pin: what auto would have picked
    blocked: tuple[Blocked, ...] = ()
    fixes: Fixes | None = None

    @property
    def backend(self) -> str | None:
        return self.chosen.variant if self.chosen else None
