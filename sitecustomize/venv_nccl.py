"""Load this venv's NCCL first, in this venv's Python processes only (installed by hpcenv
as ``hpcenv_fix_venv_nccl`` with a ``.pth`` line, only into environments whose
profile says ``[job] nccl = "venv"``). Why: see README.md next to this file.

At interpreter start it loads ``nvidia/nccl/lib/libnccl.so.2`` of this site-packages
with ``ctypes``. Every later request for the soname ``libnccl.so.2`` in the process
(torch's CUDA library, a site library linked against the module's NCCL, a
``dlopen("libnccl.so.2")``) is then given this one by the dynamic loader, whatever
``LD_LIBRARY_PATH`` says: a site module's older NCCL stands there.

This is ``LD_PRELOAD`` of the same file, scoped: ``LD_PRELOAD`` reaches every process
the job starts (srun, Ray's raylet and GCS and the workers of any other environment,
compiled tools), this reaches the Pythons of this venv, Ray workers started from it
included. It costs one ``dlopen`` at start (~10-20 ms measured; the file is mapped,
not read). Only ``LD_PRELOAD`` of another libnccl.so.2 comes earlier: the torch probe
names it when it happens.

Without the library (a CPU environment), when it cannot be loaded, or with
``HPCENV_NO_FIXES=1``, it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The NCCL of the nvidia-nccl-cu12/cu13 wheel installed next to this module.
LIBRARY = Path(__file__).resolve().parent / "nvidia" / "nccl" / "lib" / "libnccl.so.2"


def load(library: Path = LIBRARY) -> bool:
    """Load ``library`` (its soname then answers every later request); True when loaded."""
    if not library.is_file():
        return False
    import ctypes

    try:
        ctypes.CDLL(str(library))  # the soname is what the loader matches
    except OSError:  # a fix must never break Python's start: the loader then decides
        return False
    return True


if os.environ.get("HPCENV_NO_FIXES") != "1":
    load()
