"""The fatbin reader's own paths: containers, padding, concatenated entries, suffixes,
compression flags, relocatable sections, raw fatbin files, and every malformed input
ending in one ``FatbinError``/``ElfError`` line, never a traceback. Entries are written by
``fatbin_build`` (the documented layout); NVIDIA's cuobjdump checks the layout itself in
``test_fatbin_cuobjdump_oracle.py``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.kit import fatbin
from hpcenv.kit.elf import ElfError, ElfFile
from support.fatbin_build import (
    F_64BIT_LINUX,
    F_ARCH,
    F_FAMILY,
    F_LZ4,
    F_ZSTD,
    concatenated,
    container,
    elf_with_sections,
    entry,
)

ELF, PTX, LTO = 2, 1, 8


def test_raw_fatbin_counts_archs_suffixes_and_compression() -> None:
    data = container(
        entry(ELF, 80),
        entry(ELF, 90, flags=F_64BIT_LINUX | F_ARCH),
        entry(ELF, 100, flags=F_64BIT_LINUX | F_FAMILY | F_ZSTD),
        entry(PTX, 120, flags=F_64BIT_LINUX | F_LZ4, version=(8, 7), payload=b"x" * 40),
        entry(LTO, 80, version=(1, 67)),
    ) + container(entry(ELF, 80), entry(PTX, 120, version=(8, 8)))
    code = fatbin.scan(data)
    assert code.sass == {"8.0": 2, "9.0a": 1, "10.0f": 1}
    assert code.ptx == {"12.0": 2}
    assert code.lto == {"8.0": 1}
    assert code.ptx_isa == {"12.0": "8.8"}  # the newest ISA of the arch's PTX entries
    assert code.max_ptx_isa == "8.8"
    assert code.compressed == 2
    assert code.containers == 2
    assert code.sections == (fatbin.RAW,)
    assert [e.compression for e in code.entries[:4]] == [None, None, "zstd", "lz4"]
    assert [e.unit for e in code.entries] == [0, 0, 0, 0, 0, 1, 1]


def test_concatenated_entry_lists_each_member() -> None:
    data = container(
        entry(PTX, 80, version=(9, 5)),
        concatenated([(ELF, 80, F_64BIT_LINUX), (ELF, 90, F_64BIT_LINUX | F_ARCH)]),
    )
    code = fatbin.scan(data)
    assert code.sass == {"8.0": 1, "9.0a": 1}
    assert code.ptx == {"8.0": 1}
    assert code.compressed == 0  # as cuobjdump: members carry no compression flag


def test_zero_padding_between_containers_is_skipped() -> None:
    data = container(entry(ELF, 75)) + b"\0" * 24 + container(entry(ELF, 86)) + b"\0" * 8
    assert fatbin.scan(data).sass == {"7.5": 1, "8.6": 1}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (container(entry(ELF, 80)) + b"junk" * 4, "no fatbin container"),
        (container(entry(ELF, 80))[:-4], "runs past the section end"),
        (container(entry(ELF, 80), version=2), "container version 2"),
        (struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 8) + b"\0" * 8, "truncated fatbin entry"),
        (container(entry(ELF, 80)[:40]), "truncated fatbin entry header"),
    ],
    ids=["junk", "cut", "version", "short-entry", "short-header"],
)
def test_malformed_fatbin_is_one_line(data: bytes, message: str) -> None:
    with pytest.raises(fatbin.FatbinError, match=message) as info:
        fatbin.scan(data)
    assert "\n" not in str(info.value)
    assert "<bytes>" in str(info.value)  # names the file


def test_entry_bigger_than_its_container_is_an_error() -> None:
    good = entry(ELF, 80)
    bad = good[:8] + struct.pack("<Q", 1 << 40) + good[16:]
    with pytest.raises(fatbin.FatbinError, match="does not fit"):
        fatbin.scan(container(bad))


def test_elf_sections_executable_and_relocatable(tmp_path: Path) -> None:
    lib = elf_with_sections(
        tmp_path,
        {
            ".nv_fatbin": container(entry(ELF, 80), entry(ELF, 90)),
            "__nv_relfatbin": container(entry(ELF, 80), entry(PTX, 90, version=(8, 4))),
        },
    )
    code = fatbin.scan(lib)
    assert code.sass == {"8.0": 2, "9.0": 1}
    assert code.ptx == {"9.0": 1}
    assert set(code.sections) == {".nv_fatbin", "__nv_relfatbin"}
    by = code.by_section()
    assert by[".nv_fatbin"]["ptx"] == {}
    assert by["__nv_relfatbin"]["ptx"] == {"9.0": 1}
    as_json = code.to_json()
    assert as_json["sass"] == ["8.0", "9.0"] and as_json["ptx"] == ["9.0"]
    assert as_json["sass_entries"] == {"8.0": 2, "9.0": 1}


def test_library_without_fatbin_is_empty_not_an_error(tmp_path: Path) -> None:
    lib = elf_with_sections(tmp_path, {".note.other": b"hello"})
    code = fatbin.scan(lib)
    assert code.empty and code.sass == {} and code.ptx == {} and code.sections == ()


def test_empty_fatbin_section_is_seen_but_empty(tmp_path: Path) -> None:
    lib = elf_with_sections(tmp_path, {".nv_fatbin": b"\0" * 16})
    code = fatbin.scan(lib)
    assert code.empty and code.sections == (".nv_fatbin",)


def test_bad_files(tmp_path: Path) -> None:
    (tmp_path / "empty.so").write_bytes(b"")
    (tmp_path / "text.so").write_text("not a library")
    with pytest.raises(ElfError, match="empty file"):
        fatbin.scan(tmp_path / "empty.so")
    with pytest.raises(ElfError, match="not an ELF file"):
        fatbin.scan(tmp_path / "text.so")
    with pytest.raises(OSError):
        fatbin.scan(tmp_path / "missing.so")


def test_truncated_library_is_one_line(tmp_path: Path) -> None:
    lib = elf_with_sections(tmp_path, {".nv_fatbin": container(entry(ELF, 80))})
    data = lib.read_bytes()
    for cut in (10, 63, 64, len(data) // 2, len(data) - 1):
        with pytest.raises((ElfError, fatbin.FatbinError)) as info:
            fatbin.scan(data[:cut])
        assert "\n" not in str(info.value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_library_never_tracebacks(data: st.DataObject) -> None:
    """Flip, cut and splice bytes of a real library with fatbin sections: every outcome is
    a result or one ValueError line (ElfError/FatbinError), never another exception."""
    base, hot = _FUZZ_BASE[0]
    blob = bytearray(base)
    for _ in range(data.draw(st.integers(1, 8))):
        start, end = data.draw(st.sampled_from(hot))
        at = data.draw(st.integers(start, end - 1))
        edge = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, None]))
        blob[at] = data.draw(st.integers(0, 255)) if edge is None else edge
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    try:
        fatbin.scan(bytes(blob))
    except ValueError as exc:
        assert "\n" not in str(exc)


#: (library bytes, [(start, end)]: the whole file and the ranges a parser reads)
_FUZZ_BASE: list[tuple[bytes, list[tuple[int, int]]]] = []


@pytest.fixture(autouse=True, scope="module")
def _fuzz_base(tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    lib = elf_with_sections(
        tmp,
        {
            ".nv_fatbin": container(entry(ELF, 80), concatenated([(ELF, 90, F_64BIT_LINUX)])),
            "__nv_relfatbin": container(entry(PTX, 90, version=(8, 4))),
        },
    )
    blob = lib.read_bytes()
    with ElfFile.open(lib) as elf:
        hot = [(0, 64), (elf.shoff, elf.shoff + elf.shnum * elf.shentsize)]
        hot += [elf.section_range(s) for s in elf.sections() if s.name in fatbin.SECTIONS]
    _FUZZ_BASE[:] = [(blob, [(0, len(blob)), *hot])]
