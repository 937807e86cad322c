"""Every CUDA package of an install set judged against the node, not only torch (pure).

- vLLM against the minimum compute capability of its release (``knowledge/vllm.toml``,
  read from each sdist's CMakeLists.txt);
- flash-attn: 2.x needs compute capability 8.0 (``knowledge/packages.toml``), its FA3
  kernels (``flash-attn-3``, ``flash_attn_3``, a 3.x release) 9.0;
- any package whose version label or name names a CUDA major (``+cu130``,
  ``+cu.13.0.torch.2.11``, ``nvidia-nccl-cu13``, ``nixl-cu13``, ``cupy-cuda12x``): the
  driver must run that major, and it must be torch's major (one CUDA major per venv).

The wheels torch itself pulls (``nvidia-*``) are folded into one line: torch's own verdict
already says whether its CUDA runs here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from hpcenv import knowledge

_LABEL_MAJOR = re.compile(r"(?:^|[.+_-])cu\.?(\d{2,3})(?!\d)")
_NAME_MAJOR = re.compile(r"(?:^|[._-])cu(?:da)?(\d{2})(?:x)?(?=$|[._-])")
_FLASH_ATTN = (
    "flash-attn",
    "flash-attn-3",
    "flash-attention",
    "flash-attn-cu12",
    "flash-attn-cu13",
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


def judge(
    versions: Mapping[str, Sequence[str]],
    node: Node,
    know: knowledge.Knowledge | None = None,
) -> tuple[Verdict, ...]:
    """A verdict per CUDA package in ``versions`` (canonical name -> versions); nothing
    is judged on a node without GPUs."""
    if not node.caps:
        return ()
    know = know or knowledge.load()
    out: list[Verdict] = []
    torch_deps: list[str] = []
    for name, found in sorted(versions.items()):
        for version in found:
            if name.startswith("nvidia-") and node.torch_cuda is not None:
                major = cuda_major(name, version)
                if major is not None and major != int(node.torch_cuda.split(".")[0]):
                    torch_deps.append(name)
                continue
            verdict = _one(name, version, node, know)
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
    return tuple(out)


def _one(name: str, version: str, node: Node, know: knowledge.Knowledge) -> Verdict | None:
    problems: list[str] = []
    needs: list[str] = []
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
    major = cuda_major(name, version)
    how = ""
    if major is None and (implied := implied_major(name, version, node, know)):
        major, how = implied[0], f" ({implied[1]})"
    if major is not None:
        needs.append(f"CUDA {major}")
        driver_major = int(node.driver_cuda.split(".")[0]) if node.driver_cuda else None
        if driver_major is not None and major > driver_major:
            problems.append(
                f"built for CUDA {major}{how}, the driver runs CUDA <= {node.driver_cuda}"
            )
        elif node.torch_cuda and major != int(node.torch_cuda.split(".")[0]):
            problems.append(f"built for CUDA {major}{how}, torch here is a CUDA {node.torch_cuda} "
                            "build (one CUDA major per environment)")  # fmt: skip
    if not needs:
        return None
    if problems:
        return Verdict(name=name, version=version, ok=False, why="; ".join(problems))
    return Verdict(name=name, version=version, ok=True, why=f"runs here ({', '.join(needs)})")


def _public(version: str) -> str | None:
    try:
        return Version(version).public
    except InvalidVersion:
        return None


__all__ = [
    "BY_NAME",
    "Node",
    "Verdict",
    "cuda_major",
    "implied_major",
    "judge",
]
