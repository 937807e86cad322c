"""The one rule for "does this GPU code run on a GPU of compute capability X.Y".

Standard library only (see ``hpcenv.kit``). Archs are written ``"X.Y"`` with an optional
suffix: ``"9.0a"`` (architecture-specific), ``"10.0f"`` (family-specific); ``sm_90a`` and
``compute_100f`` spellings are read too.

SASS (a cubin built for ``sm_XY``) runs on a GPU of compute capability ``cap`` when:

- plain ``X.Y``: the GPU has the same major X and a minor at or above Y (CUDA C++
  Programming Guide, "Binary Compatibility": a cubin generated for compute capability
  X.y only executes on devices of compute capability X.z where z >= y);
- ``X.Ya``: only on exactly X.Y (Programming Guide, "Feature Availability":
  architecture-specific features are not guaranteed to be available, or may change, on
  subsequent compute architectures; measured here: nvcc marks such an entry with its own
  fatbin flag, see ``hpcenv.kit.fatbin``);
- ``X.Yf``: on the same family, X.Z with Z >= Y (NVIDIA technical blog "NVIDIA Blackwell
  and NVIDIA CUDA 12.9 Introduce Family-Specific Architecture Features": ``sm_100f`` code
  runs on 10.0 and 10.3, ``sm_120f`` on 12.0 and 12.1; hpcenv takes the family to be the
  major).

PTX (``compute_XY``) is compiled by the driver at load time (JIT) for a GPU at or above
X.Y, of any later major; ``compute_XYf`` only within the family (X.Z, Z >= Y) and
``compute_XYa`` only on exactly X.Y. PTX only counts when the driver can JIT it
(``ptx_jit``): the driver must be at least as new as the toolkit that wrote the PTX
(the PTX ISA version in the fatbin entry says which; the caller decides).

Library-level rule (``library_archs``): a fatbin holds one entry per arch per translation
unit (a fatbin container), so entry counts tell the archs a library was *built for* from
a handful of special kernels. An arch is **full** coverage when both hold:

1. it has at least ``FULL_SHARE`` (half) of the entries of the best-covered arch of its
   own major: ``libtorch_cuda.so`` 2.13.0 has 449 entries each for 7.5, 8.0, 8.6, 9.0,
   10.0 and 12.0 but 1 for 8.9, 4 for 9.0a, 59 for 10.0a and 10.3f, 1 for 12.0a and 12.1a;
   those are partial;
2. it is one of the library's main archs (at least half the entries of the best arch
   overall), or it is built in a translation unit of its own, one holding none of the main
   archs. A generation whose only entries ride along in units built for the main archs
   is special kernels (a library built for 7.5 and 8.0 with one unit also built for 9.0a);
   a generation with units of its own is real: ``libcusparseLt.so`` 0.8.1 has 560 entries
   for 10.0 and only 41 for 8.0, but its Ampere kernels are units of their own.

Otherwise the arch is **partial**: its kernels exist, but the library's other kernels do
not run on a GPU that only this arch covers. Rules apply to SASS and PTX separately.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

#: An arch is full coverage when it has at least this share of the best arch's entries.
FULL_SHARE = 0.5

_ARCH = re.compile(r"^(?:sm_|compute_|lto_)?(\d+)\.?(\d)([af]?)$")
_CAP = re.compile(r"^(\d+)\.(\d+)$")
_SUFFIX_RANK = {"": 0, "f": 1, "a": 2}


def parse_arch(arch: str) -> tuple[int, int, str]:
    """``"9.0a"``, ``"sm_90a"``, ``"compute_90a"`` -> (9, 0, "a"); ValueError otherwise."""
    m = _ARCH.match(arch.strip())
    if not m:
        raise ValueError(f"{arch!r} is not a GPU arch (expected X.Y, X.Ya, X.Yf or sm_XY)")
    return int(m.group(1)), int(m.group(2)), m.group(3)


def parse_cap(cap: str) -> tuple[int, int]:
    """``"9.0"`` -> (9, 0); ValueError otherwise."""
    m = _CAP.match(cap.strip())
    if not m:
        raise ValueError(f"{cap!r} is not a compute capability (expected X.Y, e.g. 9.0)")
    return int(m.group(1)), int(m.group(2))


def arch_key(arch: str) -> tuple[int, int, int]:
    """Sort key: by version, then plain < f < a."""
    major, minor, suffix = parse_arch(arch)
    return major, minor, _SUFFIX_RANK[suffix]


def sorted_archs(archs: Iterable[str]) -> list[str]:
    return sorted(set(archs), key=arch_key)


def sm_name(arch: str) -> str:
    """``"9.0a"`` -> ``"sm_90a"``."""
    major, minor, suffix = parse_arch(arch)
    return f"sm_{major}{minor}{suffix}"


def sass_runs(arch: str, cap: str) -> bool:
    """Whether SASS built for ``arch`` runs on a GPU of compute capability ``cap``."""
    major, minor, suffix = parse_arch(arch)
    c_major, c_minor = parse_cap(cap)
    if suffix == "a":
        return (major, minor) == (c_major, c_minor)
    return major == c_major and minor <= c_minor  # plain and family: same major, minor <= cap


def ptx_runs(arch: str, cap: str) -> bool:
    """Whether PTX for ``arch`` can be JIT-compiled for a GPU of ``cap`` (driver permitting)."""
    major, minor, suffix = parse_arch(arch)
    c_major, c_minor = parse_cap(cap)
    if suffix == "a":
        return (major, minor) == (c_major, c_minor)
    if suffix == "f":
        return major == c_major and minor <= c_minor
    return (major, minor) <= (c_major, c_minor)


def covers(cap: str, sass: Iterable[str], ptx: Iterable[str], *, ptx_jit: bool) -> str | None:
    """How code runs on a GPU of compute capability ``cap``: ``"sm_86"`` (the closest SASS
    that runs there), ``"PTX 8.0"`` (the newest PTX the driver can JIT for it, only when
    ``ptx_jit``), or None: "no kernel image is available for execution on the device"."""
    runs = [a for a in sass if sass_runs(a, cap)]
    if runs:
        return sm_name(max(runs, key=arch_key))
    if ptx_jit:
        jit = [a for a in ptx if ptx_runs(a, cap)]
        if jit:
            return "PTX " + max(jit, key=arch_key)
    return None


def library_archs(
    units: Iterable[Iterable[str]], share: float = FULL_SHARE
) -> tuple[list[str], list[str]]:
    """(full, partial) archs of one kind (SASS or PTX) from the archs of each translation
    unit's entries, one iterable per unit (see the module docstring)."""
    sets = [list(u) for u in units]
    counts = Counter(a for u in sets for a in u)
    best = max(counts.values(), default=0)
    main = {a for a, n in counts.items() if n >= share * best}
    best_of_major: dict[int, int] = {}
    for a, n in counts.items():
        major = parse_arch(a)[0]
        best_of_major[major] = max(best_of_major.get(major, 0), n)
    standalone = {a for u in sets if not main.intersection(u) for a in u}
    full = [
        a
        for a, n in counts.items()
        if n >= share * best_of_major[parse_arch(a)[0]] and (a in main or a in standalone)
    ]
    return sorted_archs(full), sorted_archs(a for a in counts if a not in full)


__all__ = [
    "FULL_SHARE",
    "arch_key",
    "covers",
    "library_archs",
    "parse_arch",
    "parse_cap",
    "ptx_runs",
    "sass_runs",
    "sm_name",
    "sorted_archs",
]
