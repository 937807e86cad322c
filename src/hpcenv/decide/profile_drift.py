"""``hpcenv profile check``: a profile against the cluster today.

Profiles rot: a driver upgrade, a module removed or renamed, a partition renamed, GRES
reconfigured. Each drift names the profile's line, what it says, what the cluster says
now and the value to write; what could not be read is said as not checked, never as a
drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcenv.models.facts import Facts
from hpcenv.models.survey_model import Survey
from hpcenv.profile import schema


@dataclass(frozen=True, kw_only=True)
class Drift:
    section: str
    key: str
    line: int | None
    message: str  # what the profile says, what the cluster says, what to write

    def render(self, where: str) -> str:
        at = f":{self.line}" if self.line else ""
        return f"{where}{at}: [{self.section}] {self.key}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class Check:
    drifts: tuple[Drift, ...]
    not_checked: tuple[str, ...]
    checked: tuple[str, ...]


class _Found:
    def __init__(self, text: str) -> None:
        self.text = text
        self.drifts: list[Drift] = []
        self.not_checked: list[str] = []
        self.checked: list[str] = []

    def drift(self, section: str, key: str, message: str) -> None:
        line = schema.line_of(self.text, section, key) if self.text else None
        self.drifts.append(Drift(section=section, key=key, line=line, message=message))


def _driver(f: _Found, p: schema.Profile, facts: Facts | None) -> None:
    plat = p.platform
    if not plat.driver:
        return
    if facts is None:
        f.not_checked.append("driver and GPUs: no compute node's facts (--facts FILE or srun)")
        return
    f.checked.append("driver")
    nv = facts.nvidia
    if nv is None:
        f.drift("platform", "driver", f"= {plat.driver!r} but the node shows no NVIDIA driver")
        return
    if nv.driver_version != plat.driver:
        f.drift("platform", "driver", f"= {plat.driver!r} but the node runs "
                f"{nv.driver_version}: set driver = {nv.driver_version!r}")  # fmt: skip
    if plat.gpus_per_node and len(nv.gpus) != plat.gpus_per_node:
        f.drift("platform", "gpus_per_node", f"= {plat.gpus_per_node} but the node has "
                f"{len(nv.gpus)} GPU(s): set gpus_per_node = {len(nv.gpus)}")  # fmt: skip


def _has_module(want: str, available: tuple[str, ...]) -> bool:
    """``cuda/12.6`` exactly, or a bare ``cuda`` (Lmod's default version) naming any."""
    return want in available or any(m.startswith(want.rstrip("/") + "/") for m in available)


def _modules(f: _Found, p: schema.Profile, survey: Survey) -> None:
    if not p.modules.load:
        return
    if survey.modules is None:
        f.not_checked.append("modules: no Lmod module list here")
        return
    f.checked.append("modules")
    for want in p.modules.load:
        if _has_module(want, survey.modules):
            continue
        family = want.split("/", 1)[0]
        near = [m for m in survey.modules if m.split("/", 1)[0] == family]
        fix = f"available now: {', '.join(near)}" if near else "no module of that name is left"
        f.drift("modules", "load", f"names {want!r}, which 'module -t avail' no longer lists; "
                f"{fix}")  # fmt: skip


def _slurm(f: _Found, p: schema.Profile, survey: Survey) -> None:
    sl = survey.slurm
    if sl is None:
        f.not_checked.append("partition and GRES: SLURM could not be read here")
        return
    f.checked.append("partition")
    names = ", ".join(x.name for x in sl.partitions)
    part = sl.partition(p.slurm.partition) if p.slurm.partition else sl.default
    if p.slurm.partition and part is None:
        f.drift("slurm", "partition", f"= {p.slurm.partition!r} but SLURM has no such "
                f"partition now; it has {names}")  # fmt: skip
        return
    if part is None:
        return
    f.checked.append("GRES")
    gpus = part.gpus
    if p.slurm.gpu_request != "none" and not gpus:
        f.drift("slurm", "gpu_request", f"= {p.slurm.gpu_request!r} but the nodes of partition "
                f"{part.name} have no gpu GRES now: set gpu_request = 'none'")  # fmt: skip
        return
    types = sorted({g.type for g in gpus if g.type})
    if p.slurm.gres_type and gpus and p.slurm.gres_type not in types:
        now = ", ".join(str(g) for g in gpus)
        fix = f"set gres_type = {types[0]!r}" if types else "the GRES is untyped now"
        f.drift("slurm", "gres_type", f"= {p.slurm.gres_type!r} but partition {part.name}'s "
                f"GRES is {now}: {fix}")  # fmt: skip
    counts = sorted({g.count for g in gpus})
    want = p.platform.gpus_per_node
    if want and counts and want not in counts:
        f.drift("platform", "gpus_per_node", f"= {want} but partition {part.name}'s nodes "
                f"have gpu GRES counts {counts}: set gpus_per_node = {counts[-1]}")  # fmt: skip


def check(p: schema.Profile, text: str, survey: Survey, facts: Facts | None) -> Check:
    """Every drift of profile ``p`` (its TOML ``text``, for line numbers)."""
    f = _Found(text)
    _driver(f, p, facts)
    _modules(f, p, survey)
    _slurm(f, p, survey)
    return Check(drifts=tuple(f.drifts), not_checked=tuple(f.not_checked),
                 checked=tuple(f.checked))  # fmt: skip


__all__ = ["Check", "Drift", "check"]
