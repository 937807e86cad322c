"""What every GPU package of an install set needs of the node, judged from what it pulls and
what it is called, for any framework (torch, JAX, CuPy, TensorFlow ...) (pure).

- the CUDA runtime wheels a package pulls (``nvidia-cuda-runtime-cu12 12.9.79``,
  ``nvidia-cuda-runtime 13.5.37``, ``cuda-toolkit``), attributed through the dependency
  graph (a uv.lock's edges, uv's ``# via`` lines) to the package that brings them
  (:func:`bringers`: ``jax[cuda13]``'s runtime is ``jax-cuda13-plugin``'s, not torch's):
  that CUDA release needs a driver (``cuda.toml``: outright, else its major's
  minor-version floor; NVIDIA's cuda-compat named on data center GPUs) and a GPU its
  toolkit compiles for (``[[major]] min_compute_capability``: CUDA 13 has no code for 7.0);
- any package whose version label or name names a CUDA major (``+cu130``,
  ``+cu.13.0.torch.2.11``, ``nvidia-nccl-cu13``, ``nixl-cu13``, ``cupy-cuda12x``,
  ``jax-cuda13-pjrt``): the driver must run that major, and it must be torch's major (one
  CUDA major per venv). A library's own major is not CUDA's (``nvidia-cudnn-cu12 9.x`` is
  CUDA 12, cuDNN 9): only the name's ``cuNN`` and the runtime's version are read;
- what a package's own documentation adds (``packages.toml`` ``[[gpu_package]]``: JAX's
  CUDA plugins, driver and compute capability, and the extra that runs instead);
- vLLM against the minimum compute capability of its release (``knowledge/vllm.toml``,
  read from each sdist's CMakeLists.txt);
- flash-attn: 2.x needs compute capability 8.0 (``knowledge/packages.toml``), its FA3
  kernels (``flash-attn-3``, ``flash_attn_3``, a 3.x release) 9.0.

- for each package of a uv.lock's set, whether any of its wheels installs on the node (CPU
  arch, manylinux glibc, the set's Python: ``models.wheel_fit``) or an sdist can be built
  (:func:`platform_verdict`), GPUs or not;
- the stack each installed distribution belongs to (:func:`stacks`): what the build's
  one-CUDA-stack proof checks each object's libraries against.

NVIDIA's own wheels (``nvidia-*``, ``cuda-*``) are judged through the package that brings
them; those torch pulls are folded into one line: torch's own verdict already says whether
its CUDA runs here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge
from hpcenv.models import wheel_fit
from hpcenv.models.facts import Facts
from hpcenv.utils import answers

_LABEL_MAJOR = re.compile(r"(?:^|[.+_-])cu\.?(\d{2,3})(?!\d)")
_NAME_MAJOR = re.compile(r"(?:^|[._-])cu(?:da)?(\d{2})(?:x)?(?=$|[._-])")
_FLASH_ATTN = (
    "flash-attn",
    "flash-attn-3",
    "flash-attention",
    "flash-attn-cu12",
    "flash-attn-cu13",
)


#: Wheels whose version is the CUDA release a package pulling them was built for, in order
#: of trust (``cuda-toolkit`` is CUDA 13's metapackage: ``cuda-toolkit[cudart] 13.0.2``).
RUNTIMES = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
    "cuda-toolkit",
)

#: CUDA packages judged by name alone when no version is known (an unresolved file):
#: flash-attn's compute-capability floor holds for every 2.x (its README); a 3.x is named so.
BY_NAME = frozenset({*_FLASH_ATTN, "vllm"})


@dataclass(frozen=True, kw_only=True)
class Verdict:
    name: str
    version: str
    ok: bool
    why: str  # what it needs, and what the node has

    def line(self) -> str:
        return f"{self.name} {self.version}: {self.why}"


@dataclass(frozen=True, kw_only=True)
class Node:
    """What the packages are judged against."""

    caps: tuple[str, ...]  # the GPUs' compute capabilities ("7.0")
    driver_cuda: str | None  # the highest CUDA the driver runs ("12.9")
    torch_cuda: str | None = None  # the torch build's CUDA ("12.6"); None: CPU or unknown
    torch_version: str | None = None  # the torch installed beside ("2.10.0+cu126")
    arch: str | None = None  # the node's CPU arch (PyPI's builds differ per arch)
    driver: str | None = None  # the driver's version ("575.57.08"); None: only driver_cuda
    gpu_names: tuple[str, ...] = ()  # as NVML names them (cuda-compat: data center GPUs)
    glibc: str | None = None  # the node's glibc ("2.35"); None: unknown (every manylinux fits)
    python: str | None = None  # the set's Python ("3.12"); None: wheels' fit not judged


@dataclass(frozen=True, kw_only=True)
class Files:
    """What a package's release offers to install from (a uv.lock's ``wheels`` and ``sdist``)."""

    wheels: tuple[str, ...] = ()  # wheel file names
    sdist: bool = False


def node_of(
    facts: Facts,
    *,
    torch_cuda: str | None = None,
    torch_version: str | None = None,
    arch: str | None = None,
    python: str | None = None,
) -> Node:
    """The node in ``facts`` as every command judges a set against it (``audit``, and
    ``plan``/``lock``/``build --project``'s model): its GPUs, driver, arch and glibc, beside
    the torch installed with the set (``torch_cuda``/``torch_version``; None: no torch) and
    the set's Python (``python``: its wheels are judged for it)."""
    nv = facts.nvidia
    return Node(
        caps=tuple(g.compute_capability for g in facts.gpus if g.compute_capability),
        driver_cuda=nv.cuda_driver_version if nv else None,
        torch_cuda=torch_cuda,
        torch_version=torch_version,
        arch=arch or facts.arch,
        driver=nv.driver_version if nv else None,
        gpu_names=tuple(g.name for g in facts.gpus),
        glibc=facts.glibc,
        python=python,
    )


def cuda_major(name: str, version: str) -> int | None:
    """The CUDA major a package names in its version label or its name (None: none)."""
    local = ""
    if "+" in version:  # only a version with a ``+`` has a local label (~300 in a lock)
        try:
            local = Version(version).local or ""
        except InvalidVersion:
            local = ""
    for text, pattern in ((local, _LABEL_MAJOR), (name, _NAME_MAJOR)):
        m = pattern.search(text)
        if m:
            digits = m.group(1)
            return int(digits[:-1]) if len(digits) == 3 else int(digits)
    return None


def implied_major(
    name: str, version: str, node: Node, know: knowledge.Knowledge
) -> tuple[int, str] | None:
    """(CUDA major, how it is known) of a vLLM with a plain version: PyPI's vLLM wheels are
    built against one torch (its ``torch==`` pin, the torch installed beside it) as PyPI
    publishes it for the arch; that build's CUDA major is vLLM's. None when unknown (a
    labelled version, PyPI's torch is CPU-only on the arch, or the release is not known)."""
    if name != "vllm" or cuda_major(name, version) is not None:
        return None
    if not node.torch_version or not node.arch:
        return None
    public = _public(node.torch_version)
    release = know.release_of(public) if public else None
    plat = release.platforms.get(node.arch) if release else None
    if plat is None or not plat.pypi or plat.pypi == "cpu":
        return None
    cuda = knowledge.variant_cuda(plat.pypi)
    if cuda is None:
        return None
    how = f"PyPI's plain vLLM is built against PyPI's torch {public} for {node.arch} ({plat.pypi})"
    return int(cuda.split(".")[0]), how


def _cap(text: str) -> tuple[int, int]:
    return knowledge.cap_key(text)


def _below(caps: Sequence[str], minimum: str) -> list[str]:
    return sorted({c for c in caps if _cap(c) < _cap(minimum)}, key=_cap)


def is_carrier(name: str) -> bool:
    """NVIDIA's own wheels (``nvidia-*``, ``cuda-*``): judged through who brings them."""
    return name.startswith(("nvidia-", "cuda-"))


def runtime_cuda(name: str, version: str) -> str | None:
    """The CUDA release (``"12.9"``) a runtime wheel of :data:`RUNTIMES` is, else None."""
    if name not in RUNTIMES:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}" if len(v.release) > 1 else None


def _parents(edges: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for name, deps in edges.items():
        for dep in deps:
            parents.setdefault(dep, []).append(name)
    return parents


def bringers(
    edges: Mapping[str, Sequence[str]],
    target: str,
    parents: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, ...]:
    """The packages that bring ``target`` into the set: its nearest dependents that are
    not NVIDIA's own wheels, found through ``edges`` (name -> the names it depends on)
    upwards (``jax-cuda13-plugin`` -> ``nvidia-cuda-runtime``; ``torch`` ->
    ``cuda-toolkit`` -> ``nvidia-cuda-runtime``: torch)."""
    parents = _parents(edges) if parents is None else parents
    found: set[str] = set()
    seen = {target}
    todo = [target]
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent in seen:
                continue
            seen.add(parent)
            if is_carrier(parent):
                todo.append(parent)
            else:
                found.add(parent)
    return tuple(sorted(found))


def brought(
    versions: Mapping[str, Sequence[str]], edges: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, str]]:
    """``{package: (runtime wheel, its version)}``: the CUDA runtime each package brings
    (the most trusted of :data:`RUNTIMES` first). Without edges, or for a runtime nothing
    brings (a line of its own), the runtime is its own bringer."""
    out: dict[str, tuple[str, str]] = {}
    parents = _parents(edges) if edges else {}
    for runtime in RUNTIMES:
        for version in versions.get(runtime, ()):
            if runtime_cuda(runtime, version) is None:
                continue
            for name in (bringers(edges, runtime, parents) if edges else ()) or (runtime,):
                out.setdefault(name, (runtime, version))
    return out


def gpu_stack(
    versions: Mapping[str, Sequence[str]], know: knowledge.Knowledge | None = None
) -> bool:
    """Whether a set holds anything :func:`judge` judges (a CUDA runtime wheel, a package
    naming a CUDA major, flash-attn, vLLM, a ``[[gpu_package]]``): a set without torch is
    then audited by these alone."""
    know = know or knowledge.load()
    return any(
        name in RUNTIMES
        or name in BY_NAME
        or know.gpu_package(name) is not None
        or any(cuda_major(name, v) is not None for v in found)
        for name, found in versions.items()
    )


def torch_side(edges: Mapping[str, Sequence[str]] | None) -> set[str] | None:
    """What torch pulls, through the dependency edges (the lock's, or uv's ``# via``
    lines); None: no edges, so every NVIDIA wheel is taken to be torch's."""
    return None if edges is None else reachable(edges, ("torch",))


def reachable(edges: Mapping[str, Sequence[str]], roots: Iterable[str]) -> set[str]:
    """``roots`` and every package they pull, through ``edges`` (name -> its dependencies)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += edges.get(name, ())
    return seen


@dataclass(frozen=True, kw_only=True)
class Stack:
    """The CUDA major one installed distribution's objects must link, and how it is known."""

    major: int
    how: str  # "torch 2.9.1+cu126 (CUDA 12)", "pulls nvidia-cuda-runtime 13.0.96 (CUDA 13.0)"


def _own_major(name: str, version: str) -> tuple[int, str] | None:
    """(CUDA major, how) a distribution says itself: a runtime wheel's version, else its
    name's or version label's ``cuNN``."""
    if cuda := runtime_cuda(name, version):
        return int(cuda.split(".")[0]), f"{name} {version} (CUDA {cuda})"
    major = cuda_major(name, version)
    return (major, f"{name} {version} (CUDA {major})") if major is not None else None


def stacks(
    versions: Mapping[str, str], edges: Mapping[str, Sequence[str]]
) -> dict[str, Stack | None]:
    """The CUDA stack each distribution of an installed set belongs to (``versions``: name
    -> version; ``edges``: name -> the names it depends on, as installed), read from the
    artifacts, never from a profile: its own runtime version, name or label, else the one
    stack of the dependencies that have one (``torchext`` -> ``torch`` 2.9.1 ->
    ``nvidia-cuda-runtime-cu12`` 12.8.90: 12; ``jax-cuda13-plugin`` -> ``nvidia-cuda-runtime``
    13.0.96: 13). None where its dependencies' stacks disagree (a package that pulls both);
    absent: no CUDA at all."""
    out: dict[str, Stack | None] = {}
    done: set[str] = set()

    def visit(name: str, path: frozenset[str]) -> Stack | None:
        if name in done:
            return out.get(name)
        if own := _own_major(name, versions[name]):
            found: Stack | None = Stack(major=own[0], how=own[1])
        else:
            below = [
                s for d in edges.get(name, ())
                if d in versions and d not in path and (s := visit(d, path | {d})) is not None
            ]  # fmt: skip
            majors = {s.major for s in below}
            if not below:
                done.add(name)
                return None
            first = below[0]
            how = first.how if first.how.startswith("pulls ") else f"pulls {first.how}"
            found = Stack(major=first.major, how=how) if len(majors) == 1 else None
        out[name] = found
        done.add(name)
        return found

    for name in sorted(versions):
        visit(name, frozenset({name}))
    return out


def judge(
    versions: Mapping[str, Sequence[str]],
    node: Node,
    know: knowledge.Knowledge | None = None,
    *,
    edges: Mapping[str, Sequence[str]] | None = None,
    declared: Sequence[tuple[str, str]] = (),
    files: Mapping[str, Files] | None = None,
) -> tuple[Verdict, ...]:
    """A verdict per GPU package in ``versions`` (canonical name -> versions; torch itself
    is judged by its own audit); ``edges`` (name -> the names it depends on, as installed
    on the node) attribute each CUDA runtime wheel to the package that brings it;
    ``declared`` are CUDA releases a file states for the whole environment (conda's
    ``("cuda-version", "13.1")``), each judged as that CUDA. Nothing is judged on a node
    without GPUs but the wheels: ``files`` (name -> what its release offers, a uv.lock's)
    are each judged for the node's CPU arch, glibc and the set's Python, GPUs or not
    (:func:`platform_verdict`)."""
    placed = tuple(
        v
        for name, found in sorted((files or {}).items())
        if (v := platform_verdict(name, (versions.get(name) or ("",))[0], found, node))
    )
    if not node.caps:
        return placed
    know = know or knowledge.load()
    runtimes = brought(versions, edges)
    if node.torch_cuda is not None:  # torch's runtime is judged by torch's own verdict
        runtimes = {n: r for n, r in runtimes.items() if n == "torch" or not is_carrier(n)}
    pulled_by_torch = torch_side(edges)
    parents = _parents(edges) if edges else {}
    out: list[Verdict] = []
    torch_deps: list[str] = []
    for name, found in sorted(versions.items()):
        for version in found:
            if is_carrier(name) and name not in runtimes:
                if node.torch_cuda is not None and (
                    pulled_by_torch is None or name in pulled_by_torch
                ):
                    major = cuda_major(name, version)
                    if major is not None and major != int(node.torch_cuda.split(".")[0]):
                        torch_deps.append(name)
                    continue
                if bringers(edges, name, parents) if edges else runtimes:
                    continue  # judged through the package that brings it, or the runtime
            verdict = _one(name, version, node, know, runtimes.get(name))
            if verdict is not None:
                out.append(verdict)
    for name, release in declared:
        verdict = _one(name, release, node, know, (name, release), cuda=release)
        if verdict is not None:
            out.append(verdict)
    if torch_deps:
        out.append(
            Verdict(
                name="nvidia-*",
                version=f"{len(torch_deps)} wheels",
                ok=False,
                why=f"{', '.join(torch_deps[:4])}{', ...' if len(torch_deps) > 4 else ''} are "
                f"for another CUDA major than torch's {node.torch_cuda}",
            )
        )
    return (*placed, *out)


def platform_verdict(name: str, version: str, files: Files, node: Node) -> Verdict | None:
    """Whether any wheel of a package installs on the node (``models.wheel_fit``: CPU arch,
    manylinux glibc against the node's, the set's Python), or an sdist can be built there:
    a verdict only where none does (not ok: the package, its newest wheel tag, for the
    node's arch where it has any, and the node's are named) or only the sdist does (ok:
    built on the node); None when a wheel fits, nothing is offered (a path, an sdist only)
    or the node's arch or Python is unknown."""
    if not files.wheels or not node.arch or not node.python:
        return None
    if any(wheel_fit.wheel_fits(w, python=node.python, arch=node.arch, glibc=node.glibc)
           for w in files.wheels):  # fmt: skip
        return None
    here, why, newest = answers.remembered(
        "platform_words",
        (files.wheels, node.arch, node.glibc, node.python),
        lambda: _platform_words(files.wheels, node.arch or "", node.glibc, node.python or ""),
    )
    said = f"no wheel installs on this node ({here}): {why}; its newest wheel tag is {newest}"
    if files.sdist:
        return Verdict(name=name, version=version, ok=True,
                       why=f"{said}; built from its sdist on the node")  # fmt: skip
    return Verdict(name=name, version=version, ok=False, why=f"{said}, and it has no sdist")


def _platform_words(
    wheels: tuple[str, ...], arch: str, glibc: str | None, python: str
) -> tuple[str, str, str]:
    """(the node's tag, why none of ``wheels`` installs there, their newest tag): plain
    words, kept for a lock's next audit (``utils/answers``: it then imports no packaging)."""
    tags = [t for w in wheels for t in _tags(w)]
    py = "".join(python.split(".")[:2])
    here = f"cp{py}-{wheel_fit.platforms(arch, glibc)[0]}"
    if glibc is None:
        here = f"cp{py}-manylinux_*_{arch}"
    mine = [
        t for t in tags
        if t.endswith(f"_{arch}") and t.split("-")[-1].startswith(("manylinux", "linux_"))
    ]  # fmt: skip
    need = wheel_fit.min_glibc(mine) if mine else None
    newest = max(mine or tags, key=lambda t: (wheel_fit.min_glibc([t]) or (0, 0), t))
    if not mine:
        why = f"none of its {len(wheels)} wheels is for {arch}"
    elif need and glibc and need > (wheel_fit.glibc_key(glibc) or need):
        why = f"its {arch} wheels need glibc >= {need[0]}.{need[1]}, the node has {glibc}"
    else:
        why = f"its {arch} wheels are for another Python"
    return here, why, newest


def _tags(wheel: str) -> list[str]:
    """The tags of a wheel file name, expanded (``py3-none-manylinux2010_x86_64``)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return sorted(str(t) for t in parse_wheel_filename(wheel)[3])
    except InvalidWheelFilename:
        return []


def _one(
    name: str,
    version: str,
    node: Node,
    know: knowledge.Knowledge,
    runtime: tuple[str, str] | None = None,
    *,
    cuda: str | None = None,
) -> Verdict | None:
    problems: list[str] = []
    needs: list[str] = []
    fixes: list[str] = []
    # only vllm's and flash-attn's versions are read: the rest are not parsed (~300 in a lock)
    public = _public(version) if name in BY_NAME else None
    if name == "vllm" and public is not None:
        rng = know.vllm_min_cc(public)
        if rng is not None:
            needs.append(f"compute capability >= {rng.min_compute_capability}")
            if low := _below(node.caps, rng.min_compute_capability):
                problems.append(
                    f"needs compute capability >= {rng.min_compute_capability} "
                    f"({rng.source}), the GPUs are {', '.join(low)}"
                )
    if name in _FLASH_ATTN or name == "flash-attn-3":
        fa3 = name == "flash-attn-3" or (public is not None and Version(public).major >= 3)
        floor = "9.0" if fa3 else know.flash_attn.min_compute_capability
        what = "FA3 (Hopper kernels)" if fa3 else "flash-attn 2"
        needs.append(f"compute capability >= {floor}")
        if low := _below(node.caps, floor):
            problems.append(f"{what} needs compute capability >= {floor}, the GPUs are "
                            f"{', '.join(low)}")  # fmt: skip
    row = know.gpu_package(name)
    cuda = cuda or (runtime_cuda(*runtime) if runtime else None)
    major = cuda_major(name, version)
    how = ""
    if major is None and (implied := implied_major(name, version, node, know)):
        major, how = implied[0], f" ({implied[1]})"
    if cuda is not None and runtime is not None:
        how = f" (pulls {runtime[0]} {runtime[1]})" if runtime[0] != name else ""
        major = major if major is not None else int(cuda.split(".")[0])
    if major is None and row is not None:
        major = row.cuda_major
    if major is not None:
        needs.append(f"CUDA {cuda or major}{_compat_note(cuda, node, know)}")
        problems += _driver_problems(
            major, cuda, how=how, node=node, know=know, row=row, fixes=fixes
        )
        cc_floor, why = _cc_floor(major, know, row)
        if cc_floor is not None:
            needs.append(f"compute capability >= {cc_floor}")
            if low := _below(node.caps, cc_floor):
                problems.append(
                    f"needs compute capability >= {cc_floor} ({why}), the GPUs are {', '.join(low)}"
                )
                if row is not None and row.fix:
                    fixes.append(row.fix)
    if not needs:
        return None
    if problems:
        fix = f"; fix: {' or '.join(dict.fromkeys(fixes))}" if fixes else ""
        return Verdict(name=name, version=version, ok=False, why="; ".join(problems) + fix)
    return Verdict(name=name, version=version, ok=True, why=f"runs here ({', '.join(needs)})")


def _driver_problems(
    major: int,
    cuda: str | None,
    *,
    how: str,
    node: Node,
    know: knowledge.Knowledge,
    row: knowledge.GpuPackage | None,
    fixes: list[str],
) -> list[str]:
    """What a build for CUDA ``major`` (release ``cuda`` where a runtime wheel says it)
    lacks on the node's driver, and beside its torch; fixes named go to ``fixes``."""
    built = f"built for CUDA {cuda or major}{how}"
    need = _min_driver(major, know, row)
    driver = _driver_key(node.driver)
    driver_major = int(node.driver_cuda.split(".")[0]) if node.driver_cuda else None
    below = driver is not None and need is not None and driver < knowledge.driver_key(need)
    if below or (driver_major is not None and major > driver_major):
        runs = f"the driver runs CUDA <= {node.driver_cuda}" if node.driver_cuda else ""
        if node.driver:
            runs = f"{runs} ({node.driver})" if runs else f"this node has driver {node.driver}"
        wants = f", needs driver >= {need}" if need and node.driver else ""
        if row is not None and row.fix:
            fixes.append(row.fix)
        if need and node.driver:
            fixes.append(f"a driver >= {need}")
        if cuda and node.gpu_names and all(know.forward_compat.covers(g) for g in node.gpu_names):
            cmaj, cmin = knowledge.cuda_key(cuda)
            fixes.append(f"NVIDIA's {know.forward_compat.package.format(major=cmaj, minor=cmin)} "
                         "(forward compatibility on data center GPUs)")  # fmt: skip
        return [f"{built}{wants}, {runs}" if wants else f"{built}, {runs}"]
    if node.torch_cuda and major != int(node.torch_cuda.split(".")[0]):
        return [f"{built}, torch here is a CUDA {node.torch_cuda} build "
                "(one CUDA major per environment)"]  # fmt: skip
    return []


def _compat_note(cuda: str | None, node: Node, know: knowledge.Knowledge) -> str:
    """ " under minor-version compatibility ..." when the driver is below the release's own
    minimum (it runs, without PTX JIT of newer PTX), else ""."""
    tk = know.toolkit(cuda) if cuda else None
    driver = _driver_key(node.driver)
    if driver is None or tk is None:
        return ""
    if tk.min_driver is None:
        return " under minor-version compatibility (no minimum driver published for it)"
    if driver < knowledge.driver_key(tk.min_driver):
        return f" under minor-version compatibility (driver >= {tk.min_driver} runs it outright)"
    return ""


def _min_driver(
    major: int, know: knowledge.Knowledge, row: knowledge.GpuPackage | None
) -> str | None:
    """The lowest driver a CUDA ``major`` build runs on at all: the package's documented
    minimum, else the major's minor-version floor (cuda.toml)."""
    if row is not None:
        return row.min_driver
    mm = know.major_minimum(major)
    return mm.min_driver if mm else None


def _cc_floor(
    major: int, know: knowledge.Knowledge, row: knowledge.GpuPackage | None
) -> tuple[str | None, str]:
    """The oldest GPU a CUDA ``major`` build (of the package in ``row``) runs on, and why."""
    mm = know.major_minimum(major)
    floors = []
    if mm is not None and mm.min_compute_capability:
        floors.append((mm.min_compute_capability, f"CUDA {major} compiles for no older GPU"))
    if row is not None:
        floors.append((row.min_compute_capability, f"{row.names[0]}'s documentation"))
    if not floors:
        return None, ""
    return max(floors, key=lambda f: _cap(f[0]))


def _driver_key(driver: str | None) -> Version | None:
    if not driver:
        return None
    try:
        return knowledge.driver_key(driver)
    except InvalidVersion:
        return None


def _public(version: str) -> str | None:
    try:
        return Version(version).public
    except InvalidVersion:
        return None


__all__ = [
    "BY_NAME",
    "RUNTIMES",
    "Files",
    "Node",
    "Stack",
    "Verdict",
    "bringers",
    "brought",
    "cuda_major",
    "gpu_stack",
    "implied_major",
    "is_carrier",
    "judge",
    "node_of",
    "platform_verdict",
    "reachable",
    "runtime_cuda",
    "stacks",
    "torch_side",
]
