"""The one torch decision: a node, the knowledge and a wish -> what torch to install.

Every command that needs a torch build asks here: ``plan`` for a profile
(``decide/plan.py``), and through ``project/torch_wish.py`` (the one caller outside
``decide/``) ``audit``, ``plan``/``lock``/``build --project`` and ``resolve``. The wish is
the profile's, the project's or the user's: a version spec or range (``==2.9.1``,
``>=2.4``), a variant pin (``auto``, ``cu126``, ``cpu``: conda's ``cudatoolkit=11.3``
becomes ``cu113``) and the index base. The answer is the resolver's choice
(``torch_variant.try_resolve_torch``: release, variant, index, reasons, warnings, or the
error when nothing runs), the wish it answers, and torchvision/torchaudio of the same
release pair and variant (``pair_of``: ``decide/companions``, read from their wheels'
METADATA, or why none is published); ``require`` is the one
"no compatible build" (exit 3, ``torch_variant.raise_if_none``). The requirement line and
index arguments a choice becomes are written once, in ``tools/uv.torch_requirement``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcenv import knowledge
from hpcenv.decide import torch_variant
from hpcenv.decide.companions import Companions, companions_for
from hpcenv.models import DEFAULT_INDEX_URL
from hpcenv.models.facts import Facts
from hpcenv.models.torch_choice import TorchChoice

if TYPE_CHECKING:  # types only: audit's fix asks no index and no spec of packaging's
    from packaging.specifiers import SpecifierSet

    from hpcenv.knowledge.lookup import Lookup


@dataclass(frozen=True, kw_only=True)
class TorchWish:
    """What is asked of torch: a spec or range, a variant pin and the index base."""

    spec: str  # "==2.9.1", ">=2.4"; ">=0" for any release
    pin: str = "auto"  # "auto" or a variant ("cu126", "cpu")
    index_base: str = DEFAULT_INDEX_URL


@dataclass(frozen=True, kw_only=True)
class TorchAnswer:
    """The choice for one wish on one node (``choice.backend`` None: nothing runs)."""

    wish: TorchWish
    choice: TorchChoice

    @property
    def runs(self) -> bool:
        return self.choice.backend is not None and not self.choice.error

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.choice.reasons

    @property
    def companions(self) -> Companions | None:
        """torchvision/torchaudio of the chosen torch's release pair, of its variant (None
        when nothing runs)."""
        if not self.choice.version or not self.choice.backend:
            return None
        return pair_of(self.choice.version, self.choice.backend)

    def require(self, where: str = "this node") -> TorchChoice:
        """The choice, or ``NoCompatibleBuild`` (exit 3) naming why nothing runs."""
        return torch_variant.raise_if_none(self.choice, where)


def choose_torch(facts: Facts, wish: TorchWish, *, lookup: Lookup | None = None) -> TorchAnswer:
    """The torch build for ``wish`` on the node in ``facts`` (``BadInput`` for a malformed
    spec or a pin the release does not publish). ``lookup`` asks the PyTorch index about a
    release the data lacks (``resolve`` only; everything else decides from the data)."""
    choice = torch_variant.try_resolve_torch(
        facts, wish.spec, pin=wish.pin, index_base=wish.index_base, lookup=lookup
    )
    return TorchAnswer(wish=wish, choice=choice)


def newest_with_variant(wanted: SpecifierSet, variant: str, arch: str) -> str | None:
    """The newest release in ``wanted`` that published a ``variant`` build for ``arch``
    (hpcenv's torch data): what a file that names its build installs (conda's
    ``pytorch>=1.13`` beside ``pytorch-cuda=11.7``), as conda resolves it."""
    return knowledge.load().newest_with_variant(wanted, variant, arch)


def pair_of(version: str, variant: str | None) -> Companions:
    """torchvision/torchaudio of torch ``version``'s release pair (``decide/companions``:
    read from the companions' own wheels), for the same ``variant`` (their local label on
    a PyTorch index; None: unlabelled, PyPI's)."""
    label = f"+{variant}" if variant and "+" not in version else ""
    return companions_for(f"{version}{label}")


def runs_on(facts: Facts) -> Callable[[str], bool]:
    """Whether hpcenv's own choice finds a build of a torch release that runs on the
    node in ``facts`` (a CUDA build where it has NVIDIA GPUs): the check every suggested
    fix passes before it is printed (``torch_fit.check``)."""

    def runs(version: str) -> bool:
        choice = choose_torch(facts, TorchWish(spec=f"=={version}")).choice
        return choice.backend is not None and (choice.backend != "cpu" or not facts.gpus)

    return runs


__all__ = [
    "TorchAnswer",
    "TorchWish",
    "choose_torch",
    "newest_with_variant",
    "pair_of",
    "runs_on",
]
