"""Write fatbin bytes by the layout ``hpcenv.kit.fatbin`` documents, for parser edge cases
(padding, concatenated entries, truncation, odd versions) that nvcc does not produce on
demand. The layout itself is checked against NVIDIA's cuobjdump on nvcc-compiled fixtures
and real libraries in ``test_fatbin_cuobjdump_oracle.py``; this only exercises the parser's paths.

``elf_with_sections`` puts such bytes into a real shared library compiled here with gcc
(``objcopy --add-section``), as nvcc's host linker would.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from support import require

ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
MAGIC = 0xBA55ED50
F_64BIT_LINUX = 0x11
F_LZ4, F_ZSTD, F_ARCH, F_FAMILY = 0x2000, 0x8000, 0x100000, 0x200000


def entry(
    kind: int,
    sm: int,
    *,
    flags: int = F_64BIT_LINUX,
    payload: bytes = b"\x7fELF" + b"\0" * 12,
    version: tuple[int, int] = (1, 8),
    extra_header: bytes = b"",
    options_offset: int = 0,
) -> bytes:
    """One entry: a 64-byte header (+ ``extra_header``), then ``payload``."""
    hsize = ENTRY.size + len(extra_header)
    head = ENTRY.pack(
        kind, 0x0101, hsize, len(payload), 0, options_offset, version[1], version[0], sm,
        0, 0, flags, 0, 0,
    )  # fmt: skip
    return head + extra_header + payload


def concatenated(members: list[tuple[int, int, int]], payload: bytes = b"\0" * 32) -> bytes:
    """A kind-0x100 entry holding ``members`` (kind, sm, flags)."""
    table = struct.pack("<II", len(members), 8 + 64 * len(members))
    for kind, sm, flags in members:
        table += ENTRY.pack(kind, 0x0101, 0, 16, 0, 0, 8, 1, sm, 0, 0, flags, 0, 0)
    return entry(0x100, 0, flags=F_64BIT_LINUX | F_ZSTD, payload=payload,
                 extra_header=table, options_offset=64)  # fmt: skip


def container(*entries: bytes, version: int = 1) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", MAGIC, version, 16, len(body)) + body


def elf_with_sections(tmp_path: Path, sections: dict[str, bytes], name: str = "lib") -> Path:
    """A gcc-built shared library carrying ``sections`` (name -> contents)."""
    gcc, objcopy = shutil.which("gcc"), shutil.which("objcopy")
    require("gcc", gcc is not None and objcopy is not None, "gcc or objcopy not on PATH")
    assert gcc is not None and objcopy is not None
    src = tmp_path / f"{name}.c"
    src.write_text("int answer(void) { return 42; }\n")
    out = tmp_path / f"{name}.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    args = [objcopy]
    for i, (sec, data) in enumerate(sections.items()):
        blob = tmp_path / f"{name}.{i}.bin"
        blob.write_bytes(data)
        args += ["--add-section", f"{sec}={blob}", "--set-section-flags", f"{sec}=alloc,readonly"]
    subprocess.run([*args, str(out)], check=True)
    return out
