"""``hpcenv profile init``: a profile written from what the cluster says about itself.

Inputs: a compute node's facts (recorded, or read through srun), the login node's survey
(SLURM partitions, GRES, the GPU request syntax sbatch accepts, Lmod's modules) and
hpcenv's knowledge (the torch build the node runs, the network recipe for its libfabric
providers). Output: profile TOML in which every value carries a comment naming where it
came from, and everything that could not be determined is a comment naming the key to
set and why. The text is validated (``profile.parse``) before anyone writes it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from hpcenv.decide.torch_choice import TorchWish, choose_torch
from hpcenv.facts import lmod
from hpcenv.knowledge import network, variant_cuda
from hpcenv.models.facts import Facts
from hpcenv.models.survey_model import Partition, Survey
from hpcenv.models.walltime import parse as parse_walltime
from hpcenv.profile import schema

TORCH_SPEC = ">=2.6"
#: Probes every profile runs; GPU and network ones are added from the facts.
BASE_PROBES = ("imports", "torch")


def _value(v: str | int | float | bool | tuple[str, ...]) -> str:
    """A TOML value (JSON's string escapes are TOML's basic-string escapes)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(json.dumps(x) for x in v) + "]"
    return json.dumps(v)


def _comment(text: str) -> str:
    """One comment line's text: control characters (remote text) made harmless."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


@dataclass
class Draft:
    """Profile sections as lines, in order; ``unknown`` collects what is left to set."""

    sections: dict[str, list[str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    def set(self, section: str, key: str, value: str | int | float | bool | tuple[str, ...],
            source: str) -> None:  # fmt: skip
        self.sections.setdefault(section, []).append(
            f"{key} = {_value(value)}  # {_comment(source)}"
        )

    def note(self, section: str, text: str) -> None:
        self.sections.setdefault(section, []).append(f"# {_comment(text)}")

    def todo(self, section: str, key: str, what: str) -> None:
        self.note(section, f"NOT DETERMINED: set {key} = ... ({what})")
        self.unknown.append(f"[{section}] {key}: {what}")

    def text(self, header: list[str]) -> str:
        out = [f"# {_comment(h)}" for h in header]
        for section, lines in self.sections.items():
            out += ["", f"[{section}]", *lines]
        return "\n".join(out) + "\n"


@dataclass(frozen=True, kw_only=True)
class Init:
    text: str
    unknown: tuple[str, ...]  # "[section] key: why", for the command to print
    recipe: str
    partition: str | None
    backend: str | None


def _platform(d: Draft, facts: Facts, src: str) -> None:
    if facts.arch in ("x86_64", "aarch64"):
        d.set("platform", "arch", facts.arch, src)
    else:
        d.todo("platform", "arch", f"the facts name no known CPU arch ({facts.arch or 'none'})")
    nv = facts.nvidia
    if nv is None or not nv.gpus:
        d.todo("platform", "driver", f"{src} shows no NVIDIA driver or GPU")
        return
    gpu = nv.gpus[0]
    d.set("platform", "gpu", gpu.name, f"{src}: GPU 0 (read by {nv.source or 'nvidia'})")
    if gpu.compute_capability:
        d.set("platform", "compute_capability", gpu.compute_capability, src)
    d.set("platform", "gpus_per_node", len(nv.gpus), f"{src}: GPUs on the node")
    if gpu.memory_mib:
        d.set("platform", "gpu_memory_gib", round(gpu.memory_mib / 1024, 1), src)
    d.set("platform", "driver", nv.driver_version, f"{src}: NVIDIA driver")


def _network(d: Draft, facts: Facts, src: str) -> network.Recipe:
    providers = facts.network.libfabric_providers
    recipe = network.pick(providers)
    shown = ", ".join(providers) if providers else "none (fi_info absent)"
    why = f"{src}: libfabric providers {shown}"
    d.set("platform", "libfabric_provider", recipe.provider, why)
    d.set("platform", "nccl_net", recipe.nccl_net, f"the {recipe.name} recipe")
    d.set("env", "recipe", recipe.name, f"{why} -> {recipe.description} (knowledge/network.toml)")
    for var, what in recipe.to_set.items():
        d.todo("env.always", var, what)
    return recipe


def _torch(d: Draft, facts: Facts, src: str) -> str | None:
    if facts.arch not in ("x86_64", "aarch64"):
        d.todo("torch", "version", "no CPU arch in the facts: hpcenv cannot choose a torch build")
        return None
    choice = choose_torch(facts, TorchWish(spec=TORCH_SPEC)).choice
    if not choice.backend or not choice.version:
        d.todo("torch", "version", f"no torch build runs on {src}: {choice.error}")
        return None
    why = choice.reasons[0] if choice.reasons else ""
    d.set("torch", "version", f"=={choice.version}", f"the newest release that runs ({why})")
    d.set("torch", "backend", "auto", f"resolves to {choice.backend} on {src}")
    d.note("torch", "a torch already on the node is not read: hpcenv facts never imports torch")
    return choice.backend


def _python(d: Draft, facts: Facts, src: str) -> None:
    m = re.match(r"(\d+)\.(\d+)", facts.python or "")
    if m:
        d.set("profile", "python", f"{m[1]}.{m[2]}", f"{src}: the node's Python {facts.python}")
    else:
        d.todo("profile", "python", "the facts name no Python")


def _version_key(module: str) -> tuple[tuple[int, ...], str]:
    """``cuda/12.10`` after ``cuda/12.9``: the numbers of the version part, then the text."""
    version = module.rsplit("/", 1)[-1]
    return tuple(int(n) for n in re.findall(r"\d+", version)), module


def _pick_module(
    available: tuple[str, ...], fragment: str, version: str = "", *, without: str = ""
) -> str | None:
    """The newest module whose name holds ``fragment`` (not ``without``); with
    ``version``, that exact version, else the newest of its major."""
    found = [m for m in lmod.matching(available, fragment) if not without or without not in m]
    if version:
        exact = [m for m in found if m.rsplit("/", 1)[-1] == version]
        major = version.split(".", maxsplit=1)[0] + "."
        same = [m for m in found if m.rsplit("/", 1)[-1].startswith(major)]
        found = exact or same
    return max(found, key=_version_key) if found else None


def _modules(d: Draft, survey: Survey, backend: str | None, recipe: network.Recipe) -> None:
    if survey.modules is None:
        d.todo("modules", "load", "no Lmod module list could be read here; name the CUDA, "
               "NCCL and network plugin modules")  # fmt: skip
        return
    chosen: list[tuple[str, str]] = []
    cuda = variant_cuda(backend) if backend else None
    if cuda:
        m = _pick_module(survey.modules, "cuda", cuda)
        if m:
            exact = m.rsplit("/", 1)[-1] == cuda
            why = (
                f"CUDA {cuda} for torch's {backend} build"
                if exact
                else (
                    f"no CUDA {cuda} module: the newest of CUDA {cuda.split('.')[0]}.x, torch's "
                    f"{backend} major (nvcc for extensions must match it)"
                )
            )
            chosen.append((m, why))
        else:
            d.note("modules", f"no CUDA {cuda.split('.')[0]}.x module in 'module -t avail'")
    nccl = _pick_module(survey.modules, "nccl", without="ofi")
    if nccl:
        chosen.append((nccl, "NCCL"))
    plugin = next((m for f in recipe.modules if (m := _pick_module(survey.modules, f))), None)
    if plugin:  # the plugin module brings its libfabric
        chosen.append((plugin, f"the {recipe.name} recipe needs {', '.join(recipe.modules)}"))
    elif recipe.modules:
        d.note("modules", f"NOT DETERMINED: no {' or '.join(recipe.modules)} module in "
               "'module -t avail'; add the module that provides the OFI plugin")  # fmt: skip
    for name, why in chosen:
        d.note("modules", f"{name}: {why} (module -t avail)")
    d.set("modules", "load", tuple(c[0] for c in chosen), "Lmod: module -t avail")


def _gpu_request(d: Draft, part: Partition, requests: tuple[str, ...]) -> None:
    if not part.gpus:
        d.set("slurm", "gpu_request", "none", f"partition {part.name}: its nodes have no gpu GRES")
        return
    gres = ", ".join(str(g) for g in part.gpus)
    if not requests:
        d.todo("slurm", "gpu_request", f"sbatch --test-only accepted no GPU request on "
               f"{part.name} (GRES {gres})")  # fmt: skip
        return
    how = requests[0]
    d.set("slurm", "gpu_request", how, f"sbatch --test-only -p {part.name} accepted "
          f"{', '.join(requests)}; GRES {gres}")  # fmt: skip
    typed = next((g.type for g in part.gpus if g.type), "")
    if how == "gres" or typed:
        d.set("slurm", "gres_type", typed or "gpu", f"partition {part.name}: GRES {gres}")


def _slurm(d: Draft, survey: Survey, partition: str | None) -> Partition | None:
    sl = survey.slurm
    if sl is None:
        d.todo(
            "slurm", "gpu_request", "SLURM could not be read here: see 'could not read' at the top"
        )
        return None
    part = sl.partition(sl.surveyed) if sl.surveyed else None
    if part is None:
        d.todo("slurm", "partition", "SLURM has no default partition; pass --partition")
        return None
    names = ", ".join(p.name for p in sl.partitions)
    why = "the cluster's default partition" if part.default and not partition else "--partition"
    d.set("slurm", "partition", part.name, f"{why} (scontrol show partition: {names})")
    _gpu_request(d, part, sl.gpu_requests)
    for p in sl.partitions:  # every partition, to choose another with --partition
        gres = ", ".join(str(g) for g in p.gres) or "no GRES"
        mark = " (default)" if p.default else ""
        d.note("slurm", f"partition {p.name}{mark}: {p.nodes} node(s), {gres}, MaxTime "
               f"{p.max_time}, state {p.state}")  # fmt: skip
    limit = _minutes(part.max_time)
    for key, default in (("time", "00:20:00"), ("build_time", "02:00:00")):
        if limit is not None and limit < (_minutes(default) or 0):
            d.set("slurm", key, _hms(limit), f"partition {part.name}: MaxTime {part.max_time}")
    return part


def _minutes(text: str) -> int | None:
    try:
        secs = parse_walltime(text)
    except ValueError:
        return None
    return None if secs == float("inf") else int(secs // 60)


def _hms(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def _scratch(d: Draft, facts: Facts, src: str) -> None:
    if facts.scratch is None:
        d.todo("job", "scratch", f"the {src} hold no scratch candidates (record them with "
               "'hpcenv facts --json --scratch' on a compute node)")  # fmt: skip
        return
    for c in facts.scratch:
        if not c.local:
            d.note("job", f"not scratch: {c.path} is on {c.fstype} ({c.mount_point}), a "
                   "network filesystem")  # fmt: skip
    local = [c for c in facts.scratch if c.local]
    if not local:
        d.todo("job", "scratch", f"{src}: no node-local filesystem among the candidates")
        return
    best = max(local, key=lambda c: c.free_gib or 0.0)
    free = f"{best.free_gib} GiB free" if best.free_gib is not None else "free space unknown"
    d.set("job", "scratch", best.path, f"{src}: {best.fstype} on {best.mount_point}, {free} "
          f"(found as {best.found_as})")  # fmt: skip


def _probes(d: Draft, facts: Facts, recipe: network.Recipe) -> None:
    run = list(BASE_PROBES)
    if facts.gpus:
        run += ["gpu-health", "nccl"]
        if recipe.nccl_net == "ofi":
            run.append("ofi")
    d.set("probes", "run", tuple(run), "the GPUs and the recipe: what to prove on this cluster")


def draft(name: str, facts: Facts, survey: Survey, *, partition: str | None = None) -> Init:
    """The profile for ``facts`` and ``survey`` (see the module docstring), validated."""
    src = "node facts"
    d = Draft()
    d.set("profile", "name", name, "hpcenv profile init")
    gpu = facts.gpus[0].name if facts.gpus else "no GPU"
    desc = f"{name}: {facts.arch or '?'} {gpu} x{len(facts.gpus)}"
    d.set("profile", "description", desc, "written by hpcenv profile init")
    _python(d, facts, src)
    _platform(d, facts, src)
    recipe = _network(d, facts, src)
    backend = _torch(d, facts, src)
    caps = facts.compute_capabilities
    if caps and min(tuple(map(int, c.split("."))) for c in caps) >= (8, 0):
        d.set("flash_attn", "mode", "auto", f"compute capability {', '.join(caps)} >= 8.0")
    _modules(d, survey, backend, recipe)
    part = _slurm(d, survey, partition)
    _scratch(d, facts, src)
    _probes(d, facts, recipe)
    header = [
        f"Written by 'hpcenv profile init {name}'. Every value names its source; lines",
        "marked NOT DETERMINED name what to set. Next: hpcenv doctor " + name,
        f"node facts: {facts.source or 'this host'}",
        *[f"could not read: {p}" for p in survey.problems],
    ]
    text = d.text(header)
    schema.parse(text, f"{name}.toml (as written)", default_name=name)  # a bug if it fails
    return Init(text=text, unknown=tuple(d.unknown), recipe=recipe.name,
                partition=part.name if part else None, backend=backend)  # fmt: skip


__all__ = ["Init", "draft"]
