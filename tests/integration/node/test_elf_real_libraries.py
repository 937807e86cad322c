"""The ELF reader (``hpcenv.kit.elf``) on real shared libraries compiled here with gcc:
exported symbols as nm sees them, ``needed``/``runpath``/``soname`` as binutils' readelf
does, also on a library whose section headers were removed; bad input is one
``ElfError`` line. The NCCL plugin API versions read from those symbols too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcenv.kit import elf as kit_elf
from hpcenv.kit import netplugin
from support import require
from support.native import compile_so

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


def test_reads_exported_plugin_symbols(tmp_path: Path) -> None:
    lib = compile_so(tmp_path, PLUGIN_C, "libnccl-net")
    symbols = kit_elf.exported_symbols(lib)
    assert {"ncclNetPlugin_v7", "ncclNetPlugin_v6", "ncclNetPlugin_v5"} <= set(symbols)
    assert "ncclCollNetPlugin_v7" in symbols  # weak definitions are exported too
    assert "ncclNetPlugin_v9" not in symbols  # hidden
    assert "ncclNetPlugin_v8" not in symbols  # static: not in .dynsym
    assert "undefined_elsewhere" not in symbols  # undefined: imported, not exported
    assert netplugin.plugin_api_versions(symbols) == [7, 6, 5]


def test_matches_nm_when_available(tmp_path: Path) -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed; nothing to compare against")
    lib = compile_so(tmp_path, PLUGIN_C, "libcmp")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    nm_names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert set(kit_elf.exported_symbols(lib)) == nm_names


def test_rejects_non_elf_and_32_bit(tmp_path: Path) -> None:
    text = tmp_path / "not.so"
    text.write_text("hello")
    with pytest.raises(kit_elf.ElfError, match="not an ELF"):
        kit_elf.exported_symbols(text)
    fake32 = tmp_path / "elf32.so"
    fake32.write_bytes(b"\x7fELF\x01\x01\x01" + b"\0" * 60)
    with pytest.raises(kit_elf.ElfError, match="only 64-bit little-endian"):
        kit_elf.exported_symbols(fake32)


def test_plugin_api_versions_ignores_other_names() -> None:
    names = ["ncclNetPlugin_v10", "ncclNetPlugin_v2", "ncclNetPlugin_vX", "ncclNet_v7", "foo"]
    assert netplugin.plugin_api_versions(names) == [10, 2]


def readelf_dynamic(lib: Path) -> dict[str, list[str]]:
    readelf = shutil.which("readelf")
    require("binutils", readelf is not None, "readelf (binutils) not installed")
    assert readelf is not None
    out = subprocess.run([readelf, "-dW", str(lib)], capture_output=True, text=True, check=True)
    found: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        for tag in ("NEEDED", "RUNPATH", "RPATH", "SONAME"):
            if f"({tag})" in line and "[" in line:
                found.setdefault(tag, []).append(line.split("[", 1)[1].rsplit("]", 1)[0])
    return found


@pytest.mark.parametrize("flag", ["--enable-new-dtags", "--disable-new-dtags"])
def test_dynamic_matches_readelf(tmp_path: Path, flag: str) -> None:
    lib = compile_so(
        tmp_path, PLUGIN_C, "libdyn", "-Wl,-soname,libdyn.so.1", "-Wl,--no-as-needed",
        "-lm", "-lpthread", f"-Wl,{flag},-rpath,$ORIGIN/../lib:/opt/x",
    )  # fmt: skip
    want = readelf_dynamic(lib)
    assert kit_elf.needed(lib) == want["NEEDED"]
    assert kit_elf.soname(lib) == "libdyn.so.1" == want["SONAME"][0]
    tag = "RUNPATH" if flag == "--enable-new-dtags" else "RPATH"
    assert want[tag] == ["$ORIGIN/../lib:/opt/x"]
    assert kit_elf.runpath(lib) == ["$ORIGIN/../lib", "/opt/x"]  # $ORIGIN left unexpanded


def test_dynamic_without_section_headers(tmp_path: Path) -> None:
    """An sstrip-ed library (section headers gone): the loader's view still reads."""
    lib = compile_so(
        tmp_path, PLUGIN_C, "libss", "-Wl,-soname,libss.so", "-Wl,--no-as-needed", "-lm"
    )
    data = bytearray(lib.read_bytes())
    data[0x28:0x30] = b"\0" * 8  # e_shoff
    data[0x3C:0x40] = b"\0" * 4  # e_shnum, e_shstrndx
    stripped = tmp_path / "stripped.so"
    stripped.write_bytes(bytes(data))
    assert "libm.so.6" in kit_elf.needed(lib)
    assert kit_elf.needed(stripped) == kit_elf.needed(lib)
    assert kit_elf.soname(stripped) == "libss.so"
    with pytest.raises(kit_elf.ElfError, match="no section headers"):
        kit_elf.exported_symbols(stripped)


def test_elffile_sections_and_bytes(tmp_path: Path) -> None:
    lib = compile_so(tmp_path, PLUGIN_C, "libsec")
    with kit_elf.ElfFile.open(lib) as f:
        names = [s.name for s in f.sections()]
        assert {".dynsym", ".dynstr", ".text", ".dynamic"} <= set(names)
        text = f.section(".text")
        assert text is not None and text.size > 0
        assert f.section("no-such") is None
        assert f.machine in ("x86_64", "aarch64")
    in_memory = kit_elf.ElfFile(lib.read_bytes(), name="mem")
    assert [s.name for s in in_memory.sections()] == names
    assert in_memory.exported_symbols() == kit_elf.exported_symbols(lib)


def test_kit_errors_are_one_line(tmp_path: Path) -> None:
    lib = compile_so(tmp_path, PLUGIN_C, "libbad")
    data = lib.read_bytes()
    cases = {
        "empty": (b"", "empty file"),
        "big-endian": (b"\x7fELF\x02\x02\x01" + b"\0" * 60, "64-bit big-endian ELF"),
        "short": (data[:40], "truncated ELF header"),
        "truncated": (data[: len(data) // 2], "truncated"),
    }
    for name, (blob, message) in cases.items():
        path = tmp_path / f"{name}.so"
        path.write_bytes(blob)
        with pytest.raises(kit_elf.ElfError, match=message) as info:
            kit_elf.exported_symbols(path)
        assert "\n" not in str(info.value) and str(path) in str(info.value)
