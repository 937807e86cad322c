"""The modules a cluster offers: Lmod's ``module -t avail``, read without a shell.

``module`` is a shell function that runs ``$LMOD_CMD <shell> ...`` and evaluates what it
prints on stdout; the terse listing itself goes to stderr (directory headers end in
``:``, module directories in ``/``, defaults are marked ``(default)`` or ``(D)``). hpcenv
runs Lmod's own command the same way (``$LMOD_CMD bash -t avail``), with the caller's
``MODULEPATH``, and never evaluates its stdout.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from hpcenv.tools import command
from hpcenv.utils.errors import CommandFailed

#: Where distributions install Lmod's command when ``LMOD_CMD`` is not set (Debian's
#: ``lmod`` package: /usr/share/lmod/lmod/libexec/lmod).
LMOD_PLACES = (
    "/usr/share/lmod/lmod/libexec/lmod",
    "/opt/lmod/lmod/libexec/lmod",
    "/usr/local/lmod/lmod/libexec/lmod",
    "/opt/apps/lmod/lmod/libexec/lmod",
)
TIMEOUT_S = 30.0
_MARK = re.compile(r"\((?:default|D|L|[A-Za-z,]+)\)$")


def lmod_command(env: Mapping[str, str]) -> str | None:
    given = env.get("LMOD_CMD")
    if given and Path(given).is_file():
        return given
    return next((p for p in LMOD_PLACES if Path(p).is_file()), None) or shutil.which("lmod")


def parse_terse(text: str) -> tuple[str, ...]:
    """Module names (``cuda/12.6``) from ``module -t avail``'s terse listing."""
    out: list[str] = []
    for raw in text.splitlines():
        line = _MARK.sub("", raw.strip())
        if not line or line.endswith((":", "/")) or " " in line:
            continue
        if line not in out:
            out.append(line)
    return tuple(out)


def available(
    env: Mapping[str, str] | None = None, problems: list[str] | None = None
) -> tuple[str, ...] | None:
    """Every module Lmod offers under ``MODULEPATH``; None when there is no Lmod or no
    ``MODULEPATH`` (``problems`` gets why)."""
    env = os.environ if env is None else env
    problems = [] if problems is None else problems
    lmod = lmod_command(env)
    if lmod is None:
        problems.append("no Lmod here (LMOD_CMD unset and no lmod command found)")
        return None
    if not env.get("MODULEPATH"):
        problems.append("MODULEPATH is empty: Lmod has no module tree to list")
        return None
    try:
        done = command.run([lmod, "bash", "-t", "avail"], env=dict(env), timeout=TIMEOUT_S)
    except CommandFailed as exc:
        problems.append(f"'module -t avail' failed: {str(exc).splitlines()[0]}")
        return None
    return parse_terse(done.stderr)


def matching(modules: tuple[str, ...], fragment: str) -> tuple[str, ...]:
    """Modules whose name (any path part before the version) contains ``fragment``."""
    frag = fragment.lower()
    return tuple(m for m in modules if frag in m.rsplit("/", 1)[0].lower())


__all__ = ["available", "lmod_command", "matching", "parse_terse"]
