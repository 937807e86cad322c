"""Text and JSON on stdout and stderr, masked: the one stream writer, as ``fsio`` is the
one file writer. Commands print through it (``hpcenv.commands`` re-exports both), and so
does any process entry of hpcenv's own (``python -m hpcenv.slurm.ray_cluster``)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterable
from typing import Any

#: What a terminal would act on: C0 controls but tab and newline, DEL, C1 controls (ESC
#: and OSC sequences among them: an OSC 52 from a profile could write the clipboard).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control character a terminal would act on written as a
    visible escape (``\\x1b``), so values from profiles, facts and files cannot drive
    the terminal they are printed on."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(text: str) -> str:
    """``text`` as one line: a newline or carriage return in it (a file name, a value read
    from a file) written as ``\\n``/``\\r``, so an error line is never split or rewritten."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


#: What ``shell_quote`` writes as an escape: every control character, newline and tab too.
_SCRIPT_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _ansi_c(ch: str) -> str:
    if ch in "\\'":
        return "\\" + ch
    if _SCRIPT_CONTROL.fullmatch(ch):
        # C1 as its UTF-8 bytes: bash's \\u depends on the locale the job runs in
        return "".join(f"\\x{b:02x}" for b in ch.encode())
    return ch


def shell_quote(value: str) -> str:
    """``shlex.quote``, except that a value with control characters becomes bash's
    ``$'...'`` with each one escaped (``$'a\\x1b]52;...'``): the same word when bash runs
    the script, and no raw escape sequence in the file for a terminal to act on when
    someone reads it. Every value hpcenv writes into a script is quoted this way."""
    if not _SCRIPT_CONTROL.search(value):
        return shlex.quote(value)
    return "$'" + "".join(_ansi_c(ch) for ch in value) + "'"


#: The shell's rule for a variable name: only such a name is written into a script (an
#: ``export NAME=``, a ``"${NAME}"`` reference); any other text there would be code.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shell_name(name: str) -> bool:
    """Whether ``name`` is a variable name the shell reads as one (:data:`SHELL_NAME`)."""
    return SHELL_NAME.fullmatch(name) is not None


def shell_join(words: Iterable[str]) -> str:
    """``shlex.join`` with ``shell_quote``."""
    return " ".join(shell_quote(w) for w in words)


#: JSON objects printed so far: ``cli.main`` prints one for an error when a ``--json``
#: command printed none (JSON on every outcome of every command that takes ``--json``).
json_printed = [0]


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, masked (``redact.deep``)."""
    from hpcenv.utils import redact

    json_printed[0] += 1
    json.dump(redact.deep(data), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_text(text: str, *, err: bool = False) -> None:
    """Plain text (a rendered script, a job's raw report) on stdout or stderr, masked."""
    from hpcenv.utils import redact

    stream = sys.stderr if err else sys.stdout
    stream.write(visible(redact.text(text)))
    stream.flush()


def status_line(text: str, *, redraw: bool) -> None:
    """A progress line on stderr: redrawn in place on a terminal (``redraw``), else one
    plain line; masked and made visible like ``print_text``."""
    from hpcenv.utils import redact

    shown = visible(redact.text(text))
    sys.stderr.write(f"\r{shown}\x1b[K" if redraw else f"{shown}\n")
    sys.stderr.flush()
