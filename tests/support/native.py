"""Native test libraries compiled here with gcc (the ELF reader's and the OFI probe's tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support import require


def compile_so(tmp_path: Path, source: str, name: str, *extra: str) -> Path:
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "gcc is not on PATH")
    assert gcc is not None
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(out), str(src), *extra], check=True)
    return out
