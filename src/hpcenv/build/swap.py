"""Install a user's project into a fresh venv with the node's torch: one CUDA stack.

What the project installs on the node is decided in ``project/install_set.py`` (its set,
rewritten for the node's torch variant, resolved for the node); this module builds it:

1. the set resolved (``install_set.resolve_set``) and synced into the new venv with ``uv
   pip sync``: nothing is installed and then uninstalled, and nothing is downloaded that
   the result does not contain (packages whose setup.py imports torch, deepspeed say, are
   built without isolation against the venv's torch, installed before them:
   ``torch_first``); a hand-written project's set is resolved and installed in one pass;
2. the project and its workspace members, non-editable, from a copy (``project_copy``: the
   files git tracks, else the tree less tool output, sockets, FIFOs, devices and huge
   files; the project's files stay byte-identical: no ``*.egg-info``, no ``__pycache__``);
3. the proof (:func:`proof`, ``cudalibs.check``): every CUDA library ``libtorch_cuda.so``
   and each CUDA extension needs is there and from a wheel of the major of the stack its
   distribution belongs to, read from what is installed (torch's and what depends on it:
   torch's major; a ``jax-cuda13-plugin``'s: 13), not from the profile; the build's import
   check then imports every package that depends on torch, the profile's packages and the
   project's own distribution (``checked`` in the result), with the new torch.

The switch to the new venv is the builder's (``build/builder.py``), atomic.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from pathlib import Path
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement

from hpcenv import knowledge
from hpcenv.binaries import cudalibs
from hpcenv.build import fixes, torch_first
from hpcenv.build.results import InstalledDist, ProjectInstall
from hpcenv.decide import cuda_packages
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.project import copy_tree, model
from hpcenv.project.install_set import ProjectSet, extra_args, resolve_set, write_input
from hpcenv.project.install_set import hint as _hint
from hpcenv.project.install_set import req_name as _req_name
from hpcenv.project.request import ProjectRequest
from hpcenv.tools import uv
from hpcenv.utils import fsio
from hpcenv.utils.errors import BuildFailed, CommandFailed
from hpcenv.utils.names import canonicalize_name


def installed(venv: Path) -> dict[str, InstalledDist]:
    """``{name: InstalledDist}`` of what is installed in ``venv``.

    Read from the venv's ``*.dist-info`` metadata in this process (the venv need not
    have ``packaging``); markers are evaluated for the venv's Python version.
    """
    site = fixes.site_packages(venv)
    py = site.parent.name.removeprefix("python")  # lib/python3.11/site-packages
    env = {"extra": "", "python_version": py, "python_full_version": f"{py}.0"}
    out: dict[str, InstalledDist] = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        reqs: set[str] = set()
        optional: set[str] = set()
        extras = dist.metadata.get_all("Provides-Extra") or []
        for line in dist.requires or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate(env):
                reqs.add(canonicalize_name(req.name))
            elif any(req.marker.evaluate({**env, "extra": e}) for e in extras):
                optional.add(canonicalize_name(req.name))
        out[canonicalize_name(dist.metadata["Name"])] = InstalledDist(
            version=dist.version,
            requires=tuple(sorted(reqs)),
            local=_from_a_path(dist),
            optional=tuple(sorted(optional - reqs)),
        )
    return out


def proof(
    venv: Path, after: dict[str, InstalledDist], *, torch_major: int | None = None
) -> cudalibs.LinkCheck | None:
    """The one-CUDA-stack proof of ``venv`` (module docstring, step 3): each object checked
    against the CUDA major of the stack its distribution belongs to, read from what is
    installed (``cuda_packages.stacks`` over the dependency edges, an extra's counted where
    what it names is installed: ``jax[cuda13]``'s plugin pulls its runtime through
    ``with-cuda``), never from the profile; None when no object needs a CUDA library.
    ``torch_major``: the plan's torch build's CUDA major, which the installed torch's stack
    must be (the swap installed the node's torch)."""
    edges = {n: (*i.requires, *(o for o in i.optional if o in after)) for n, i in after.items()}
    found = cuda_packages.stacks({n: i.version for n, i in after.items()}, edges)
    majors = {n: (s.major, s.how) if s else None for n, s in found.items()}
    check = cudalibs.check(fixes.site_packages(venv), stacks=majors)
    torch = found.get("torch")
    if torch_major is not None and torch is not None and torch.major != torch_major:
        wrong = (f"torch {after['torch'].version} is a CUDA {torch.major} build ({torch.how}), "
                 f"the plan's torch is CUDA {torch_major}")  # fmt: skip
        check = dataclasses.replace(check, problems=(wrong, *check.problems))
    return check if check.objects or check.problems else None


def _from_a_path(dist: importlib.metadata.Distribution) -> bool:
    """Installed from a directory (PEP 610 ``direct_url.json`` with a ``file:`` URL and no
    archive): the project's own distribution, or one of its local packages."""
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return str(data.get("url", "")).startswith("file:") and "archive_info" not in data


def sync_and_swap(
    request: ProjectRequest,
    venv: Path,
    plan: Plan,
    *,
    log: IO[str] | None,
    facts: Facts | None = None,
) -> ProjectInstall:
    """Install the project into the fresh ``venv`` with the node's torch (module docstring).

    ``facts`` describe the node the build is for (default: this host's).
    """
    if facts is None:
        from hpcenv.facts.collect import collect

        facts = collect(network=False)
    wanted = model.on_node(request, plan, facts, log=log).install_set  # as _decide read it
    assert wanted.plan is not None
    plan = wanted.plan
    done = _install_project(request, wanted, venv, plan, facts, log=log)
    after = installed(venv)
    torch_after = after["torch"].version if "torch" in after else None
    cuda = knowledge.variant_cuda(plan.torch.backend) if plan.torch.backend else None
    check = proof(venv, after, torch_major=int(cuda.split(".")[0]) if cuda else None)
    if check is not None and not check.ok:
        more = f" (and {len(check.problems) - 1} more)" if len(check.problems) > 1 else ""
        raise BuildFailed(
            f"the environment's CUDA libraries do not fit its stacks: {check.problems[0]}{more}"
        )
    dependents = {n for n, info in after.items() if "torch" in info.requires}
    if torch_after is None:  # no torch (JAX ...): the set's top packages, which nothing requires
        required = {r for info in after.values() for r in info.requires}
        dependents = {n for n, info in after.items() if n not in required and not info.local}
    profile_names = {n for n in (_req_name(r) for r in plan.packages) if n and n in after}
    own = {n for n, info in after.items() if info.local}  # the project itself must import
    return dataclasses.replace(
        done,
        torch_after=torch_after,
        swapped=torch_after != wanted.torch_before and torch_after is not None,
        libraries=check,
        # imported by the build's import check (after the fixes are in)
        checked=tuple(sorted(dependents | profile_names | own)),
        flash_attn_from_project="flash-attn" in after,
    )


def _install_project(
    request: ProjectRequest,
    wanted: ProjectSet,
    venv: Path,
    plan: Plan,
    facts: Facts,
    *,
    log: IO[str] | None,
) -> ProjectInstall:
    """Steps 3 and 4 of :func:`sync_and_swap`: the set resolved and installed (packages
    built against torch without isolation), then the project itself from a copy."""
    extra = extra_args(wanted, plan)
    done = ProjectInstall(
        project=str(request.directory),
        selection=wanted.selection,
        python=wanted.python.version,
        python_why=wanted.python.why,
        torch_before=wanted.torch_before,
        variant=wanted.variant,
        warnings=wanted.warnings,
        changes=wanted.changes,
    )
    with fsio.work_dir("hpcenv-project-") as work:  # a SIGKILLed one's: removed next run
        copy = work / "project"
        name = request.directory.name
        doing = f"installing project {name} (torch {wanted.torch_before} -> {plan.torch.backend})"
        try:
            if wanted.local_deps:  # no lock to keep: resolved and installed in one pass
                skipped = write_input(request, wanted, work)
                reqs = ["-r", str(work / "requirements.in")]
                isolation = torch_first.install(
                    venv, reqs, names=wanted.names, torch=wanted.torch_after, plan=plan,
                    extra=[*extra, "--no-sources"], log=log,
                )  # fmt: skip
            else:
                skipped = resolve_set(request, wanted, facts, work, log=log)
                isolation = torch_first.sync(
                    venv, work / "resolved.txt", plan=plan, work=work, log=log, extra=extra
                )
            done = dataclasses.replace(done, copy_skipped=skipped, no_build_isolation=isolation)
            if wanted.local_deps and wanted.local:
                done = dataclasses.replace(done, installed_from_copy=wanted.local)
            elif wanted.local:
                doing = f"installing project {name} itself (non-editable, from a copy)"
                skipped = copy_tree.copy_project(request.directory, copy).skipped
                paths = [
                    rel.removeprefix("file://")
                    if rel.startswith(("file:", "/"))
                    else str((copy / rel).resolve())
                    for rel in wanted.local
                ]
                env = {"PYTHONDONTWRITEBYTECODE": "1"}
                extra_local = ["--no-deps", *extra]
                uv.install(venv, paths, plan=plan, extra=extra_local, log=log, env=env)
                done = dataclasses.replace(
                    done, copy_skipped=tuple(skipped), installed_from_copy=wanted.local
                )
        except CommandFailed as exc:
            detail = uv.error_summary(exc.output) or str(exc)
            raise BuildFailed(f"{doing} failed: {detail}; {_hint(plan)}") from exc
    return done


__all__ = ["installed", "sync_and_swap"]
