"""Network recipes as data: ``network.toml`` beside this module (hand-kept, sources per
variable), typed and cached.

A recipe is what one interconnect needs from NCCL and libfabric: the variables set in
every job (``always``), those only for jobs across nodes (``multi_node``), what the
recipe cannot know and a site must set (``to_set``), the value of ``[platform] nccl_net``
and the modules it usually needs (the OFI plugin, libfabric). Profiles name a recipe
(``[env] recipe = "cxi"``); ``hpcenv profile init`` picks one from a node's libfabric
providers (``pick``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from hpcenv.knowledge import tables

FILE = "network.toml"


@dataclass(frozen=True, kw_only=True)
class Variable:
    name: str
    value: str
    source: str  # the text of the source ([sources] entry), not its key
    confirmed: bool
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class Recipe:
    name: str
    description: str
    provider: str  # the libfabric provider that selects it (fi_info -l)
    nccl_net: str  # [platform] nccl_net: ofi, ib, socket
    modules: tuple[str, ...]  # module name fragments it usually needs (aws-ofi-nccl)
    always: tuple[Variable, ...]
    multi_node: tuple[Variable, ...]
    to_set: dict[str, str]  # variable -> what to set it to (a site's choice)

    def env(self, which: str) -> dict[str, str]:
        """``always`` or ``multi_node`` as a plain table of values."""
        return {v.name: v.value for v in getattr(self, which)}


def _variables(table: dict[str, Any], sources: dict[str, str], where: str) -> tuple[Variable, ...]:
    out = []
    for name, spec in table.items():
        source = str(spec["source"])
        if source not in sources:  # a data bug, caught by the tests
            raise ValueError(f"{FILE}: {where}.{name} names unknown source {source!r}")
        out.append(
            Variable(
                name=name,
                value=str(spec["value"]),
                source=sources[source],
                confirmed=bool(spec.get("confirmed", True)),
                why=str(spec.get("why", "")),
            )
        )
    return tuple(out)


@cache
def recipes() -> dict[str, Recipe]:
    """Every recipe by name, in ``order`` (the order ``pick`` tries them)."""
    data = tables.read(FILE)
    sources = {str(k): str(v) for k, v in data["sources"].items()}
    out = {}
    for name in data["order"]:
        r = data["recipe"][name]
        out[name] = Recipe(
            name=name,
            description=str(r["description"]),
            provider=str(r["provider"]),
            nccl_net=str(r["nccl_net"]),
            modules=tuple(str(m) for m in r.get("modules", ())),
            always=_variables(r.get("always", {}), sources, f"recipe.{name}.always"),
            multi_node=_variables(r.get("multi_node", {}), sources, f"recipe.{name}.multi_node"),
            to_set={str(k): str(v) for k, v in r.get("to_set", {}).items()},
        )
    return out


def names() -> tuple[str, ...]:
    return tuple(recipes())


def get(name: str) -> Recipe | None:
    return recipes().get(name)


def pick(providers: Sequence[str] | None) -> Recipe:
    """The recipe for a node whose libfabric lists ``providers`` (None: fi_info absent):
    the first in ``order`` whose provider it has; tcp when none (sockets always work)."""
    have = {p.split(";")[0] for p in providers or ()}
    table = recipes()
    for recipe in table.values():
        if recipe.provider in have:
            return recipe
    return table["tcp"]


__all__ = ["Recipe", "Variable", "get", "names", "pick", "recipes"]
