"""Prove a venv's CUDA stack is one stack: every CUDA library that ``libtorch_cuda.so`` and
each CUDA extension needs exists, and comes from a wheel of the intended CUDA major.

The cu12 and cu13 wheels of NCCL, cuDNN, cuSPARSELt and NVSHMEM install files at the same
paths (``nvidia/nccl/lib/libnccl.so.2``): a venv that held both majors at some point may
have lost the file (uninstalling one deletes what the other installed) or hold the other
major's copy. Nothing fails until the first ``import torch`` on a GPU node, or worse, the
loader falls back to an older system NCCL from the loaded modules. So, for each ELF
shared object under site-packages that needs a CUDA toolkit library (``DT_NEEDED``,
read with ``hpcenv.kit.elf``), each such library is resolved as the loader and torch
would: the object's ``DT_RUNPATH`` (else ``DT_RPATH``) with ``$ORIGIN`` expanded, then
the venv's ``nvidia/*/lib`` directories (torch preloads from them). The file found must
be listed in the ``RECORD`` of exactly one installed distribution, and that distribution
must be of the major of the stack the object's own distribution belongs to (``stacks``,
read by the build from what is installed: torch and what depends on it link torch's major,
a ``jax-cuda13-plugin`` beside a CUDA 12 torch links CUDA 13; an object whose stack is not
known must link one major): ``nvidia-nccl-cu12`` -> 12 by its suffix; CUDA 13's
unsuffixed wheels by where they install, ``nvidia/cu13/lib`` (their versions are the
libraries', not CUDA's: ``nvidia-cusparse 12.6.3.3`` ships with CUDA 13, measured on torch
2.13.0's wheels). System
directories are not searched: a CUDA library from outside the venv is the problem this
check exists to catch. The NVIDIA driver's own libraries (``libcuda.so.1``,
``libnvidia-ml.so.1``) are the node's and are not checked.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpcenv.kit import elf
from hpcenv.utils.names import canonicalize_name

#: Libraries of the CUDA toolkit and its math/communication libraries (not the driver's).
CUDA_LIB = re.compile(
    r"^lib(cudart|cublas|cublasLt|cudnn\w*|nccl|cusparse|cusparseLt|cufft|cufftw|curand|"
    r"cusolver|cusolverMg|nvrtc|nvrtc-builtins|nvJitLink|cupti|nvshmem\w*|cufile|"
    r"cufile_rdma|nvToolsExt|nvperf_\w+|npp\w*|nvjpeg|cudla)\.so(\.\d+)*$"
)
_SUFFIX = re.compile(r"-cu(\d+)$")
_CU_DIR = re.compile(r"^nvidia/cu(\d+)/")


@dataclass(frozen=True, kw_only=True)
class Resolved:
    needed: str  # the DT_NEEDED name, e.g. "libnccl.so.2"
    path: str | None  # where it was found, relative to site-packages (None: missing)
    owners: tuple[str, ...] = ()  # "nvidia-nccl-cu12 2.27.5"
    major: int | None = None


@dataclass(frozen=True, kw_only=True)
class LinkCheck:
    """The CUDA libraries each checked object needs, where they were found, what is wrong;
    ``major``: the one CUDA major every object was checked against (None: more than one,
    or one of no known stack),
    ``stacks``: each checked object's distribution and its stack ("jax-cuda13-plugin
    0.7.2: CUDA 13, pulls nvidia-cuda-runtime 13.0.96 (CUDA 13.0)")."""

    major: int | None
    objects: dict[str, tuple[Resolved, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    stacks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "cuda_major": self.major,
            "ok": self.ok,
            "problems": list(self.problems),
            "objects": {
                obj: {
                    r.needed: (
                        f"{r.path} ({', '.join(r.owners) or 'no wheel'})" if r.path else None
                    )
                    for r in libs
                }
                for obj, libs in self.objects.items()
            },
            "stacks": dict(self.stacks),
        }


def owners(site: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """``{path relative to site-packages: [distribution, ...]}`` from every ``RECORD``, and
    ``{distribution: version}``."""
    files: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for record in sorted(site.glob("*.dist-info/RECORD")):
        stem = record.parent.name.removesuffix(".dist-info")
        name, _, version = stem.partition("-")
        dist = canonicalize_name(name)
        versions[dist] = version
        try:
            rows = list(csv.reader(record.read_text(errors="replace").splitlines()))
        except csv.Error:
            continue
        for row in rows:
            if row:
                files.setdefault(os.path.normpath(row[0]), []).append(dist)
    return files, versions


def dist_major(dist: str, path: str) -> int | None:
    """The CUDA major of the file ``path`` (relative to site-packages) that distribution
    ``dist`` installed: its ``-cuNN`` suffix, else the ``nvidia/cuNN/`` directory it lies
    in; None when neither says (not judged)."""
    m = _SUFFIX.search(dist)
    if m:
        return int(m.group(1))
    m = _CU_DIR.match(path)
    return int(m.group(1)) if m else None


def _search_dirs(obj: Path, site: Path, fallback: list[Path]) -> list[Path]:
    try:
        entries = elf.runpath(obj)
    except (OSError, ValueError):
        entries = []
    dirs = []
    for entry in entries:
        expanded = entry.replace("${ORIGIN}", str(obj.parent)).replace("$ORIGIN", str(obj.parent))
        if os.path.isabs(expanded):
            dirs.append(Path(os.path.normpath(expanded)))
    return dirs + [d for d in fallback if d not in dirs]


def _cuda_needed(path: Path) -> list[str]:
    try:
        return [n for n in elf.needed(path) if CUDA_LIB.match(n)]
    except (OSError, ValueError):  # not ELF (a linker script, a truncated file)
        return []


def shared_objects(site: Path) -> list[Path]:
    """ELF objects under site-packages that need a CUDA library: ``libtorch_cuda.so`` and
    the CUDA extensions (the ``nvidia``/``cuda`` runtime wheels themselves excluded)."""
    out = []
    for path in sorted(site.rglob("*.so*")):
        rel = path.relative_to(site).parts
        if rel[0] in ("nvidia", "cuda") or rel[0].endswith(".dist-info") or not path.is_file():
            continue
        if path.suffix != ".so" and ".so." not in path.name:
            continue
        if _cuda_needed(path):
            out.append(path)
    return out


def check(
    site: Path,
    major: int | None = None,
    *,
    stacks: Mapping[str, tuple[int, str] | None] | None = None,
) -> LinkCheck:
    """Check every object of :func:`shared_objects`: against CUDA ``major`` when given, else
    against the stack of the distribution that installed it (``stacks``: distribution ->
    (CUDA major, how it is known), None where unknown)."""
    files, versions = owners(site)
    fallback = sorted(p for p in site.glob("nvidia/*/lib") if p.is_dir())
    objects: dict[str, tuple[Resolved, ...]] = {}
    problems: list[str] = []
    said: dict[str, str] = {}
    against: set[int | None] = set()
    for obj in shared_objects(site):
        name = str(obj.relative_to(site))
        dist = next(iter(files.get(os.path.normpath(name), [])), None)
        stack = (major, "") if major is not None else (stacks or {}).get(dist or "")
        who = f"{name} ({dist} {versions.get(dist, '?')})" if dist else name
        if dist and stack and stack[1]:
            said[f"{dist} {versions.get(dist, '?')}"] = f"CUDA {stack[0]}, {stack[1]}"
        against.add(stack[0] if stack else None)
        found = tuple(_resolve(obj, site, fallback, files, versions))
        objects[name] = found
        problems += _problems(who if major is None else name, found, stack)
    one = next(iter(against)) if len(against) == 1 else major  # every object: one major
    return LinkCheck(major=one, objects=objects, problems=tuple(problems), stacks=said)


def _resolve(
    obj: Path,
    site: Path,
    fallback: list[Path],
    files: Mapping[str, list[str]],
    versions: Mapping[str, str],
) -> list[Resolved]:
    """Each CUDA library ``obj`` needs, found as the loader would, with its owners."""
    dirs = _search_dirs(obj, site, fallback)
    found = []
    for needed in _cuda_needed(obj):
        hit = next((d / needed for d in dirs if (d / needed).exists()), None)
        if hit is None:
            found.append(Resolved(needed=needed, path=None))
            continue
        try:
            rel = os.path.normpath(os.path.relpath(hit, site))
        except ValueError:
            rel = ".."
        if rel.startswith(".."):  # outside the venv: named by its own path
            found.append(Resolved(needed=needed, path=str(hit)))
            continue
        dists = files.get(rel, [])
        label = tuple(f"{d} {versions.get(d, '?')}" for d in dists)
        majors = {dist_major(d, rel) for d in dists} - {None}
        got = next(iter(majors)) if len(majors) == 1 else None
        found.append(Resolved(needed=needed, path=rel, owners=label, major=got))
    return found


def _problems(name: str, found: tuple[Resolved, ...], stack: tuple[int, str] | None) -> list[str]:
    """What is wrong with one object's libraries, against its stack's major (None: the
    libraries must agree on one major among themselves)."""
    problems = []
    for r in found:
        if r.path is None:
            problems.append(
                f"{name} needs {r.needed}, which is missing (searched its RUNPATH and "
                "nvidia/*/lib in the venv)"
            )
        elif os.path.isabs(r.path):
            problems.append(f"{name} loads {r.needed} from {r.path}, outside the venv")
        elif not r.owners:
            problems.append(f"{name} needs {r.needed}: {r.path} is installed by no wheel")
        elif len(r.owners) > 1:
            problems.append(
                f"{name} needs {r.needed}: {r.path} is claimed by {' and '.join(r.owners)} "
                "(two wheels wrote the same file)"
            )
        elif stack is not None and r.major is not None and r.major != stack[0]:
            problems.append(
                f"{name} needs {r.needed}: {r.path} belongs to CUDA {r.major} "
                f"({r.owners[0]}), not CUDA {stack[0]}"
                + (f" (its stack: {stack[1]})" if stack[1] else "")
            )
    majors = sorted({r.major for r in found if r.major is not None})
    if stack is None and len(majors) > 1:
        libs = ", ".join(f"{r.needed} (CUDA {r.major})" for r in found if r.major is not None)
        problems.append(f"{name} links libraries of two CUDA majors: {libs}")
    return problems


__all__ = ["CUDA_LIB", "LinkCheck", "Resolved", "check", "dist_major", "owners", "shared_objects"]
