"""Text and JSON on stdout and stderr, masked: the one stream writer, as ``fsio`` is the
one file writer. Commands print through it (``hpcenv.commands`` re-exports both), and so
does any process entry of hpcenv's own (``python -m hpcenv.slurm.ray_cluster``)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: What a terminal would act on: C0 controls but tab and newline, DEL, C1 controls (ESC
#: and OSC sequences among them: an OSC 52 from a profile could write the clipboard).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control character a terminal would act on written as a
    visible escape (``\\x1b``), so values from profiles, facts and files cannot drive
    the terminal they are printed on."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, masked (``redact.deep``)."""
    from hpcenv.utils import redact

    json.dump(redact.deep(data), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_text(text: str, *, err: bool = False) -> None:
    """Plain text (a rendered script, a job's raw report) on stdout or stderr, masked."""
    from hpcenv.utils import redact

    stream = sys.stderr if err else sys.stdout
    stream.write(visible(redact.text(text)))
    stream.flush()
