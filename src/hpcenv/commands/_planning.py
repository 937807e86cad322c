"""Shared by ``lock`` and ``build``: profile + facts -> plan (``hpcenv.plan.make_plan``)."""

from __future__ import annotations

from hpcenv import facts as facts_mod
from hpcenv import profile as profile_mod
from hpcenv.errors import BadInput
from hpcenv.facts_model import Facts
from hpcenv.plan import make_plan
from hpcenv.plan_model import Plan


def facts_for(p: profile_mod.Profile, facts_file: str | None, declared: bool) -> Facts:
    """``--facts FILE`` or ``--declared`` (the profile's [platform]) or this host."""
    if facts_file and declared:
        raise BadInput("give either --facts FILE or --declared, not both")
    if facts_file:
        return facts_mod.for_args(facts_file)
    if declared:
        return profile_mod.declared_facts(p)
    return facts_mod.collect(network=False)  # plans and locks need no network facts


def plan_for(
    name: str, facts_file: str | None = None, declared: bool = False
) -> tuple[Plan, Facts]:
    """The plan and the facts it was made for (the lock header and stamp need both)."""
    p = profile_mod.load(name)
    facts = facts_for(p, facts_file, declared)
    return make_plan(p, facts), facts
