"""What ``hpcenv profile init`` and ``profile check`` read from a cluster, as data.

A survey is the login node's view: SLURM's partitions (GRES, MaxTime, node counts), the
GPU request syntax the cluster accepts, the modules Lmod offers; each part is None when
it could not be read, and ``problems`` says why (for the comments in the written
profile). The compute node's view is its ``Facts`` (with scratch candidates).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Gres:
    """One generic resource of a node: ``gpu:h100:4`` -> name gpu, type h100, count 4."""

    name: str
    type: str  # "" when untyped (gpu:4)
    count: int

    @classmethod
    def parse(cls, text: str) -> Gres | None:
        """``gpu:h100:4``, ``gpu:4``, ``gpu:h100:4(S:0-1)``; None for ``(null)`` or junk."""
        spec = text.split("(", 1)[0].strip()
        parts = spec.split(":")
        if not parts or not parts[0] or parts[0] == "null":
            return None
        count_text = parts[-1] if len(parts) > 1 else "1"
        if not count_text.isdigit():  # gpu:h100 (count 1 implied by some sites)
            return cls(name=parts[0], type=parts[1] if len(parts) > 1 else "", count=1)
        count = count_of(count_text)
        if count is None:  # ² or thousands of digits: junk
            return None
        kind = parts[1] if len(parts) == 3 else ""
        return cls(name=parts[0], type=kind, count=count)

    def __str__(self) -> str:
        return ":".join(x for x in (self.name, self.type, str(self.count)) if x)


#: The largest count SLURM output is read as (nodes, GPUs): more digits are junk.
MAX_COUNT_DIGITS = 9


def count_of(text: str) -> int | None:
    """A count SLURM prints (``TotalNodes=4``, ``gpu:h100:4``): ASCII digits, at most
    ``MAX_COUNT_DIGITS`` of them; None otherwise (``²`` is a digit to ``str.isdigit`` but
    not to ``int``; 5,000 digits are past Python's conversion limit)."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_COUNT_DIGITS:
        return None
    return int(text)


@dataclass(frozen=True, kw_only=True)
class Partition:
    name: str
    default: bool
    max_time: str  # as SLURM says it: "1-00:00:00", "UNLIMITED"
    nodes: int
    state: str  # UP, DOWN, ...
    gres: tuple[Gres, ...]  # distinct GRES of its nodes

    @property
    def gpus(self) -> tuple[Gres, ...]:
        return tuple(g for g in self.gres if g.name == "gpu")


@dataclass(frozen=True, kw_only=True)
class SlurmSurvey:
    partitions: tuple[Partition, ...]
    #: request syntaxes sbatch --test-only accepted on the partition surveyed, in
    #: hpcenv's order ("gpus-per-node", "gres", "gpus"); empty: none tried or none worked
    gpu_requests: tuple[str, ...] = ()
    surveyed: str = ""  # the partition the GPU syntax was tried on
    source: str = "sinfo/scontrol"

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def default(self) -> Partition | None:
        return next((p for p in self.partitions if p.default), None)


@dataclass(frozen=True, kw_only=True)
class Survey:
    slurm: SlurmSurvey | None  # None: no SLURM here (problems says why)
    modules: tuple[str, ...] | None  # `module -t avail`; None: no Lmod / MODULEPATH
    problems: tuple[str, ...] = ()  # what could not be read, and why


__all__ = ["Gres", "Partition", "SlurmSurvey", "Survey"]
