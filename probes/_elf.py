"""Exported dynamic symbols of a shared library, read with the standard library only.

Why not ``nm -D``: the probe runs on compute nodes where binutils may be missing,
and it must not depend on anything the environment does not ship. Only 64-bit
little-endian ELF is read (x86_64 and aarch64, every platform hpcenv targets); a
32-bit or big-endian file raises ``ElfError`` saying so. The symbols come from the
section headers' ``.dynsym``/``.dynstr``, which every shared library built by
gcc/clang/nvcc keeps (only an ``sstrip``-ed file would lack them).
"""

from __future__ import annotations

import struct
from pathlib import Path

SHT_DYNSYM = 11
STB_GLOBAL, STB_WEAK = 1, 2
SHN_UNDEF = 0
STV_HIDDEN, STV_INTERNAL = 2, 1


class ElfError(ValueError):
    """The file is not a 64-bit little-endian ELF shared library this reader handles."""


def _cstr(blob: bytes, offset: int) -> str:
    end = blob.find(b"\0", offset)
    return blob[offset : end if end >= 0 else len(blob)].decode("utf-8", "replace")


def exported_symbols(path: str | Path) -> list[str]:
    """Names of the defined global/weak, non-hidden symbols in ``.dynsym``, in file order."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        kind = ("32-bit" if data[4] == 1 else "64-bit") + (
            " big-endian" if data[5] == 2 else " little-endian"
        )
        raise ElfError(f"{path}: {kind} ELF; only 64-bit little-endian is supported")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        raise ElfError(f"{path}: no section headers (stripped with sstrip?)")
    sections = []
    for i in range(shnum):
        (_name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize) = (
            struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        )
        sections.append((sh_type, offset, size, link, entsize))
    names: list[str] = []
    for sh_type, offset, size, link, entsize in sections:
        if sh_type != SHT_DYNSYM:
            continue
        _t, str_off, str_size, _l, _e = sections[link]
        strtab = data[str_off : str_off + str_size]
        step = entsize or 24
        for pos in range(offset, offset + size, step):
            st_name, st_info, st_other, st_shndx, _value, _size = struct.unpack_from(
                "<IBBHQQ", data, pos
            )
            bind = st_info >> 4
            visibility = st_other & 0x3
            if st_shndx == SHN_UNDEF or bind not in (STB_GLOBAL, STB_WEAK):
                continue
            if visibility in (STV_HIDDEN, STV_INTERNAL) or st_name == 0:
                continue
            names.append(_cstr(strtab, st_name))
    return names


def plugin_api_versions(symbols: list[str], prefix: str = "ncclNetPlugin_v") -> list[int]:
    """``ncclNetPlugin_v7`` ... -> [7, ...], sorted descending."""
    found = set()
    for s in symbols:
        if s.startswith(prefix) and s[len(prefix) :].isdigit():
            found.add(int(s[len(prefix) :]))
    return sorted(found, reverse=True)
