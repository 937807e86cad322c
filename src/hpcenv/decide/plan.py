"""Profile + facts -> the plan: every step of a build with the reason for it.

The plan is data (``plan_model.Plan``): the builder carries it out, people read its
steps, scripts read its JSON. Nothing here touches the network or starts a process;
a plan made on a laptop from recorded (or declared) facts is exactly what the node
would do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from hpcenv import knowledge
from hpcenv.decide import flashattn, torch_fit
from hpcenv.decide.torch_choice import TorchWish, choose_torch, runs_on
from hpcenv.decide.torch_variant import describe_gpus, index_base, raise_if_none
from hpcenv.knowledge import cap_key
from hpcenv.models import wheel_fit
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan, Step
from hpcenv.models.torch_choice import TorchChoice
from hpcenv.profile.schema import Profile
from hpcenv.utils.errors import BadInput
from hpcenv.utils.names import canonicalize_name

FIND_LINKS_ENV = ("PIP_FIND_LINKS", "HPCENV_FIND_LINKS")


def find_links(p: Profile, environ: Mapping[str, str]) -> tuple[str, ...]:
    """Wheelhouses: profile packages.find_links, then $PIP_FIND_LINKS, then $HPCENV_FIND_LINKS
    (both space-separated, as pip reads them); duplicates dropped, order kept."""
    out: list[str] = []
    for entry in list(p.packages.find_links) + [
        part for name in FIND_LINKS_ENV for part in environ.get(name, "").split()
    ]:
        if entry and entry not in out:
            out.append(entry)
    return tuple(out)


def _local_dir(link: str) -> Path | None:
    if link.startswith("file://"):
        link = link[len("file://") :]
    elif "://" in link:
        return None
    path = Path(link).expanduser()
    return path if path.is_dir() else None


def find_torch_wheel(
    links: tuple[str, ...],
    choice: TorchChoice,
    *,
    arch: str,
    python: str,
    glibc: str | None = None,
) -> str | None:
    """A torch wheel in a local wheelhouse that is exactly this choice, or None.

    It must have the exact version, the variant's local label (``+cpu``, ``+cu126``; a
    wheel without a label counts only for the variant PyPI carries on this arch), a
    tag that installs on the node (``models.wheel_fit``: this Python, ``arch``, the node's
    glibc; never a musllinux wheel).
    """
    if not choice.version or not choice.backend:
        return None
    release = knowledge.load().release_of(choice.version)
    pypi = release.platforms[arch].pypi if release and arch in release.platforms else None
    want = Version(choice.version)
    for link in links:
        folder = _local_dir(link)
        if folder is None:
            continue
        for wheel in sorted(folder.glob("torch-*.whl")):
            try:
                name, version, _build, _tags = parse_wheel_filename(wheel.name)
            except InvalidWheelFilename:
                continue
            if name != "torch" or Version(version.public) != want:
                continue
            label = version.local
            if label != choice.backend and not (label is None and choice.backend == pypi):
                continue
            if not wheel_fit.wheel_fits(wheel.name, python=python, arch=arch, glibc=glibc):
                continue
            return str(wheel.resolve())
    return None


def _check_platform(p: Profile, facts: Facts) -> tuple[str, list[str]]:
    """(arch to plan for, warnings); BadInput when the facts contradict the profile."""
    warnings: list[str] = []
    declared = p.platform.arch
    where = facts.source or "the facts"
    if declared != "any" and facts.arch and facts.arch != declared:
        raise BadInput(
            f"profile {p.name} is for {declared} nodes, not for {facts.arch} nodes "
            f"({where}); use facts recorded on one of its {declared} nodes, "
            "or plan with --declared"
        )
    arch = facts.arch or (declared if declared != "any" else None)
    if arch is None:
        raise BadInput(
            f"{where}: the CPU arch is unknown and profile {p.name} says arch = 'any'; "
            "plan with facts from the node ('hpcenv facts --json > FILE')"
        )
    want_gpu = p.platform.gpu
    if want_gpu:
        names = {g.name for g in facts.gpus}
        if not facts.gpus:
            warnings.append(
                f"profile {p.name} expects {want_gpu} GPUs but {where} show none: "
                "planning the cpu build"
            )
        elif names != {want_gpu}:
            warnings.append(
                f"profile {p.name} expects {want_gpu} but {where} show "
                f"{describe_gpus(facts.gpus)}: planning for the GPUs actually present"
            )
    return arch, warnings


def vllm_warning(packages: tuple[str, ...], facts: Facts) -> str | None:
    """A warning when a requested vLLM has no kernels for this node's oldest GPU.

    An exact pin is judged by its own version range; an open requirement by the newest
    range in the data, since that is what a resolver will pick.
    """
    know = knowledge.load()
    caps = facts.compute_capabilities
    if not caps:
        return None
    for text in packages:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "vllm":
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        rng = know.vllm_min_cc(pins[0]) if pins else (know.vllm[-1] if know.vllm else None)
        if rng is None:
            return None
        low = [c for c in caps if cap_key(c) < cap_key(rng.min_compute_capability)]
        if not low:
            return None
        old = describe_gpus(tuple(g for g in facts.gpus if g.compute_capability in low))
        lead = "" if rng.confirmed else " (unconfirmed)"
        return (
            f"{text!r} in [packages] install: vLLM {rng.versions} needs compute capability >= "
            f"{rng.min_compute_capability}{lead} and this node has {old}; pin an older vLLM "
            f"or drop it ({rng.source})"
        )
    return None


SM90A = "sm90a"
VENV_NCCL = "venv_nccl"


def _fixes(p: Profile, facts: Facts, arch: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The sitecustomize fixes and their settings: sm90a when the profile asks for it or
    the node is aarch64 with a 9.0 GPU, with TORCH_CUDA_ARCH_LIST from the node's GPUs;
    venv_nccl when ``[job] nccl = 'venv'`` (or the profile lists it)."""
    fixes: list[str] = []
    settings: dict[str, str] = {}
    hopper_arm = arch == "aarch64" and "9.0" in facts.compute_capabilities
    if SM90A in p.fixes.sitecustomize or hopper_arm:
        fixes.append(SM90A)
        arch_list = ";".join(facts.compute_capabilities)
        settings.update({"TORCH_CUDA_ARCH_LIST": arch_list} if arch_list else {})
    if p.job.nccl == "venv" or VENV_NCCL in p.fixes.sitecustomize:
        fixes.append(VENV_NCCL)
    return tuple(fixes), settings


def make_plan(
    p: Profile,
    facts: Facts,
    *,
    environ: Mapping[str, str] | None = None,
    torch_required: bool = True,
) -> Plan:
    """The full plan for profile ``p`` on the node described by ``facts``: the decisions
    (``decide``), then the steps a person reads (``describe``).

    ``environ`` (default ``os.environ``) supplies HPCENV_TORCH_INDEX_URL,
    PIP_FIND_LINKS and HPCENV_FIND_LINKS. Raises BadInput when facts and profile
    disagree on the CPU arch, NoCompatibleBuild when no torch build can run, unless
    ``torch_required`` is False: a plan for a project (``--project``), which installs the
    profile's torch only if it installs torch at all; the project's set then requires it
    (``require_torch``, ``install_set.project_set``), and a project without torch (JAX)
    is not refused for a torch it will not install.
    """
    env = os.environ if environ is None else environ
    arch, warnings = _check_platform(p, facts)
    if facts.arch is None:
        facts = replace(facts, arch=arch)
    plan = decide(p, facts, arch=arch, environ=env, torch_required=torch_required)
    warnings += plan.warnings
    # masked where they are printed or written (redact, at the exits)
    return replace(plan, steps=describe(p, facts, plan, environ=env), warnings=tuple(warnings))


def decide(
    p: Profile,
    facts: Facts,
    *,
    arch: str,
    environ: Mapping[str, str],
    torch_required: bool = True,
) -> Plan:
    """What a build of ``p`` does on this node, without the prose: torch (version,
    variant, index; a wheelhouse file when one matches), packages, flash-attn, fixes,
    modules and environment. ``warnings`` holds the resolver's and the vLLM check's.
    Without ``torch_required`` a torch that cannot run stays in the plan as the resolver's
    answer (no build, its error), and its wheel is not fitted to the profile's Python: a
    project's set checks the torch it installs, with the project's Python
    (``install_set.check_torch_fit``) (``make_plan``)."""
    python = p.profile.python
    base = index_base(p.torch.index_url, environ)
    wish = TorchWish(spec=p.torch.version, pin=p.torch.backend, index_base=base)
    answer = choose_torch(facts, wish)
    torch = answer.require() if torch_required else answer.choice
    if torch.version and torch_required:  # a project's torch is checked with its Python
        torch_fit.check(
            torch.version,
            arch,
            python,
            facts.glibc,
            where=f"the node ({facts.source or 'this host'})",
            python_where=f"[profile] python in profile {p.name}",
            runs=runs_on(facts),
        )
    links = find_links(p, environ)
    packages = tuple(p.packages.install)
    vllm = vllm_warning(packages, facts)
    fa = flashattn.decide(
        facts, torch, mode=p.flash_attn.mode, version=p.flash_attn.version, python=python
    )
    fixes, fix_settings = _fixes(p, facts, arch)
    return Plan(
        profile=p.name,
        arch=arch,
        python=python,
        torch=torch,
        packages=packages,
        flash_attn=fa,
        fixes=fixes,
        fix_settings=fix_settings,
        env=dict(p.env.always),
        multi_node_env=dict(p.env.multi_node),
        modules=tuple(p.modules.load),
        find_links=links,
        torch_wheel=find_torch_wheel(links, torch, arch=arch, python=python, glibc=facts.glibc),
        offline=p.packages.offline,
        warnings=(*torch.warnings, *([vllm] if vllm else [])),
    )


def describe(
    p: Profile, facts: Facts, plan: Plan, *, environ: Mapping[str, str]
) -> tuple[Step, ...]:
    """The plan's steps, each with its reason, for people (``hpcenv plan``) and reports."""
    torch, fa = plan.torch, plan.flash_attn
    base_from = (
        "$HPCENV_TORCH_INDEX_URL" if environ.get("HPCENV_TORCH_INDEX_URL") else "[torch] index_url"
    )
    steps = [
        Step(
            kind="python",
            what=f"Python {plan.python}",
            why=f"[profile] python of {p.name}; uv provides it if the node lacks it",
        ),
        Step(
            kind="torch",
            what=f"torch=={torch.version} ({torch.backend}) from {torch.index_url}",
            why="\n".join([*torch.reasons, f"index base from {base_from}"]),
        )
        if torch.backend
        else Step(  # a plan for a project (make_plan's torch_required): none runs here
            kind="torch",
            what=f"none: no build of profile {p.name}'s torch runs on this node",
            why=f"{torch.error or 'no torch build runs on this node'}; a project that "
            "installs torch is refused for it, one without torch is installed without it",
        ),
    ]
    if plan.find_links:
        steps.append(
            Step(
                kind="index",
                what=f"wheelhouses: {' '.join(plan.find_links)}",
                why="[packages] find_links, $PIP_FIND_LINKS and $HPCENV_FIND_LINKS",
            )
        )
    if plan.torch_wheel:
        steps.append(
            Step(
                kind="torch",
                what=f"install torch from {plan.torch_wheel}",
                why=f"the wheelhouse has exactly torch {torch.version}+{torch.backend} "
                f"for {plan.arch} and Python {plan.python}",
            )
        )
    if plan.offline:
        steps.append(
            Step(
                kind="index",
                what="offline: wheelhouses and the uv cache only",
                why="[packages] offline = true",
            )
        )
    if plan.packages:
        steps.append(
            Step(
                kind="packages",
                what=" ".join(plan.packages),
                why=f"[packages] install of {p.name}, resolved together with torch "
                f"{torch.version} so nothing swaps it",
            )
        )
    what = {
        "wheel": f"flash-attn {fa.version} from {fa.wheel_url}",
        "build": (
            f"build flash-attn {fa.version}: FLASH_ATTN_CUDA_ARCHS={';'.join(fa.cuda_archs)} "
            f"MAX_JOBS={fa.max_jobs} NVCC_THREADS={fa.nvcc_threads}"
        ),
        "skip": "no flash-attn",
    }[fa.action]
    steps.append(Step(kind="flash-attn", what=what, why=fa.reason))
    if SM90A in plan.fixes:
        steps.append(_sm90a_step(p, facts, plan))
    if VENV_NCCL in plan.fixes:
        steps.append(
            Step(
                kind="fix",
                what="sitecustomize fix venv_nccl: the venv's libnccl.so.2 loads first in its "
                "Pythons",
                why="[job] nccl = 'venv': a system NCCL older than torch's must not be the one "
                "torch binds to; LD_PRELOAD would reach every process of the job (srun, Ray's "
                "daemons, other environments), this only the venv's Pythons",
            )
        )
    steps += [
        Step(kind="module", what=f"module load {m}", why="[modules] load") for m in plan.modules
    ]
    if plan.env:
        steps.append(
            Step(
                kind="env",
                what=_env_words(plan.env),
                why=f"{_recipe_words(p)}[env.always]: set in every job and probe",
            )
        )
    if plan.multi_node_env:
        steps.append(
            Step(
                kind="env",
                what=_env_words(plan.multi_node_env),
                why=f"{_recipe_words(p)}[env.multi_node]: only when a job spans several nodes",
            )
        )
    return tuple(steps)


def _recipe_words(p: Profile) -> str:
    """Where the variables come from when a network recipe gives some of them."""
    if not p.env.recipe:
        return ""
    return f"the {p.env.recipe} network recipe (knowledge/network.toml, with sources) + "


def _sm90a_step(p: Profile, facts: Facts, plan: Plan) -> Step:
    asked = "[fixes] sitecustomize asks for it" if SM90A in p.fixes.sitecustomize else ""
    hopper_arm = plan.arch == "aarch64" and "9.0" in facts.compute_capabilities
    node = "aarch64 torch lists sm_90a and this node has compute capability 9.0"
    why = "; ".join(x for x in (asked, node if hopper_arm else "") if x)
    why += (
        "; torch.utils.cpp_extension crashes on int('90a') when TORCH_CUDA_ARCH_LIST is "
        "unset (pytorch/pytorch#144037)"
    )
    arch_list = plan.fix_settings.get("TORCH_CUDA_ARCH_LIST")
    setting = (
        f"TORCH_CUDA_ARCH_LIST={arch_list} from the node's GPUs"
        if arch_list
        else "TORCH_CUDA_ARCH_LIST left alone (no GPU in the facts)"
    )
    return Step(kind="fix", what=f"sitecustomize fix sm90a: {setting}", why=why)


def _env_words(env: Mapping[str, str]) -> str:
    """``NAME=value ...`` for a plan step (secret-named values are masked where the plan
    is printed or written: ``redact.text`` masks ``NAME=value`` by name)."""
    return " ".join(f"{k}={v}" for k, v in env.items())


def require_torch(plan: Plan) -> None:
    """``NoCompatibleBuild`` (exit 3) unless the plan has a torch build that runs here.

    ``make_plan`` already refuses such a node (``torch_choice.choose_torch``); a plan made
    another way (changed with ``dataclasses.replace``, read back) is checked here, so
    every command that needs a runnable torch says the same thing with the same code.
    """
    raise_if_none(plan.torch, where=f"profile {plan.profile}")


__all__ = [
    "decide",
    "describe",
    "find_links",
    "find_torch_wheel",
    "make_plan",
    "require_torch",
    "vllm_warning",
]
