"""Which GPU code the binaries carry: a shared library, a wheel, a venv or site-packages.

``hpcenv archs`` prints it; ``hpcenv audit VENV`` asks :func:`check_venv` whether every
installed distribution with CUDA code has code for each GPU of the node. The reading is
``hpcenv.kit.fatbin`` (headers only, no CUDA toolkit, no GPU, no import of the library);
the rule is ``hpcenv.kit.coverage`` (SASS per compute capability, PTX the driver can JIT,
full vs partial archs of a library).

- A wheel is read through ``zipfile``: only its ``.so`` members, one at a time, each
  streamed to a temporary file and scanned there (never the whole wheel unpacked).
- A venv or site-packages directory: every shared library under site-packages, grouped by
  the distribution whose ``*.dist-info/RECORD`` lists it (``None`` when none does).
- A PTX entry carries its PTX ISA version; ``knowledge/ptx_isa.toml`` maps it to the CUDA release
  that introduced it, and the driver can JIT it when it supports that release (the facts'
  ``cuda_driver_version``, else the newest toolkit ``hpcenv.knowledge`` says the driver
  runs outright).
- Some distributions ship one library per CUDA release and load the one matching torch
  (bitsandbytes: ``libbitsandbytes_cuda118.so`` ... ``_cuda132.so``). Files of one
  directory whose names differ only in such a CUDA token are *alternatives*: only the one
  for torch's CUDA is judged (all of them when torch's CUDA is unknown: then one that
  runs is enough).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from functools import cache
from pathlib import Path
from typing import Any

from hpcenv import knowledge
from hpcenv.kit import coverage
from hpcenv.kit.elf import ElfError
from hpcenv.kit.fatbin import CudaCode, FatbinError, scan
from hpcenv.knowledge import tables
from hpcenv.models.facts import Facts
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput

#: a shared library's file name: libx.so, libx.so.12, _C.cpython-311-x86_64-linux-gnu.so
SHARED = re.compile(r"\.so(?:\.\d+)*$")
#: the CUDA-release token of per-CUDA alternatives: _cuda118, _cu126, -cuda12
_CUDA_TOKEN = re.compile(r"(?<=[_.-])cu(?:da)?(\d{2,3})(?=[_.-])")


@dataclass(frozen=True, kw_only=True)
class Distribution:
    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True, kw_only=True)
class FileCode:
    """The GPU code of one shared library."""

    path: str  # file path; for a wheel member, the member's path inside the wheel
    code: CudaCode
    dist: Distribution | None = None
    wheel: str | None = None  # the wheel file a member was read from
    shown: str = ""  # short name for people: relative to site-packages, or the member

    @property
    def label(self) -> str:
        return self.shown or Path(self.path).name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.wheel:
            out["wheel"] = self.wheel
        out["distribution"] = self.dist.name if self.dist else None
        out["version"] = self.dist.version if self.dist else None
        out.update(self.code.to_json())
        return out


@dataclass(frozen=True, kw_only=True)
class Scan:
    """What one or more paths carry: files with GPU code, and files that could not be read."""

    files: tuple[FileCode, ...] = ()
    errors: tuple[tuple[str, str], ...] = ()  # (path, one-line reason)
    libraries: int = 0  # shared libraries read (with or without GPU code)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [f.to_json() for f in self.files],
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "libraries_read": self.libraries,
        }

    def __add__(self, other: Scan) -> Scan:
        return Scan(
            files=self.files + other.files,
            errors=self.errors + other.errors,
            libraries=self.libraries + other.libraries,
        )


# --- reading ----------------------------------------------------------------------------


def _read_one(path: Path, shown: str) -> CudaCode:
    try:
        return scan(path)
    except (ElfError, FatbinError) as exc:
        raise BadInput(f"{exc} (hpcenv archs reads 64-bit little-endian ELF libraries)") from exc
    except OSError as exc:
        raise BadInput(f"{shown}: cannot read ({exc.strerror or exc})") from exc


def scan_file(path: Path) -> Scan:
    """One shared library (or object, or raw fatbin) named on the command line."""
    code = _read_one(path, str(path))
    files = (FileCode(path=str(path), code=code),) if not code.empty else ()
    return Scan(files=files, libraries=1)


def _wheel_dist(zf: zipfile.ZipFile) -> Distribution | None:
    for name in zf.namelist():
        if name.count("/") == 1 and name.endswith(".dist-info/METADATA"):
            return _metadata(zf.read(name).decode("utf-8", "replace"))
    return None


def _metadata(text: str) -> Distribution | None:
    headers = HeaderParser().parsestr(text, headersonly=True)
    name, version = headers.get("Name"), headers.get("Version")
    return Distribution(name=name, version=version) if name and version else None


def scan_wheel(path: Path) -> Scan:
    """Every shared-library member of a wheel, each streamed to a temporary file."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise BadInput(f"{path}: not a wheel (not a zip archive: {exc})") from exc
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror or exc})") from exc
    files: list[FileCode] = []
    errors: list[tuple[str, str]] = []
    count = 0
    with zf, fsio.work_dir("hpcenv-archs-") as tmp:  # a SIGKILLed one's: removed next run
        dist = _wheel_dist(zf)
        for info in zf.infolist():
            if info.is_dir() or not SHARED.search(info.filename):
                continue
            count += 1
            local = Path(tmp) / "member.so"
            try:
                with zf.open(info) as src, open(local, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                code = scan(local)
            except (ElfError, FatbinError) as exc:
                errors.append((info.filename, str(exc).replace(str(local), info.filename)))
                continue
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                errors.append((info.filename, f"cannot extract from {path.name}: {exc}"))
                continue
            finally:
                local.unlink(missing_ok=True)
            if not code.empty:
                files.append(
                    FileCode(
                        path=info.filename, code=code, dist=dist, wheel=str(path),
                        shown=info.filename,
                    )
                )  # fmt: skip
    return Scan(files=tuple(files), errors=tuple(errors), libraries=count)


def site_packages(path: Path) -> list[Path]:
    """The site-packages directories of a venv, or ``path`` itself when it is one."""
    if any(path.glob("*.dist-info")):
        return [path]
    found = [p.resolve() for p in paths.site_packages(path)]
    if not found:
        raise BadInput(
            f"{path}: no lib/python*/site-packages and no *.dist-info here; give a venv, "
            "a site-packages directory, a wheel or a shared library"
        )
    return found


def _owners(site: Path, allowed: Callable[[Path], bool] | None = None) -> dict[Path, Distribution]:
    """Shared library path -> the distribution whose RECORD lists it (``allowed``: only
    dist-info files it allows are read)."""
    owners: dict[Path, Distribution] = {}
    for info in sorted(site.glob("*.dist-info")):
        if allowed is not None and not all(allowed(info / f) for f in ("METADATA", "RECORD")):
            continue
        try:
            dist = _metadata((info / "METADATA").read_text(errors="replace"))
            record = (info / "RECORD").read_text(errors="replace")
        except OSError:
            continue
        if dist is None:
            continue
        for row in csv.reader(record.splitlines()):
            if row and SHARED.search(row[0]):
                owners[(site / row[0]).resolve()] = dist
    return owners


def _shared_libraries(site: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(site):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.endswith(".dist-info")]
        for name in files:
            if SHARED.search(name):
                yield Path(root) / name


def scan_tree(
    path: Path,
    *,
    sites: Sequence[Path] | None = None,
    allowed: Callable[[Path], bool] | None = None,
) -> Scan:
    """Every shared library under a venv's (or a) site-packages, with its distribution.
    ``sites``: these package directories instead of the venv's (a container image's, found
    by project/image.py); ``allowed``: only dist-info it allows is read (inside the image)."""
    total = Scan()
    for site in site_packages(path) if sites is None else sites:
        owners = _owners(site, allowed)
        files: list[FileCode] = []
        errors: list[tuple[str, str]] = []
        count = 0
        for lib in _shared_libraries(site):
            if lib.is_symlink() or not lib.is_file():
                continue
            count += 1
            try:
                code = scan(lib)
            except (ElfError, FatbinError, OSError) as exc:
                errors.append((str(lib), str(exc)))
                continue
            if not code.empty:
                dist = owners.get(lib.resolve())
                shown = str(lib.relative_to(site))
                files.append(FileCode(path=str(lib), code=code, dist=dist, shown=shown))
        files.sort(key=lambda f: (str(f.dist or "~"), f.shown))
        total = total + Scan(files=tuple(files), errors=tuple(sorted(errors)), libraries=count)
    return total


def scan_paths(paths: Iterable[str | Path]) -> Scan:
    """``hpcenv archs PATH...``: each a shared library, a wheel, a venv or site-packages."""
    total = Scan()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            total = total + scan_tree(path)
        elif not path.exists():
            raise BadInput(f"{path}: no such file or directory")
        elif path.suffix == ".whl" or zipfile.is_zipfile(path):
            total = total + scan_wheel(path)
        else:
            total = total + scan_file(path)
    return total


# --- judging a venv for a node ----------------------------------------------------------


@cache
def _ptx_table() -> dict[str, str]:
    return {row["isa"]: row["cuda"] for row in tables.read("ptx_isa.toml")["ptx"]}


def ptx_cuda(isa: str) -> tuple[str, bool]:
    """(CUDA release that introduced PTX ISA ``isa``, whether the table says so). Past the
    table, 9.x is taken as 13.x (the pattern of every 9.x row) and flagged."""
    table = _ptx_table()
    if isa in table:
        return table[isa], True
    major, _, minor = isa.partition(".")
    return f"{int(major) + 4}.{minor}", False


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def driver_cuda(facts: Facts) -> str | None:
    """The newest CUDA release the node's driver runs outright, or None when unknown."""
    nv = facts.nvidia
    if nv is None:
        return None
    if nv.cuda_driver_version:
        return nv.cuda_driver_version
    try:
        tk = knowledge.load().max_cuda_outright(nv.driver_version)
    except ValueError:
        return None
    return tk.version if tk else None


@dataclass(frozen=True, kw_only=True)
class KernelCheck:
    """``check_venv``'s answer: problems (exit 3), warnings, and what was read."""

    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    torch_read: bool = False  # torch's own libraries carry GPU code and were judged
    files: tuple[FileCode, ...] = field(default=(), repr=False)


def _alternatives(files: list[FileCode], cuda: str | None) -> tuple[list[FileCode], list[str]]:
    """Files to judge: of per-CUDA alternatives, the one for torch's ``cuda``."""
    groups: dict[tuple[str, str], list[tuple[str, FileCode]]] = {}
    for f in files:
        p = Path(f.path)
        m = _CUDA_TOKEN.search(p.name)
        key = (str(p.parent), _CUDA_TOKEN.sub("cuda*", p.name)) if m else (f.path, "")
        groups.setdefault(key, []).append((m.group(1) if m else "", f))
    judged: list[FileCode] = []
    notes: list[str] = []
    want = cuda.replace(".", "") if cuda else None
    for members in groups.values():
        if len(members) == 1:
            judged.append(members[0][1])
            continue
        match = [f for token, f in members if want and token in (want, want[:2])]
        if match:
            judged.append(match[0])
        else:
            judged.extend(f for _t, f in members)
            names = ", ".join(Path(f.path).name for _t, f in members)
            notes.append(f"any-of: {names}")
    return judged, notes


def _carries(code: CudaCode) -> str:
    sass = ", ".join(code.full_sass) or "none"
    ptx = ", ".join(code.full_ptx) or "none"
    extra = ""
    if code.partial_sass:
        extra = f"; a few kernels only for {', '.join(code.partial_sass)}"
    return f"SASS {sass}; PTX {ptx}{extra}"


def _needs(cap: str) -> str:
    major, minor = coverage.parse_cap(cap)
    sass = f"{major}.0-{cap}" if minor else cap
    return f"SASS {sass} or PTX <= {cap}"


def _judge(
    f: FileCode, cap: str, node_cuda: str | None, warnings: set[str]
) -> tuple[str | None, str]:
    """(how it runs on ``cap`` or None, why not)."""
    code = f.code
    isa = code.max_ptx_isa
    jit = False
    need = ""
    if isa and code.full_ptx:
        cuda, known = ptx_cuda(isa)
        if not known:
            warnings.add(f"PTX ISA {isa} is newer than hpcenv's table; taken as CUDA {cuda}")
        jit = node_cuda is not None and _key(node_cuda) >= _key(cuda)
        if not jit:
            have = f"CUDA {node_cuda}" if node_cuda else "an unknown CUDA"
            need = f"; its PTX (ISA {isa}) needs a driver for CUDA >= {cuda}, the node's: {have}"
    how = coverage.covers(cap, code.full_sass, code.full_ptx, ptx_jit=jit)
    if how is None and coverage.covers(cap, code.partial_sass, code.partial_ptx, ptx_jit=jit):
        need += f"; only a few special kernels have code for sm_{cap.replace('.', '')}"
    return how, need


def check_venv(
    venv: Path,
    facts: Facts,
    *,
    torch_cuda: str | None = None,
    sites: Sequence[Path] | None = None,
    allowed: Callable[[Path], bool] | None = None,
) -> KernelCheck:
    """Whether every distribution with CUDA code in ``venv`` has code for each GPU of the
    node in ``facts``: SASS that runs there, or PTX its driver can JIT (``sites``,
    ``allowed``: as :func:`scan_tree`)."""
    found = scan_tree(venv, sites=sites, allowed=allowed)
    caps = sorted({g.compute_capability for g in facts.gpus if g.compute_capability})
    node_cuda = driver_cuda(facts)
    problems: list[str] = []
    warnings: set[str] = set()
    by_dist: dict[str, list[FileCode]] = {}
    for f in found.files:
        if f.code.launchable:  # a library of kernel-less stub cubins cannot miss a GPU
            by_dist.setdefault(str(f.dist) if f.dist else "(no distribution)", []).append(f)
    for dist, files in sorted(by_dist.items()):
        judged, notes = _alternatives(files, torch_cuda)
        any_of = bool(notes)
        for cap in caps:
            failing = []
            for f in judged:
                how, need = _judge(f, cap, node_cuda, warnings)
                if how is None:
                    failing.append((f, need))
            if failing and (not any_of or len(failing) == len(judged)):
                f, need = failing[0]
                more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
                problems.append(
                    f"{dist}: {Path(f.path).name}{more} has no code for sm_{cap.replace('.', '')} "
                    f"(carries {_carries(f.code)}{need}; a {cap} GPU needs {_needs(cap)}): "
                    "'no kernel image is available'"
                )
    for path, error in found.errors:
        warnings.add(f"could not read {path}: {error}")
    torch_read = any(f.dist and f.dist.name.lower() == "torch" for f in found.files)
    return KernelCheck(
        problems=tuple(problems),
        warnings=tuple(sorted(warnings)),
        torch_read=torch_read,
        files=found.files,
    )


_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", re.M)


def torch_build(venv: Path) -> tuple[str, str | None, str] | None:
    """(build, cuda, evidence) read from torch's own files in ``venv`` when its libraries
    carry GPU code (an aarch64 wheel that bundles its CUDA libraries and has no
    ``nvidia-*`` dependencies is a CUDA build, not a CPU one); None otherwise."""
    for site in site_packages(venv):
        lib = site / "torch" / "lib"
        for path in sorted(lib.glob("libtorch_cuda*.so*")):
            try:
                code = scan(path)
            except (ElfError, FatbinError, OSError):  # a directory, a broken file: not torch's
                continue
            if code.empty:
                continue
            cuda = None
            try:
                m = _TORCH_CUDA.search((site / "torch" / "version.py").read_text())
                cuda = m.group(1) if m else None
            except OSError:
                pass
            parts = cuda.split(".") if cuda else []
            build = f"cu{parts[0]}{parts[1]}" if len(parts) >= 2 else "cuda"
            said = f", torch/version.py says CUDA {cuda}" if cuda else ""
            evidence = (
                f"torch/lib/{path.name} carries CUDA code{said} (its CUDA libraries are "
                "bundled: no nvidia-cuda-runtime wheel)"
            )
            return build, ".".join(parts[:2]) if cuda else None, evidence
    return None


__all__ = [
    "Distribution",
    "FileCode",
    "KernelCheck",
    "Scan",
    "check_venv",
    "driver_cuda",
    "ptx_cuda",
    "scan_file",
    "scan_paths",
    "scan_tree",
    "scan_wheel",
    "site_packages",
    "torch_build",
]
