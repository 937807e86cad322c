"""A venv's site-packages written by hand, as an installer leaves it: each distribution's
``*.dist-info`` (``METADATA``, ``RECORD``) and its files, real (small) ELF shared objects
built with gcc (``standin_cuda.compile_so``). It stands in for the CUDA wheels of PyPI
(gigabytes each) with the layout the one-CUDA-stack proof reads: each object's
``DT_NEEDED`` and ``DT_RUNPATH``, the ``RECORD`` that owns each file, the ``Requires-Dist``
edges (a real METADATA may be given as it is, e.g. tests/data/wheels' JAX plugin's)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from support.standin_cuda import compile_so


def site_of(venv: Path) -> Path:
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def install(
    site: Path,
    name: str,
    version: str,
    *,
    files: Mapping[str, bytes] = {},
    requires: Iterable[str] = (),
    metadata: str | None = None,
) -> None:
    """Install ``name`` ``version`` into ``site``: ``files`` at their paths, a METADATA
    (``metadata`` as given, else one with ``requires``) and a RECORD listing them all."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    if metadata is None:
        meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        metadata = "\n".join([*meta, *(f"Requires-Dist: {r}" for r in requires)]) + "\n"
    written = {**files, f"{info}/METADATA": metadata.encode()}
    for rel, data in written.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    record = [f"{rel},," for rel in written] + [f"{info}/RECORD,,"]
    (site / info / "RECORD").write_text("\n".join(record) + "\n")


def _symbol(soname: str) -> str:
    return "standin_" + re.sub(r"\W", "_", soname)


def library(work: Path, soname: str) -> tuple[Path, bytes]:
    """A CUDA library stand-in named ``soname`` (``libcudart.so.13``): its path and bytes."""
    source = f"int {_symbol(soname)}(void) {{ return 0; }}\n"
    data = compile_so(work / soname, soname, source, soname=soname)
    return work / soname / soname, data


def linking(work: Path, name: str, needs: tuple[Path, ...], runpath: tuple[str, ...]) -> bytes:
    """An extension object that needs (calls into) the libraries ``needs``, with
    DT_RUNPATH ``runpath``."""
    syms = [_symbol(lib.name) for lib in needs]
    source = "".join(f"int {s}(void);\n" for s in syms)
    source += f"int ext(void) {{ return {' + '.join(f'{s}()' for s in syms) or '0'}; }}\n"
    base = name.rsplit("/", 1)[-1]
    return compile_so(
        work / name.replace("/", "_"), base, source, soname=base, needs=needs, runpath=runpath
    )
