"""What a command reads before deciding: a profile and a node's facts (recorded with
``--facts FILE``, declared by the profile's [platform] with ``--declared``, or this
host's). ``decide/`` decides on what these return and reads nothing itself; the plan,
lock and build commands get their plan here."""

from __future__ import annotations

from collections.abc import Mapping

from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.profile import schema
from hpcenv.profile.schema import Profile
from hpcenv.utils.errors import BadInput


def facts_for(p: Profile, facts_path: str | None, *, declared: bool = False) -> Facts:
    """``--facts FILE`` (recorded on the node), ``--declared`` (the node the profile's
    [platform] describes) or this host (without network facts: a plan needs none)."""
    if declared and facts_path:
        raise BadInput("give either --facts FILE or --declared, not both")
    if facts_path:
        return collect.load(facts_path)
    if declared:
        return schema.declared_facts(p)
    return collect.collect(network=False)


def plan_for(
    profile_name_or_path: str,
    facts_path: str | None = None,
    *,
    declared: bool = False,
    environ: Mapping[str, str] | None = None,
    project: bool = False,
) -> tuple[Plan, Facts]:
    """Load a profile and the facts (``facts_for``) and make the plan: the one way the
    plan, lock and build commands get theirs. Returns the facts too (a lock's header and
    a build's stamp record them). ``project``: the plan is for ``--project``, whose set
    requires the profile's torch only where it installs torch (``make_plan``)."""
    p = schema.load(profile_name_or_path)
    found = facts_for(p, facts_path, declared=declared)
    return make_plan(p, found, environ=environ, torch_required=not project), found
