"""One ELF reader: section headers, ``.dynamic`` and exported dynamic symbols.

Standard library only (see ``hpcenv.kit``). A file is read through ``mmap``, so a
500 MB ``libtorch_cuda.so`` is not read into memory: only the pages holding the
headers that are asked for are touched. ``ElfFile(data)`` reads from ``bytes`` too.

Only 64-bit little-endian ELF is read (x86_64 and aarch64, every platform hpcenv
targets). Anything else raises ``ElfError`` (a ``ValueError``) with one line naming the
file and what is wrong: not ELF, 32-bit or big-endian, truncated, no section headers.

- ``.dynamic`` is found the way the dynamic loader finds it, through the program
  header ``PT_DYNAMIC``, with its string table mapped from ``DT_STRTAB`` through the
  ``PT_LOAD`` segments; so ``needed``/``runpath``/``soname`` also work on a library
  whose section headers were removed (``sstrip``). Without program headers (an object
  file) the ``.dynamic`` section is used, and without either the lists are empty.
- ``runpath`` is ``DT_RUNPATH``, else ``DT_RPATH`` (the loader ignores RPATH when RUNPATH
  is present), split on ``:``, with ``$ORIGIN`` left as written.
- ``exported_symbols`` are the defined global/weak, non-hidden symbols of ``.dynsym``
  in file order: what ``nm -D --defined-only`` lists. ``.dynsym`` is found through the
  section headers, which every library built by gcc/clang/nvcc keeps.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

#: What ``ElfFile`` reads from: bytes in memory or a read-only map of a file.
Buffer = bytes | bytearray | mmap.mmap

SHT_DYNAMIC, SHT_NOBITS, SHT_DYNSYM = 6, 8, 11
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29
STB_GLOBAL, STB_WEAK = 1, 2
STV_INTERNAL, STV_HIDDEN = 1, 2
SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF
MACHINES = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64", 190: "cuda"}

_EHDR = struct.Struct("<HHIQQQIHHHHHH")  # e_type .. e_shstrndx, at offset 16
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")
_SYM = struct.Struct("<IBBHQQ")


class ElfError(ValueError):
    """The file is not a 64-bit little-endian ELF file this reader can read."""


@dataclass(frozen=True, kw_only=True)
class Section:
    """One section header."""

    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True, kw_only=True)
class Segment:
    """One program header."""

    type: int
    offset: int
    vaddr: int
    filesz: int


class ElfFile:
    """A 64-bit little-endian ELF file: ``ElfFile.open(path)`` (mapped) or ``ElfFile(data)``.

    Use as a context manager (or call ``close``) when opened from a path.
    """

    def __init__(self, data: Buffer | memoryview, *, name: str = "<bytes>") -> None:
        self.name = name
        self.data: Buffer = bytes(data) if isinstance(data, memoryview) else data
        self._map: mmap.mmap | None = None
        self._sections: list[Section] | None = None
        self._segments: list[Segment] | None = None
        head = bytes(self.data[:64])
        if head[:4] != b"\x7fELF":
            raise ElfError(f"{name}: not an ELF file")
        if len(head) < 6 or head[4] != 2 or head[5] != 1:
            bits = {1: "32-bit", 2: "64-bit"}.get(head[4] if len(head) > 4 else 0, "unknown-class")
            order = {1: "little-endian", 2: "big-endian"}.get(
                head[5] if len(head) > 5 else 0, "unknown-byte-order"
            )
            raise ElfError(f"{name}: {bits} {order} ELF; only 64-bit little-endian is supported")
        if len(head) < 64:
            raise ElfError(f"{name}: truncated ELF header ({len(self.data)} bytes, needs 64)")
        (
            self.type,
            self.machine_id,
            _version,
            _entry,
            self.phoff,
            self.shoff,
            _flags,
            _ehsize,
            self.phentsize,
            self.phnum,
            self.shentsize,
            self.shnum,
            self.shstrndx,
        ) = _EHDR.unpack_from(head, 16)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ElfFile:
        """Map ``path`` read-only (OSError when it cannot be opened)."""
        name = os.fspath(path)
        with open(name, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise ElfError(f"{name}: empty file, not an ELF file")
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            elf = cls(mapped, name=name)
        except BaseException:
            mapped.close()
            raise
        elf._map = mapped
        return elf

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def machine(self) -> str:
        """``x86_64``, ``aarch64``, ... (``machine-N`` for others)."""
        return MACHINES.get(self.machine_id, f"machine-{self.machine_id}")

    # --- reading ----------------------------------------------------------------------

    def _need(self, offset: int, length: int, what: str) -> None:
        if offset < 0 or length < 0 or offset + length > len(self.data):
            raise ElfError(
                f"{self.name}: truncated: {what} at offset {offset} ({length} bytes) runs past "
                f"the end of the file ({len(self.data)} bytes)"
            )

    def read(self, offset: int, length: int, what: str = "data") -> bytes:
        """``length`` bytes at ``offset``; ``ElfError`` when the file is too short."""
        self._need(offset, length, what)
        return bytes(self.data[offset : offset + length])

    def _cstr(self, start: int, end: int) -> str:
        """The NUL-terminated string at ``start``, not reading past ``end``."""
        if start >= end or start < 0:
            return ""
        stop = self.data.find(b"\0", start, end)
        return bytes(self.data[start : stop if stop >= 0 else end]).decode("utf-8", "replace")

    # --- sections ---------------------------------------------------------------------

    def sections(self) -> list[Section]:
        """Every section header, in order (``ElfError`` when there are none)."""
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def _read_sections(self) -> list[Section]:
        count, names_at = self.shnum, self.shstrndx
        if self.shoff == 0:
            raise ElfError(f"{self.name}: no section headers (stripped with sstrip?)")
        if self.shentsize < _SHDR.size:
            raise ElfError(f"{self.name}: section header size {self.shentsize} is too small")
        if count == 0 or names_at == SHN_XINDEX:  # extended numbering: kept in section 0
            self._need(self.shoff, _SHDR.size, "section header 0")
            first = _SHDR.unpack_from(self.data, self.shoff)
            count = count or first[5]
            names_at = first[6] if names_at == SHN_XINDEX else names_at
        if count == 0:
            raise ElfError(f"{self.name}: no section headers (stripped with sstrip?)")
        self._need(self.shoff, count * self.shentsize, f"{count} section headers")
        raw = [_SHDR.unpack_from(self.data, self.shoff + i * self.shentsize) for i in range(count)]
        str_start = str_end = 0
        if names_at < count:
            _n, str_type, _f, _a, str_off, str_size, *_ = raw[names_at]
            if str_type != SHT_NOBITS:
                str_start, str_end = str_off, min(str_off + str_size, len(self.data))
        out = []
        for name_off, sh_type, flags, addr, offset, size, link, info, _align, entsize in raw:
            name = self._cstr(str_start + name_off, str_end) if str_end else ""
            out.append(
                Section(
                    name=name,
                    type=sh_type,
                    flags=flags,
                    addr=addr,
                    offset=offset,
                    size=size,
                    link=link,
                    info=info,
                    entsize=entsize,
                )
            )
        return out

    def section(self, name: str) -> Section | None:
        """The first section called ``name``, or None."""
        return next((s for s in self.sections() if s.name == name), None)

    def section_range(self, sec: Section) -> tuple[int, int]:
        """(start, end) file offsets of ``sec``'s contents, checked against the file size."""
        if sec.type == SHT_NOBITS:
            return sec.offset, sec.offset
        self._need(sec.offset, sec.size, f"section {sec.name or '?'}")
        return sec.offset, sec.offset + sec.size

    # --- program headers and .dynamic -------------------------------------------------

    def segments(self) -> list[Segment]:
        """Every program header (empty for an object file)."""
        if self._segments is None:
            segs = []
            if self.phoff and self.phnum and self.phentsize >= _PHDR.size:
                self._need(self.phoff, self.phnum * self.phentsize, "program headers")
                for i in range(self.phnum):
                    p_type, _fl, off, vaddr, _pa, filesz, _mem, _al = _PHDR.unpack_from(
                        self.data, self.phoff + i * self.phentsize
                    )
                    segs.append(Segment(type=p_type, offset=off, vaddr=vaddr, filesz=filesz))
            self._segments = segs
        return self._segments

    def _file_offset(self, vaddr: int) -> int | None:
        for seg in self.segments():
            if seg.type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg.offset + vaddr - seg.vaddr
        return None

    def _dynamic_range(self) -> tuple[int, int, Section | None] | None:
        dyn = next((s for s in self.segments() if s.type == PT_DYNAMIC), None)
        if dyn is not None:
            self._need(dyn.offset, dyn.filesz, "the dynamic segment")
            return dyn.offset, dyn.offset + dyn.filesz, None
        if self.shoff == 0:
            return None
        sec = next((s for s in self.sections() if s.type == SHT_DYNAMIC), None)
        if sec is None:
            return None
        start, end = self.section_range(sec)
        return start, end, sec

    def dynamic(self) -> list[tuple[int, int | str]]:
        """``.dynamic`` entries up to ``DT_NULL``: (tag, value); string-valued tags
        (NEEDED, SONAME, RPATH, RUNPATH) carry their string."""
        found = self._dynamic_range()
        if found is None:
            return []
        start, end, sec = found
        entries: list[tuple[int, int]] = []
        for pos in range(start, end - _DYN.size + 1, _DYN.size):
            tag, value = _DYN.unpack_from(self.data, pos)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
        strtab = self._dynamic_strtab(entries, sec)
        out: list[tuple[int, int | str]] = []
        for tag, value in entries:
            if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                if strtab is None:
                    raise ElfError(f"{self.name}: .dynamic names strings but has no string table")
                out.append((tag, self._cstr(strtab[0] + value, strtab[1])))
            else:
                out.append((tag, value))
        return out

    def _dynamic_strtab(
        self, entries: list[tuple[int, int]], sec: Section | None
    ) -> tuple[int, int] | None:
        values = dict(entries)
        if DT_STRTAB in values:
            offset = self._file_offset(values[DT_STRTAB])
            if offset is not None:
                size = values.get(DT_STRSZ, len(self.data) - offset)
                return offset, min(offset + size, len(self.data))
        if sec is None and self.shoff:
            sec = next((s for s in self.sections() if s.type == SHT_DYNAMIC), None)
        if sec is not None and sec.link < len(self.sections()):
            return self.section_range(self.sections()[sec.link])
        return None

    def needed(self) -> list[str]:
        return [str(v) for t, v in self.dynamic() if t == DT_NEEDED]

    def runpath(self) -> list[str]:
        entries = self.dynamic()
        for tag in (DT_RUNPATH, DT_RPATH):
            paths = [str(v) for t, v in entries if t == tag]
            if paths:
                return [p for joined in paths for p in joined.split(":") if p]
        return []

    def soname(self) -> str | None:
        return next((str(v) for t, v in self.dynamic() if t == DT_SONAME), None)

    # --- symbols ----------------------------------------------------------------------

    def exported_symbols(self) -> list[str]:
        """Defined global/weak, non-hidden symbols of ``.dynsym``, in file order."""
        sections = self.sections()
        return [name for sec in sections if sec.type == SHT_DYNSYM for name in self._dynsym(sec)]

    def _dynsym(self, sec: Section) -> Iterator[str]:
        if sec.link >= len(self.sections()):
            raise ElfError(f"{self.name}: .dynsym links to missing section {sec.link}")
        str_start, str_end = self.section_range(self.sections()[sec.link])
        start, end = self.section_range(sec)
        step = sec.entsize or _SYM.size
        if step < _SYM.size:
            raise ElfError(f"{self.name}: .dynsym entry size {step} is too small")
        for pos in range(start, end - _SYM.size + 1, step):
            st_name, st_info, st_other, st_shndx, _value, _size = _SYM.unpack_from(self.data, pos)
            if st_shndx == SHN_UNDEF or st_info >> 4 not in (STB_GLOBAL, STB_WEAK):
                continue
            if st_other & 0x3 in (STV_HIDDEN, STV_INTERNAL) or st_name == 0:
                continue
            yield self._cstr(str_start + st_name, str_end)


def _open(path: str | os.PathLike[str] | Path) -> ElfFile:
    return ElfFile.open(path)


def needed(path: str | os.PathLike[str]) -> list[str]:
    """``DT_NEEDED`` libraries of ``path``, in order."""
    with _open(path) as elf:
        return elf.needed()


def runpath(path: str | os.PathLike[str]) -> list[str]:
    """``DT_RUNPATH`` (else ``DT_RPATH``) directories of ``path``; ``$ORIGIN`` unexpanded."""
    with _open(path) as elf:
        return elf.runpath()


def soname(path: str | os.PathLike[str]) -> str | None:
    """``DT_SONAME`` of ``path``, or None."""
    with _open(path) as elf:
        return elf.soname()


def exported_symbols(path: str | os.PathLike[str]) -> list[str]:
    """Names of the defined global/weak, non-hidden symbols in ``.dynsym``, in file order."""
    with _open(path) as elf:
        return elf.exported_symbols()


__all__ = [
    "ElfError",
    "ElfFile",
    "Section",
    "Segment",
    "exported_symbols",
    "needed",
    "runpath",
    "soname",
]
