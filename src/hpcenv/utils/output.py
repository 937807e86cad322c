"""Text and JSON on stdout and stderr, masked: the one stream writer, as ``fsio`` is the
one file writer. Commands print through it (``hpcenv.commands`` re-exports both), and so
does any process entry of hpcenv's own (``python -m hpcenv.slurm.ray_cluster``)."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, masked (``redact.deep``)."""
    from hpcenv.utils import redact

    json.dump(redact.deep(data), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_text(text: str, *, err: bool = False) -> None:
    """Plain text (a rendered script, a job's raw report) on stdout or stderr, masked."""
    from hpcenv.utils import redact

    stream = sys.stderr if err else sys.stdout
    stream.write(redact.text(text))
    stream.flush()
