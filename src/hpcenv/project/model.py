"""One model of a project on a node: ``ProjectOnNode``, the one answer that ``plan
--project``, ``lock --project`` and ``build --project`` are views of.

It is computed once per (project, selection, profile's plan, node facts) in a process
(``on_node``): the project's files are read once (``install_set.project_set``, through one
reader per kind), the Python and why, the torch decision (release, variant, why) and its
torchvision/torchaudio companions, the set for the node (a lock's fork evaluated once by
one ``uv export``; a hand-written file's lines), the changes with their reasons, every GPU
package's verdict (a list the judge, ``decide/cuda_packages``, fills), and what could not
be known, as data.

- ``plan --project`` prints its install set and changes (``install_set.project_plan``);
- ``lock --project`` writes its install set, hashed;
- ``build --project`` checks it before any venv or uv (``build/builder._decide`` reads
  the Python and torch from it; nothing is decided again) and installs its set
  (``build/swap.sync_and_swap``, the same object).

``audit`` judges what a file installs without a profile (``project/audit.py``); it takes
the torch release of a hand-written file from the same rule (``torch_wish.release_for``)
and its resolution from the same cached ``uv pip compile`` (``project/compile.py``);
``tests/integration/projects/test_agreement.py`` holds the two to one answer, field by
field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from packaging.version import InvalidVersion, Version

from hpcenv.decide import cuda_packages
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.project import install_set, uv_lock
from hpcenv.project.request import ProjectRequest
from hpcenv.project.torch_wish import TORCH_FAMILY


@dataclass(frozen=True, kw_only=True)
class TorchDecision:
    """The torch the project gets on the node."""

    release: str  # "2.0.1"; "": the project installs no torch (JAX ...), none is added
    variant: str | None  # "cu117"; None: no variant planned, or no torch
    requirement: str  # the line installed ("torch==2.0.1+cu117", or a wheel; "none")
    before: str  # what the project asks for ("torch>=1.13", a lock's "2.10.0+cu130")
    why: str


@dataclass(frozen=True, kw_only=True)
class ProjectOnNode:
    """A project on one node, for one selection and profile (module docstring)."""

    request: ProjectRequest
    selection: str  # what was read and selected ("environment.yml (no uv.lock: ...)")
    python: uv_lock.PythonChoice
    torch: TorchDecision
    companions: tuple[str, ...]  # torchvision/torchaudio lines of the set, torch's pair
    #: every GPU package of the set judged for the node (``decide/cuda_packages``)
    verdicts: tuple[cuda_packages.Verdict, ...]
    changes: tuple[install_set.Change, ...]
    #: what could not be known (code that computes requirements, an unreachable index)
    unknowns: tuple[str, ...]
    warnings: tuple[str, ...]
    install_set: install_set.ProjectSet
    plan: Plan  # the plan made for the project's torch

    def serialize(self) -> dict[str, object]:
        return {
            "selection": self.selection,
            "python": self.python.version,
            "python_why": self.python.why,
            "torch": {
                "release": self.torch.release or None,  # null: no torch
                "variant": self.torch.variant,
                "requirement": self.torch.requirement,
                "before": self.torch.before,
                "why": self.torch.why,
            },
            "companions": list(self.companions),
            "verdicts": [
                {"name": v.name, "version": v.version, "ok": v.ok, "why": v.why}
                for v in self.verdicts
            ],
            "unknowns": list(self.unknowns),
        }


_CACHE: dict[tuple[object, ...], ProjectOnNode] = {}


def on_node(
    request: ProjectRequest, plan: Plan, facts: Facts, *, log: IO[str] | None = None
) -> ProjectOnNode:
    """The project on the node (computed once per request, plan and facts in a process:
    ``build --project`` asks it before the venv and again to install it)."""
    key = (request, plan.digest(), repr(facts))
    if (known := _CACHE.get(key)) is not None:
        return known
    wanted = install_set.project_set(request, plan, facts, log=log)
    model = of_set(request, wanted)
    _CACHE.clear()  # one project per process is the rule; keep the memory of one
    _CACHE[key] = model
    return model


def of_set(request: ProjectRequest, wanted: install_set.ProjectSet) -> ProjectOnNode:
    """The model read off a computed set (pure)."""
    assert wanted.plan is not None
    plan = wanted.plan
    torch_change = next((c for c in wanted.changes if c.name == "torch"), None)
    requirement = wanted.torch_after
    release = _release(wanted.torch_after) or ""  # "": the set installs no torch (JAX ...)
    companions = tuple(r for r in wanted.requirements if (_name(r) or "") in TORCH_FAMILY[1:])
    return ProjectOnNode(
        request=request,
        selection=wanted.selection,
        python=wanted.python,
        torch=TorchDecision(
            release=release,
            variant=wanted.variant,
            requirement=requirement,
            before=wanted.torch_before,
            why=torch_change.why if torch_change else _as_locked(release),
        ),
        companions=companions,
        verdicts=wanted.verdicts,
        changes=wanted.changes,
        unknowns=(*wanted.dynamic, *wanted.unknowns),
        warnings=wanted.warnings,
        install_set=wanted,
        plan=plan,
    )


def _as_locked(release: str) -> str:
    return "as the project locks it" if release else "the project installs no torch"


def _name(line: str) -> str | None:
    return install_set.req_name(line)


def _release(text: str) -> str | None:
    """``torch==2.0.1+cu117`` / ``2.10.0+cu126`` / a wheel path -> ``2.0.1``."""
    body = text.split("==", 1)[-1].split(";", 1)[0].strip()
    if body.endswith(".whl"):
        body = body.rsplit("/", 1)[-1].split("-")[1]
    try:
        return str(Version(body).public)
    except InvalidVersion:
        return None


__all__ = ["ProjectOnNode", "TorchDecision", "of_set", "on_node"]
