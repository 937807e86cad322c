"""The ELF dynamic-symbol reader on real shared libraries compiled here with gcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require
from probe_env import load_probe

elf = load_probe("_elf")

PLUGIN_C = """
struct net { const char *name; int version; };
struct net ncclNetPlugin_v7 = {"AWS Libfabric", 7};
struct net ncclNetPlugin_v6 = {"AWS Libfabric", 6};
struct net ncclNetPlugin_v5 = {"AWS Libfabric", 5};
__attribute__((visibility("hidden"))) struct net ncclNetPlugin_v9 = {"hidden", 9};
static struct net ncclNetPlugin_v8 = {"static", 8};
struct net *keep(void) { return &ncclNetPlugin_v8; }
__attribute__((weak)) int ncclCollNetPlugin_v7 = 1;
extern int undefined_elsewhere;
int use(void) { return undefined_elsewhere; }
"""


def compile_so(tmp_path: Path, source: str, name: str) -> Path:
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "gcc is not on PATH")
    assert gcc is not None
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_reads_exported_plugin_symbols(tmp_path: Path) -> None:
    lib = compile_so(tmp_path, PLUGIN_C, "libnccl-net")
    symbols = elf.exported_symbols(lib)
    assert {"ncclNetPlugin_v7", "ncclNetPlugin_v6", "ncclNetPlugin_v5"} <= set(symbols)
    assert "ncclCollNetPlugin_v7" in symbols  # weak definitions are exported too
    assert "ncclNetPlugin_v9" not in symbols  # hidden
    assert "ncclNetPlugin_v8" not in symbols  # static: not in .dynsym
    assert "undefined_elsewhere" not in symbols  # undefined: imported, not exported
    assert elf.plugin_api_versions(symbols) == [7, 6, 5]


def test_matches_nm_when_available(tmp_path: Path) -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed; nothing to compare against")
    lib = compile_so(tmp_path, PLUGIN_C, "libcmp")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    nm_names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert set(elf.exported_symbols(lib)) == nm_names


def test_rejects_non_elf_and_32_bit(tmp_path: Path) -> None:
    text = tmp_path / "not.so"
    text.write_text("hello")
    with pytest.raises(elf.ElfError, match="not an ELF"):
        elf.exported_symbols(text)
    fake32 = tmp_path / "elf32.so"
    fake32.write_bytes(b"\x7fELF\x01\x01\x01" + b"\0" * 60)
    with pytest.raises(elf.ElfError, match="only 64-bit little-endian"):
        elf.exported_symbols(fake32)


def test_plugin_api_versions_ignores_other_names() -> None:
    names = ["ncclNetPlugin_v10", "ncclNetPlugin_v2", "ncclNetPlugin_vX", "ncclNet_v7", "foo"]
    assert elf.plugin_api_versions(names) == [10, 2]
