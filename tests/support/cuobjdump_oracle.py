"""NVIDIA's cuobjdump as the oracle of the fatbin tests: its output parsed into entries, and
the real PyPI libraries and tools from ``cuda_artifacts`` (a missing download skips
locally and fails in CI through ``conftest.require``)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

from hpcenv.kit import fatbin
from hpcenv.kit.coverage import parse_arch
from support import cuda_artifacts, require


def tool(name: str) -> Path:
    """``cuobjdump`` or ``nvcc`` from PyPI's 13.5.37 wheels."""
    try:
        path = cuda_artifacts.cuobjdump() if name == "cuobjdump" else cuda_artifacts.nvcc()
    except cuda_artifacts.Unavailable as exc:
        require(name, False, str(exc))
        raise
    return path


def real(key: str) -> Path:
    """A real CUDA library from a PyPI wheel (``cuda_artifacts.LIBRARIES``)."""
    try:
        return cuda_artifacts.library(key)
    except cuda_artifacts.Unavailable as exc:
        require("cuda-libraries", False, str(exc))
        raise


#: (kind in cuobjdump's words, "sm_XY[a|f]", "[major,minor]", compressed)
Row = tuple[str, str, str, bool]
_KIND = {"elf": "sass", "ptx": "ptx", "nvvm": "lto"}


def cuobjdump_rows(lib: Path) -> tuple[list[Row], int, str]:
    """Every entry ``cuobjdump -all FILE`` prints, its exit code and its stderr."""
    done = subprocess.run(
        [str(tool("cuobjdump")), "-all", str(lib)], capture_output=True, text=True, timeout=600
    )
    rows: list[Row] = []
    for block in re.split(r"\n\s*\n", done.stdout):
        head = re.search(r"Fatbin (elf|ptx|nvvm) code:", block)
        if not head:
            continue
        arch = re.search(r"arch = (sm_\w+)", block)
        version = re.search(r"code version = (\[\d+,\d+\])", block)
        assert arch and version, block
        compressed = any(line.strip() == "compressed" for line in block.splitlines())
        rows.append((_KIND[head.group(1)], arch.group(1), version.group(1), compressed))
    return rows, done.returncode, done.stderr


def seen_by_cuobjdump(code: fatbin.CudaCode) -> fatbin.CudaCode:
    """The part of ``code`` cuobjdump lists: the fatbin sections (or a raw fatbin), not the
    containers embedded in other data sections."""
    return code.only((*fatbin.SECTIONS, fatbin.RAW))


def our_rows(code: fatbin.CudaCode) -> list[Row]:
    out = []
    for e in seen_by_cuobjdump(code).entries:
        major, minor, suffix = parse_arch(e.arch)
        cv = "[" + e.version.replace(".", ",") + "]"
        out.append((e.kind, f"sm_{major}{minor}{suffix}", cv, e.compression is not None))
    return out


def cuobjdump_lists(lib: Path) -> tuple[Counter[str], Counter[str]]:
    """Per-arch counts of ``-all --list-elf`` and ``-all --list-ptx`` (names end .sm_XY.*)."""
    counts = []
    for flag in ("--list-elf", "--list-ptx"):
        out = subprocess.run(
            [str(tool("cuobjdump")), "-all", flag, str(lib)],
            capture_output=True, text=True, timeout=600,
        ).stdout  # fmt: skip
        counts.append(Counter(re.findall(r"\.(sm_\w+?)\.(?:cubin|ptx)$", out, re.M)))
    return counts[0], counts[1]


def as_listed(archs: dict[str, int], kind: str) -> Counter[str]:
    """Our counts in ``--list-elf``/``--list-ptx`` names: a family (f) cubin is listed
    without its suffix there (``cuobjdump -all`` itself prints ``arch = sm_100f``)."""
    out: Counter[str] = Counter()
    for arch, n in archs.items():
        major, minor, suffix = parse_arch(arch)
        if kind == "sass" and suffix == "f":
            suffix = ""
        out[f"sm_{major}{minor}{suffix}"] += n
    return out


def wheel_of(key: str) -> Path:
    lib = cuda_artifacts.BY_KEY[key]
    try:
        return cuda_artifacts.wheel(lib.project, lib.version, lib.tag)
    except cuda_artifacts.Unavailable as exc:
        require("cuda-libraries", False, str(exc))
        raise
