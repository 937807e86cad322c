"""The facts about one node, as data: frozen dataclasses and their JSON form.

``to_json`` writes the contract in docs/design.md (schema 1). ``from_json`` reads a
recorded file; every key is optional there (missing means unknown, never an
error) but a key that is present must have the right type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcenv.utils.errors import BadInput

SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    compute_capability: str | None  # "9.0"; None when unknown
    memory_mib: int | None = None
    ecc_uncorrected: int | None = None


@dataclass(frozen=True, kw_only=True)
class NvidiaFacts:
    driver_version: str
    cuda_driver_version: str | None  # highest CUDA the driver runs, e.g. "12.7"
    gpus: tuple[Gpu, ...] = ()
    source: str | None = None  # nvml, nvidia-smi, /proc/...; not part of the contract


@dataclass(frozen=True, kw_only=True)
class SlurmFacts:
    job_id: str | None = None
    nodelist: str | None = None
    hosts: tuple[str, ...] = ()
    nnodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    procid: int | None = None
    localid: int | None = None
    gpus_on_node: int | None = None
    gpus: str | None = None  # SLURM_GPUS / SLURM_GPUS_PER_NODE / SLURM_JOB_GPUS as given
    cuda_visible_devices: str | None = None
    partition: str | None = None


@dataclass(frozen=True, kw_only=True)
class NetworkFacts:
    libfabric_providers: tuple[str, ...] | None = None  # None: fi_info absent
    nccl_net_plugin: str | None = None  # path of the OFI/net plugin library found


@dataclass(frozen=True, kw_only=True)
class ScratchCandidate:
    """A place for node-local scratch (``hpcenv facts --scratch``)."""

    path: str
    found_as: str  # "$TMPDIR", "/local", "/srv/local*", ...
    mount_point: str | None
    fstype: str  # from /proc/mounts; "unknown" when no mount holds it
    free_gib: float | None
    local: bool  # False: a network filesystem (NFS, Lustre, GPFS, ...), never scratch


@dataclass(frozen=True, kw_only=True)
class Facts:
    schema: int = SCHEMA
    hostname: str | None = None
    arch: str | None = None  # platform.machine(): x86_64, aarch64
    glibc: str | None = None
    python: str | None = None
    cpus: int | None = None
    memory_gib: float | None = None
    nvidia: NvidiaFacts | None = None
    slurm: SlurmFacts | None = None
    network: NetworkFacts = field(default_factory=NetworkFacts)
    modules: tuple[str, ...] = ()
    #: node-local scratch candidates; None: not looked for (``hpcenv facts --scratch``)
    scratch: tuple[ScratchCandidate, ...] | None = None
    #: what could not be read and why (a helper that hangs), for people; may be empty
    warnings: tuple[str, ...] = ()
    source: str | None = None  # "this host" or the file it was read from; not serialised

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return self.nvidia.gpus if self.nvidia else ()

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        """Distinct known compute capabilities of the node's GPUs, sorted."""
        caps = {g.compute_capability for g in self.gpus if g.compute_capability}
        return tuple(sorted(caps, key=lambda c: tuple(int(x) for x in c.split("."))))


def to_json(facts: Facts) -> dict[str, Any]:
    """The ``hpcenv facts --json`` contract (schema 1, docs/design.md)."""
    nv = facts.nvidia
    sl = facts.slurm
    out: dict[str, Any] = {
        "schema": facts.schema,
        "hostname": facts.hostname,
        "arch": facts.arch,
        "glibc": facts.glibc,
        "python": facts.python,
        "cpus": facts.cpus,
        "memory_gib": facts.memory_gib,
        "nvidia": None
        if nv is None
        else {
            "driver_version": nv.driver_version,
            "cuda_driver_version": nv.cuda_driver_version,
            "gpus": [
                {
                    "index": g.index,
                    "name": g.name,
                    "compute_capability": g.compute_capability,
                    "memory_mib": g.memory_mib,
                    "ecc_uncorrected": g.ecc_uncorrected,
                }
                for g in nv.gpus
            ],
            "source": nv.source,
        },
        "slurm": None
        if sl is None
        else {
            "job_id": sl.job_id,
            "nodelist": sl.nodelist,
            "hosts": list(sl.hosts),
            "nnodes": sl.nnodes,
            "ntasks": sl.ntasks,
            "ntasks_per_node": sl.ntasks_per_node,
            "procid": sl.procid,
            "localid": sl.localid,
            "gpus_on_node": sl.gpus_on_node,
            "gpus": sl.gpus,
            "cuda_visible_devices": sl.cuda_visible_devices,
            "partition": sl.partition,
        },
        "network": {
            "libfabric_providers": None
            if facts.network.libfabric_providers is None
            else list(facts.network.libfabric_providers),
            "nccl_net_plugin": facts.network.nccl_net_plugin,
        },
        "modules": list(facts.modules),
        "warnings": list(facts.warnings),
    }
    if facts.scratch is not None:
        out["scratch"] = [
            {
                "path": c.path,
                "found_as": c.found_as,
                "mount_point": c.mount_point,
                "fstype": c.fstype,
                "free_gib": c.free_gib,
                "local": c.local,
            }
            for c in facts.scratch
        ]
    return out


#: The most digits of one number in a version, and the longest version, believed.
MAX_VERSION_DIGITS = 9
MAX_VERSION_CHARS = 64


class _Reader:
    """Typed access to one JSON object, naming the file and key on a wrong type."""

    def __init__(self, data: Mapping[str, Any], where: str, prefix: str = "") -> None:
        self.data, self.where, self.prefix = data, where, prefix

    def _bad(self, key: str, want: str) -> BadInput:
        value = self.data[key]
        return BadInput(
            f"{self.where}: key '{self.prefix}{key}' is {type(value).__name__} {value!r}, "
            f"expected {want}; fix the value or delete the key (missing keys mean unknown)"
        )

    def text(self, key: str) -> str | None:
        v = self.data.get(key)
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)  # "glibc": 2.35 is a common hand-edit
        raise self._bad(key, "a string")

    def version(self, key: str) -> str | None:
        """A version (a driver's, CUDA's, glibc's, a compute capability): its numbers are
        bounded before anything compares them (a 5,000-digit one is one line, not a
        traceback where ``int`` refuses it)."""
        v = self.text(key)
        longest = max((len(run) for run in re.findall(r"\d+", v or "")), default=0)
        if v is not None and (longest > MAX_VERSION_DIGITS or len(v) > MAX_VERSION_CHARS):
            raise BadInput(
                f"{self.where}: key '{self.prefix}{key}' is {v[:24]!r}... ({len(v)} characters), "
                f"not a version: its numbers have at most {MAX_VERSION_DIGITS} digits; fix the "
                "value or delete the key"
            )
        return v

    def machine(self, key: str) -> str | None:
        """A CPU arch as ``platform.machine()`` names it (a number is a typo, not an arch)."""
        v = self.data.get(key)
        if v is None or (isinstance(v, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", v)):
            return v
        raise self._bad(key, "a CPU arch name such as x86_64 or aarch64")

    def integer(self, key: str) -> int | None:
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._bad(key, "an integer")
        return v

    def number(self, key: str) -> float | None:
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._bad(key, "a number")
        return float(v)

    def obj(self, key: str) -> _Reader | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise self._bad(key, "an object")
        return _Reader(v, self.where, f"{self.prefix}{key}.")

    def strs(self, key: str) -> tuple[str, ...] | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings")
        return tuple(v)

    def objs(self, key: str) -> list[_Reader]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self._bad(key, "a list of objects")
        return [_Reader(x, self.where, f"{self.prefix}{key}[{i}].") for i, x in enumerate(v)]


def from_json(data: Any, where: str = "facts") -> Facts:
    """Facts from their JSON form; ``where`` names the source in error messages."""
    if not isinstance(data, dict):
        raise BadInput(f"{where}: expected a JSON object (the output of 'hpcenv facts --json')")
    r = _Reader(data, where)
    schema = r.integer("schema")
    schema = SCHEMA if schema is None else schema
    if schema < 1:
        raise BadInput(f"{where}: facts schema {schema} is not a schema version (1 or more)")
    if schema > SCHEMA:
        raise BadInput(f"{where}: facts schema {schema} is newer than this hpcenv reads ({SCHEMA})")
    nvidia = None
    nv = r.obj("nvidia")
    if nv is not None:
        driver = nv.version("driver_version")
        if driver is None:
            raise BadInput(f"{where}: 'nvidia' is given without 'nvidia.driver_version'")
        gpus = []
        for i, g in enumerate(nv.objs("gpus")):
            cap = g.version("compute_capability")
            if cap is not None and not _is_cap(cap):
                raise BadInput(
                    f"{where}: {g.prefix}compute_capability {cap!r} is not MAJOR.MINOR like '9.0'"
                )
            gpus.append(
                Gpu(
                    index=i if g.integer("index") is None else g.integer("index") or 0,
                    name=g.text("name") or "unknown GPU",
                    compute_capability=cap,
                    memory_mib=g.integer("memory_mib"),
                    ecc_uncorrected=g.integer("ecc_uncorrected"),
                )
            )
        nvidia = NvidiaFacts(
            driver_version=driver,
            cuda_driver_version=nv.version("cuda_driver_version"),
            gpus=tuple(gpus),
            source=nv.text("source") or where,
        )
    slurm = None
    s = r.obj("slurm")
    if s is not None:
        slurm = SlurmFacts(
            job_id=s.text("job_id"),
            nodelist=s.text("nodelist"),
            hosts=s.strs("hosts") or (),
            nnodes=s.integer("nnodes"),
            ntasks=s.integer("ntasks"),
            ntasks_per_node=s.integer("ntasks_per_node"),
            procid=s.integer("procid"),
            localid=s.integer("localid"),
            gpus_on_node=s.integer("gpus_on_node"),
            gpus=s.text("gpus"),
            cuda_visible_devices=s.text("cuda_visible_devices"),
            partition=s.text("partition"),
        )
    net = r.obj("network")
    network = (
        NetworkFacts()
        if net is None
        else NetworkFacts(
            libfabric_providers=net.strs("libfabric_providers"),
            nccl_net_plugin=net.text("nccl_net_plugin"),
        )
    )
    scratch = None
    if r.data.get("scratch") is not None:
        scratch = tuple(
            ScratchCandidate(
                path=c.text("path") or "",
                found_as=c.text("found_as") or "",
                mount_point=c.text("mount_point"),
                fstype=c.text("fstype") or "unknown",
                free_gib=c.number("free_gib"),
                local=c.data.get("local") is True,
            )
            for c in r.objs("scratch")
            if c.text("path")
        )
    return Facts(
        schema=schema,
        hostname=r.text("hostname"),
        arch=r.machine("arch"),
        glibc=r.version("glibc"),
        python=r.version("python"),
        cpus=r.integer("cpus"),
        memory_gib=r.number("memory_gib"),
        nvidia=nvidia,
        slurm=slurm,
        network=network,
        modules=r.strs("modules") or (),
        scratch=scratch,
        warnings=r.strs("warnings") or (),
        source=where,
    )


def _is_cap(text: str) -> bool:
    return re.fullmatch(r"[0-9]+\.[0-9]+", text) is not None  # ASCII digits only ("².0" is not)
