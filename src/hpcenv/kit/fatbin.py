"""The GPU code a library carries: SASS and PTX per compute capability, from its fatbins.

Standard library only (see ``hpcenv.kit``): no CUDA toolkit, no GPU, no import of the
library. ``scan(path_or_buffer) -> CudaCode``. Only headers are read (they are never
compressed), through ``mmap``: a 470 MB ``libtorch_cuda.so`` touches a few thousand pages.

Where the code lives: ELF sections ``.nv_fatbin`` (the executable fatbin the CUDA runtime
registers) and ``__nv_relfatbin`` (relocatable device code kept from ``-rdc`` objects;
``crt/link.stub`` hands these "prelinked fatbins" to the runtime as well, so their PTX is
counted). Section names: ``fatbinary_section.h`` of the CUDA toolkit. ``cuobjdump -all``
lists both sections (without ``-all`` it shows only the executable one); so does ``scan``,
and ``CudaCode.by_section`` tells them apart. A file that *is* a fatbin (``nvcc -fatbin``)
is read too. A library with no fatbin section gives an empty ``CudaCode``.

Some libraries keep most of their GPU code as fatbins embedded in ordinary data sections
and load it themselves through the driver API: cuFFT 12.0 (``nvidia-cufft`` for CUDA 13)
has a 0x2a0-byte ``.nv_fatbin`` holding sm_75 only, and 23,983 containers in its 278 MB
``.ldata`` with SASS for 7.5 to 12.0 [M]. ``cuobjdump`` lists only the fatbin sections, so
judged by them alone the library "has no code for sm_90". ``scan`` therefore also reads
containers embedded in the other allocated, non-executable sections, accepting a
container only when its header and every entry header parse and the entries fill it
exactly (a stray magic number in data does not); ``CudaCode.only(SECTIONS)`` is the part
cuobjdump sees.

Layout (little-endian). Sources: [E] n-eiling/cuda-fatbin-decompression
``fatbin-decompress.h`` (reverse-engineered ``fat_elf_header``/``fat_text_header``),
[J] jiegec/fatbinary ``src/lib.rs`` (same, plus flag names), [M] measured here on fixtures
compiled with PyPI ``nvidia-cuda-nvcc`` 13.5.37 for chosen ``-gencode`` targets and read
back with ``cuobjdump -all`` 13.5.37, which prints each entry's arch (with its ``a``/``f``
suffix), code version and whether it is compressed, and on real PyPI libraries
(``tests/integration/node/test_fatbin_cuobjdump_oracle.py`` checks every entry against cuobjdump).

Container, 16 bytes, then entries back to back: ``u32 magic 0xBA55ED50``, ``u16 version``
(1), ``u16 header size`` (16), ``u64 size of the entries`` [E][J][M]. Containers follow
each other in a section, possibly with zero padding [M].

Entry header (at least 64 bytes; the payload follows it):

====  =====  ========================================================================
0x00  u16    kind: 1 PTX, 2 ELF (a SASS cubin) [E][J]; 8 NVVM IR for link-time
             optimisation (``code=lto_80``; cuobjdump "Fatbin nvvm code") [M];
             0x100 several cubins concatenated (``nvcc --concat``) [M]
0x02  u16    0x0101 in every entry seen (meaning unknown) [J][M]
0x04  u32    header size: 64, more when an options block follows [E][J][M]
0x08  u64    payload size in the file (padding included) [E][J]
0x10  u32    compressed size (0 when stored) [E][J]
0x14  u32    offset of the options block in the header, 0 when none [J]
0x18  u16    code version minor; 0x1A u16 major: cuobjdump's "code version = [major,
             minor]", the PTX ISA version of a PTX entry (9.5 from nvcc 13.5) [E][M]
0x1C  u32    arch as the sm number: 75, 90, 100, 121 [E][J][M]
0x20  u32    object name offset, 0x24 u32 its length (0 in what nvcc writes) [E][J]
0x28  u64    flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host [J]; 0x2000 compressed, LZ4
             (``--compress-mode=speed``) [E][J][M]; 0x8000 compressed, zstd (the payload
             starts with zstd's magic; nvcc 13's default) [M]; 0x100000 architecture-
             specific target ``a`` (``code=sm_90a``, ``sm_100a``) [M]; 0x200000 family
             target ``f`` (``code=sm_100f``; ``cuobjdump -all -lelf`` names such a cubin
             ``sm_100`` but ``cuobjdump -all`` prints ``arch = sm_100f``) [M]
0x30  u64    0 in every entry seen [E]
0x38  u64    decompressed size [E][J]
====  =====  ========================================================================

A concatenated entry (kind 0x100) holds at its options offset ``u32 count``, ``u32 size
of this table`` (8 + 64 * count) and ``count`` 64-byte headers laid out as above (0x04
being the member's offset in the decompressed payload), one per cubin; the members' flags
carry no compression bit (the concatenated payload is compressed as a whole), and
cuobjdump reports them uncompressed, as ``scan`` does [M].
"""

from __future__ import annotations

import mmap
import os
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hpcenv.kit.coverage import library_archs, sorted_archs
from hpcenv.kit.elf import Buffer, ElfError, ElfFile

FATBIN_MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
SECTIONS = (".nv_fatbin", "__nv_relfatbin")
SHF_ALLOC, SHF_EXECINSTR, SHT_PROGBITS = 0x2, 0x4, 1
RAW = "<fatbin>"  # the "section" of a file that is itself a fatbin

KIND_PTX, KIND_ELF, KIND_NVVM, KIND_CONCAT = 1, 2, 8, 0x100
KINDS = {KIND_PTX: "ptx", KIND_ELF: "sass", KIND_NVVM: "lto"}
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes
_CONCAT = struct.Struct("<II")
_ENTRY_HEAD = struct.Struct("<HHIQ")  # kind, 0x0101, header size, payload size


class FatbinError(ValueError):
    """A fatbin section that cannot be read (one line: file, section, offset, what)."""


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One fatbin entry: the code for one arch of one translation unit."""

    kind: str  # "sass" | "ptx" | "lto" | "kind-N"
    arch: str  # "9.0", "9.0a", "10.3f"
    version: str  # code version "major.minor": the PTX ISA version of a PTX entry
    compression: str | None  # "lz4" | "zstd" | None
    section: str  # ".nv_fatbin" | "__nv_relfatbin" | "<fatbin>"
    offset: int  # file offset of the entry header
    unit: int  # index of its fatbin container (one translation unit) in the file
    #: False for a stored (uncompressed) cubin with no ``.text.*`` section: nothing to
    #: launch, so it cannot fail with "no kernel image"; None where not read (compressed)
    kernels: bool | None = None


def _tally(entries: tuple[Entry, ...], kind: str) -> dict[str, int]:
    counts = Counter(e.arch for e in entries if e.kind == kind)
    return {a: counts[a] for a in sorted_archs(counts)}


@dataclass(frozen=True, kw_only=True)
class CudaCode:
    """What one file carries. ``sass``/``ptx``/``lto``: arch -> number of entries."""

    sass: dict[str, int] = field(default_factory=dict)
    ptx: dict[str, int] = field(default_factory=dict)
    lto: dict[str, int] = field(default_factory=dict)
    #: arch -> the newest PTX ISA version among its PTX entries ("8.7")
    ptx_isa: dict[str, str] = field(default_factory=dict)
    compressed: int = 0  # entries whose payload is compressed
    containers: int = 0
    sections: tuple[str, ...] = ()  # fatbin sections present (even when empty)
    entries: tuple[Entry, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, entries: list[Entry], *, containers: int, sections: tuple[str, ...]) -> CudaCode:
        frozen = tuple(entries)
        isa: dict[str, str] = {}
        for e in frozen:
            if e.kind == "ptx" and _version_key(e.version) > _version_key(isa.get(e.arch, "0.0")):
                isa[e.arch] = e.version
        return cls(
            sass=_tally(frozen, "sass"),
            ptx=_tally(frozen, "ptx"),
            lto=_tally(frozen, "lto"),
            ptx_isa={a: isa[a] for a in sorted_archs(isa)},
            compressed=sum(1 for e in frozen if e.compression),
            containers=containers,
            sections=sections,
            entries=frozen,
        )

    @property
    def empty(self) -> bool:
        """No GPU code at all (a CPU library, or a fatbin section without entries)."""
        return not self.entries

    def split(self, kind: str) -> tuple[list[str], list[str]]:
        """(full, partial) archs of ``kind`` ("sass" or "ptx"): ``coverage.library_archs``."""
        units: dict[int, list[str]] = {}
        for e in self.entries:
            if e.kind == kind and e.kernels is not False:
                units.setdefault(e.unit, []).append(e.arch)
        return library_archs(units.values())

    @property
    def full_sass(self) -> list[str]:
        """SASS archs the library was built for (see ``coverage.library_archs``)."""
        return self.split("sass")[0]

    @property
    def partial_sass(self) -> list[str]:
        """SASS archs with only a few special kernels."""
        return self.split("sass")[1]

    @property
    def full_ptx(self) -> list[str]:
        return self.split("ptx")[0]

    @property
    def partial_ptx(self) -> list[str]:
        return self.split("ptx")[1]

    @property
    def launchable(self) -> bool:
        """Whether any entry may hold a kernel. cuFFTW 12.0's ``.nv_fatbin`` holds one stored
        sm_75 cubin without a ``.text`` section [M]: no code a GPU could miss."""
        return any(e.kernels is not False for e in self.entries)

    @property
    def max_ptx_isa(self) -> str | None:
        """The newest PTX ISA version of any PTX entry: what a driver must JIT."""
        return max(self.ptx_isa.values(), key=_version_key, default=None)

    def only(self, sections: tuple[str, ...]) -> CudaCode:
        """The part of this code that lies in ``sections`` (``SECTIONS``: what cuobjdump lists)."""
        mine = [e for e in self.entries if e.section in sections]
        return CudaCode.of(
            mine,
            containers=len({e.unit for e in mine}),
            sections=tuple(s for s in self.sections if s in sections),
        )

    def by_section(self) -> dict[str, dict[str, dict[str, int]]]:
        """section -> {"sass": counts, "ptx": counts, "lto": counts}."""
        out = {}
        for sec in self.sections:
            mine = tuple(e for e in self.entries if e.section == sec)
            out[sec] = {k: _tally(mine, k) for k in ("sass", "ptx", "lto")}
        return out

    def to_json(self) -> dict[str, Any]:
        """The per-file part of the ``hpcenv archs --json`` contract."""
        return {
            "sass": list(self.sass),
            "ptx": list(self.ptx),
            "sass_entries": dict(self.sass),
            "ptx_entries": dict(self.ptx),
            "full": {"sass": self.full_sass, "ptx": self.full_ptx},
            "partial": {"sass": self.partial_sass, "ptx": self.partial_ptx},
            "ptx_isa": dict(self.ptx_isa),
            "lto_entries": dict(self.lto),
            "entries": len(self.entries),
            "compressed_entries": self.compressed,
            "containers": self.containers,
            "sections": self.by_section(),
        }


_SHDR_NAME_OFF = struct.Struct("<I")
_SHDR_RANGE = struct.Struct("<QQ")  # sh_offset, sh_size (at 0x18 of a section header)


def _has_text(data: Buffer, start: int, size: int) -> bool | None:
    """Whether the stored cubin at ``start`` has a ``.text.*`` section (a kernel), read
    from its section headers only; None when it is not a readable 64-bit ELF image."""
    if size < 64 or data[start : start + 5] != b"\x7fELF\x02":
        return None
    shoff = struct.unpack_from("<Q", data, start + 0x28)[0]
    entsize, shnum, shstrndx = struct.unpack_from("<HHH", data, start + 0x3A)
    if entsize < 64 or not 0 < shnum <= 0xFFFF or shstrndx >= shnum:
        return None
    if shoff + shnum * entsize > size:
        return None
    table = start + shoff
    str_off, str_size = _SHDR_RANGE.unpack_from(data, table + shstrndx * entsize + 0x18)
    if str_off + str_size > size:
        return None
    names = bytes(data[start + str_off : start + str_off + str_size])
    for i in range(shnum):
        (name,) = _SHDR_NAME_OFF.unpack_from(data, table + i * entsize)
        if names.startswith(b".text.", name):
            return True
    return False


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def arch_name(sm: int, flags: int) -> str:
    """sm number and entry flags -> ``"9.0"``, ``"9.0a"``, ``"10.0f"``."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return f"{sm // 10}.{sm % 10}{suffix}"


def _compression(flags: int) -> str | None:
    return "lz4" if flags & FLAG_LZ4 else "zstd" if flags & FLAG_ZSTD else None


class _Reader:
    def __init__(self, data: Buffer, name: str) -> None:
        self.data = data
        self.name = name

    def fail(self, section: str, offset: int, what: str) -> FatbinError:
        return FatbinError(f"{self.name}: {section}: {what} at file offset {offset:#x}")

    def containers(self, section: str, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """(container offset, first entry, end of entries) for each container."""
        pos = start
        while pos < end:
            if end - pos < _CONTAINER.size or self.data[pos : pos + 4] != MAGIC_BYTES:
                nxt = self.data.find(MAGIC_BYTES, pos, end)
                gap = self.data[pos : nxt if nxt >= 0 else end]
                if gap.count(0) != len(gap):
                    raise self.fail(section, pos, "no fatbin container (magic 0xBA55ED50)")
                if nxt < 0:
                    return
                pos = nxt
                if end - pos < _CONTAINER.size:
                    raise self.fail(section, pos, "truncated fatbin container header")
            _magic, version, hsize, size = _CONTAINER.unpack_from(self.data, pos)
            if version != 1 or hsize < _CONTAINER.size:
                raise self.fail(
                    section,
                    pos,
                    f"fatbin container version {version} with header size {hsize} "
                    "(this reader knows version 1, header size >= 16)",
                )
            stop = pos + hsize + size
            if stop > end:
                raise self.fail(
                    section, pos, f"fatbin container of {size} bytes runs past the section end"
                )
            yield pos, pos + hsize, stop
            pos = stop

    def entries(self, section: str, start: int, stop: int, unit: int) -> Iterator[Entry]:
        pos = start
        while pos < stop:
            if stop - pos < _ENTRY.size:
                raise self.fail(section, pos, "truncated fatbin entry header")
            (kind, _u, hsize, size, _csize, opts, minor, major, sm, _no, _nl, flags, _z, _d) = (
                _ENTRY.unpack_from(self.data, pos)
            )
            if hsize < _ENTRY.size or pos + hsize + size > stop:
                raise self.fail(
                    section,
                    pos,
                    f"fatbin entry with header size {hsize} and payload {size} does not fit "
                    "its container",
                )
            if kind == KIND_CONCAT:
                yield from self._concatenated(section, pos, hsize=hsize, opts=opts, unit=unit)
            else:
                stored = _compression(flags) is None and not _csize
                yield Entry(
                    kind=KINDS.get(kind, f"kind-{kind}"),
                    arch=arch_name(sm, flags),
                    version=f"{major}.{minor}",
                    compression=_compression(flags),
                    section=section,
                    offset=pos,
                    unit=unit,
                    kernels=_has_text(self.data, pos + hsize, size)
                    if kind == KIND_ELF and stored
                    else None,
                )
            pos += hsize + size

    def embedded(self, section: str, start: int, end: int, unit: int) -> list[list[Entry]]:
        """The fatbin containers embedded in a data section, each as its entries: only
        those whose container and entry headers parse and whose entries fill the
        container exactly; anything else with the magic number is data."""
        found: list[list[Entry]] = []
        pos = self.data.find(MAGIC_BYTES, start, end)
        while pos >= 0:
            stop = self._strict(pos, end)
            if stop:
                try:
                    found.append(list(self.entries(section, pos + 16, stop, unit + len(found))))
                    pos = stop - 4  # the next container starts at ``stop`` or later
                except FatbinError:
                    pass
            pos = self.data.find(MAGIC_BYTES, pos + 4, end)
        return found

    def _strict(self, pos: int, end: int) -> int:
        """The end of the container at ``pos`` if it is one, else 0."""
        if end - pos < _CONTAINER.size + _ENTRY.size:
            return 0
        _magic, version, hsize, size = _CONTAINER.unpack_from(self.data, pos)
        stop: int = pos + hsize + size
        if version != 1 or hsize != _CONTAINER.size or size < _ENTRY.size or stop > end:
            return 0
        at = pos + hsize
        while at < stop:  # every entry header sane, the last one ending at ``stop``
            kind, _u, ehsize, esize = _ENTRY_HEAD.unpack_from(self.data, at)
            if (
                (kind not in KINDS and kind != KIND_CONCAT)
                or ehsize < _ENTRY.size
                or at + ehsize + esize > stop
            ):
                return 0
            at += ehsize + esize
        return stop

    def _concatenated(
        self, section: str, pos: int, *, hsize: int, opts: int, unit: int
    ) -> Iterator[Entry]:
        table = pos + opts
        if opts < _ENTRY.size or opts + _CONCAT.size > hsize:
            raise self.fail(section, pos, f"concatenated fatbin entry with table at {opts}")
        count, _size = _CONCAT.unpack_from(self.data, table)
        first = table + _CONCAT.size
        if opts + _CONCAT.size + count * _ENTRY.size > hsize:
            raise self.fail(section, pos, f"concatenated fatbin entry of {count} members")
        for i in range(count):
            at = first + i * _ENTRY.size
            kind, _u, _o, _s, _c, _op, minor, major, sm, _no, _nl, flags, _z, _d = (
                _ENTRY.unpack_from(self.data, at)
            )
            yield Entry(
                kind=KINDS.get(kind, f"kind-{kind}"),
                arch=arch_name(sm, flags),
                version=f"{major}.{minor}",
                compression=_compression(flags),  # as cuobjdump: the member's own flags
                section=section,
                offset=at,
                unit=unit,
            )


def _scan_ranges(data: Buffer, name: str, ranges: list[tuple[str, int, int]]) -> CudaCode:
    reader = _Reader(data, name)
    entries: list[Entry] = []
    containers = 0
    for section, start, end in ranges:
        for _pos, first, stop in reader.containers(section, start, end):
            entries.extend(reader.entries(section, first, stop, containers))
            containers += 1
    return CudaCode.of(
        entries, containers=containers, sections=tuple(dict.fromkeys(r[0] for r in ranges))
    )


def scan_elf(elf: ElfFile) -> CudaCode:
    """The GPU code in ``elf``'s fatbin sections and the fatbins embedded in its other
    data sections (empty when it has none)."""
    ranges, data = [], []
    for sec in elf.sections():
        if sec.name in SECTIONS:
            ranges.append((sec.name, *elf.section_range(sec)))
        elif (
            sec.type == SHT_PROGBITS
            and sec.flags & SHF_ALLOC
            and not sec.flags & SHF_EXECINSTR
            and sec.size >= _CONTAINER.size + _ENTRY.size
        ):
            data.append((sec.name, *elf.section_range(sec)))
    code = _scan_ranges(elf.data, elf.name, ranges)
    reader = _Reader(elf.data, elf.name)
    entries, containers, sections = list(code.entries), code.containers, list(code.sections)
    for name, start, end in data:
        found = reader.embedded(name, start, end, containers)
        if found:
            sections.append(name)
            containers += len(found)
            entries.extend(e for unit in found for e in unit)
    if containers == code.containers:
        return code
    return CudaCode.of(entries, containers=containers, sections=tuple(sections))


def scan_bytes(data: Buffer, name: str = "<bytes>") -> CudaCode:
    """An ELF image or a raw fatbin in memory (or mapped)."""
    if data[:4] == MAGIC_BYTES:
        return _scan_ranges(data, name, [(RAW, 0, len(data))])
    return scan_elf(ElfFile(data, name=name))


def scan(source: str | os.PathLike[str] | Buffer | ElfFile) -> CudaCode:
    """What GPU code ``source`` (a path, bytes, or an open ``ElfFile``) carries.

    ``ElfError`` for a file that is not a readable 64-bit little-endian ELF (or fatbin),
    ``FatbinError`` for a fatbin section that cannot be read; both are ``ValueError``s
    with one line naming the file.
    """
    if isinstance(source, ElfFile):
        return scan_elf(source)
    if isinstance(source, (bytes, bytearray, mmap.mmap)):
        return scan_bytes(source)
    name = os.fspath(source)
    with open(name, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise ElfError(f"{name}: empty file, not an ELF file")
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return scan_bytes(mapped, name)
    finally:
        mapped.close()


__all__ = [
    "FATBIN_MAGIC",
    "SECTIONS",
    "CudaCode",
    "ElfError",
    "Entry",
    "FatbinError",
    "arch_name",
    "scan",
    "scan_bytes",
    "scan_elf",
]
