"""Lockfiles: ``lockfiles/<profile>-<arch>.txt``, made only by ``hpcenv lock``.

A lock is ``uv pip compile --generate-hashes`` of the plan's requirements for the
target platform (``--python-platform <arch>-manylinux_<glibc>``, ``--python-version``
of the profile), so an aarch64 cluster can be locked from an x86 laptop. torch is
required with its local version label (see ``hpcenv.tools.uv``), so the lock pins the
variant (``torch==2.9.1+cu126``) and a later sync cannot undo the swap.

The lock starts with a header of comment lines: the command (shlex-quoted), the
hpcenv version, the plan digest, the *inputs digest* and the facts it was made for.
A lock matches a plan when its inputs digest equals the plan's: the hash of exactly
what the resolution depends on (requirement lines, index and wheelhouse options,
Python version, target platform). The full plan digest is recorded for people but
not compared, because it also covers things a lock does not depend on (environment
variables, flash-attn settings); comparing it would rebuild locks for nothing.

The header also holds the *body digest*: the sha256 of everything below the header.
A lock whose body was edited by hand (a package removed, a pin changed) no longer
matches it, and ``lock --check``, ``build`` and ``doctor`` refuse it.

A lock never stores credentials: it is written through ``fsio`` (masked), and a body
that masking would change (a ``name @ https://user:pw@host/...`` requirement) is
refused with the fix (credentials in ``~/.netrc`` or uv's environment, not the URL).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from hpcenv import __version__
from hpcenv.build.results import FactsSummary, LockInputs
from hpcenv.decide.plan import require_torch
from hpcenv.kit.masking import URL_USERINFO
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.tools import uv
from hpcenv.tools.command import quote
from hpcenv.utils import fsio, paths, redact
from hpcenv.utils.errors import BadInput, BuildFailed, CommandFailed
from hpcenv.utils.names import canonicalize_name
from hpcenv.utils.output import shell_name

HEADER_MARK = "# hpcenv-lock"


def lockfiles_dir() -> Path:
    """``$HPCENV_LOCKFILES``, else ``./lockfiles`` (the repository's, under version control)."""
    return Path(os.environ.get("HPCENV_LOCKFILES") or Path.cwd() / "lockfiles").absolute()


def build_lock_path(plan: Plan, facts: Facts) -> tuple[Path, str | None]:
    """The lock a build uses and why it must be compiled (None: it fits).

    ``lockfiles/`` in the working directory is a checkout's tracked locks, written only by
    ``hpcenv lock``: a build whose inputs differ (another index URL, other facts) compiles
    its own into ``$HPCENV_HOME/locks/`` and keeps it there. ``$HPCENV_LOCKFILES`` names a
    directory the user chose for builds to write."""
    shared = lock_path(plan, facts)
    why = mismatch(shared, plan, facts)
    if why is None or os.environ.get("HPCENV_LOCKFILES"):
        return shared, why
    own = paths.home() / "locks" / shared.name
    own_why = mismatch(own, plan, facts)
    if own_why is None:
        return own, None
    return own, f"{why}; compiled into {own.parent} ('hpcenv lock {plan.profile}' updates {shared})"


def target_arch(plan: Plan, facts: Facts) -> str:
    return plan.arch or facts.arch or platform.machine()


def lock_path(plan: Plan, facts: Facts) -> Path:
    return lockfiles_dir() / f"{plan.profile}-{target_arch(plan, facts)}.txt"


def target_platform(plan: Plan, facts: Facts) -> str:
    return uv.python_platform(target_arch(plan, facts), facts.glibc)


def facts_summary(facts: Facts) -> FactsSummary:
    """The facts a lock or build depends on (recorded in headers and reports)."""
    return FactsSummary(
        hostname=facts.hostname,
        arch=facts.arch,
        glibc=facts.glibc,
        driver=facts.nvidia.driver_version if facts.nvidia else None,
        compute_capabilities=tuple(facts.compute_capabilities),
        source=facts.source,
    )


def inputs(plan: Plan, facts: Facts) -> LockInputs:
    """Everything the resolution depends on, and nothing else."""
    return LockInputs(
        requirements=tuple(uv.requirements(plan)),
        sources=tuple(uv.source_args(plan)),
        python_version=plan.python,
        python_platform=target_platform(plan, facts),
    )


def inputs_digest(plan: Plan, facts: Facts) -> str:
    blob = json.dumps(inputs(plan, facts).serialize(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def split(text: str) -> tuple[dict[str, str], str]:
    """(header ``key: value`` pairs, body) of a lock's text; no header: ({}, text)."""
    lines = text.splitlines(keepends=True)
    if not lines or not lines[0].startswith(HEADER_MARK):
        return {}, text
    out: dict[str, str] = {}
    n = 1
    for line in lines[1:]:
        if not line.startswith("# "):
            break
        key, sep, value = line[2:].partition(": ")
        if sep:
            out[key.strip()] = value.rstrip("\n")
        n += 1
    return out, "".join(lines[n:])


def read_header(path: Path) -> dict[str, str]:
    """``key: value`` pairs of the header; empty when the file has none."""
    return split(fsio.read_text(path, "lockfile"))[0]


def body_digest(body: str) -> str:
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def mismatch(path: Path, plan: Plan, facts: Facts) -> str | None:
    """Why the lock at ``path`` does not fit ``plan`` (None: it fits)."""
    if not path.is_file():
        return f"{path} does not exist"
    header, _ = split(fsio.read_text(path, "lockfile"))
    if not header:
        return f"{path} has no hpcenv header (not made by 'hpcenv lock'; never edit locks by hand)"
    if "body-digest" not in header:
        return f"{path} has no body digest (made by an older hpcenv)"
    want = inputs_digest(plan, facts)
    have = header.get("inputs-digest")
    if have != want:
        return (
            f"{path} was made for other inputs (inputs digest {have}, plan needs {want}; "
            f"locked for {header.get('requirements', '?')} on {header.get('python-platform', '?')})"
        )
    return None


def edited(path: Path) -> str | None:
    """Why the lock at ``path`` cannot be trusted: its body was changed after 'hpcenv
    lock' wrote it (None: unchanged, or no lock / no digest to check)."""
    if not path.is_file():
        return None
    header, body = split(fsio.read_text(path, "lockfile"))
    want = header.get("body-digest")
    if want is None or want == body_digest(body):
        return None
    return (
        f"{path} was edited after 'hpcenv lock' wrote it (its body does not match the "
        "body-digest in its header); never edit locks by hand: restore it (git checkout), "
        "or regenerate it with 'hpcenv lock'"
    )


def check_not_edited(path: Path) -> None:
    """BadInput when the lock at ``path`` was edited by hand (``edited``)."""
    why = edited(path)
    if why:
        raise BadInput(why)


def render_header(plan: Plan, facts: Facts, body: str) -> str:
    data = inputs(plan, facts)
    argv = uv.compile_argv_for_header(
        plan, python_platform=data.python_platform, python_version=plan.python
    )
    lines = [
        f"{HEADER_MARK}: generated by 'hpcenv lock {plan.profile}'; never edit by hand",
        f"profile: {plan.profile}",
        f"hpcenv-version: {__version__}",
        f"uv-version: {uv.version()}",
        f"plan-digest: {plan.digest()}",
        f"inputs-digest: {inputs_digest(plan, facts)}",
        f"python-version: {plan.python}",
        f"python-platform: {data.python_platform}",
        f"torch: {plan.torch.version}+{plan.torch.backend} "
        f"from {plan.torch_wheel or plan.torch.index_url or ''}",
        f"requirements: {json.dumps(list(data.requirements))}",
        f"facts: {json.dumps(facts_summary(facts).serialize(), sort_keys=True)}",
        f"command: {quote(argv)}",  # masked on writing (an index with user:token@)
        f"body-digest: {body_digest(body)}",
    ]
    return "".join(f"# {line}\n" if i else f"{line}\n" for i, line in enumerate(lines))


def compile_lock(
    plan: Plan,
    facts: Facts,
    *,
    path: Path | None = None,
    log: IO[str] | None = None,
) -> Path:
    """Resolve ``plan`` for its platform and write the lock atomically; returns its path."""
    require_torch(plan)
    path = path or lock_path(plan, facts)
    # uv works outside the lockfiles directory (often the repository): a killed lock
    # leaves nothing there; only the final rename touches it.
    with fsio.work_dir("hpcenv-lock-") as tmp:
        req_in = tmp / "requirements.in"
        fsio.write_bytes(req_in, "".join(f"{r}\n" for r in uv.requirements(plan)).encode())
        out = tmp / "lock.txt"
        try:
            uv.compile_lock(
                req_in,
                out,
                plan=plan,
                python_platform=target_platform(plan, facts),
                python_version=plan.python,
                log=log,
            )
        except CommandFailed as exc:
            detail = uv.error_summary(exc.output) or str(exc)
            raise BuildFailed(
                f"locking {plan.profile} failed: {detail} (is the index reachable? "
                f"set [packages] find_links / offline, or HPCENV_TORCH_INDEX_URL for a mirror)"
            ) from exc
        body = fsio.read_text(out, "uv's lock output")
    if redact.text(body) != body:
        raise BadInput(
            f"locking {plan.profile}: the lock would store credentials (a requirement or "
            "index URL with user:password@); write the URL without them and give uv the "
            "credentials through ~/.netrc or UV_INDEX_<NAME>_USERNAME/_PASSWORD"
        )
    fsio.write_text(path, render_header(plan, facts, body) + body)
    return path


def pinned(path: Path) -> dict[str, str]:
    """``{name: version}`` pinned in a lock (``torch`` -> ``2.9.1+cu126``)."""
    out: dict[str, str] = {}
    for line in split(fsio.read_text(path, "lockfile"))[1].splitlines():
        if line and not line[0].isspace() and not line.startswith(("#", "-")) and "==" in line:
            name, _, rest = line.partition("==")
            out[canonicalize_name(name.strip().split("[")[0])] = (
                rest.split()[0].rstrip("\\").strip()
            )
    return out


def credentials_as_references(text: str, urls: Iterable[str], environ: Mapping[str, str]) -> str:
    """A lock's ``text`` (as uv wrote it, or masked: ``https://REDACTED@host``) with the
    credentials of each index URL in ``urls`` written instead as the environment
    variable that holds them (``https://${PIP_TOKEN}@host``, or ``${VAR}`` for a whole URL
    one variable holds), which uv and pip expand when they read the file: a lock never holds
    a secret, nor a masked URL no one can install from. BadInput naming the host (never the
    secret) when no variable holds them."""
    for url in urls:
        m = URL_USERINFO.search(url)
        if m is None or "${" in m.group("info"):
            continue
        if url in text or redact.userinfo(url) in text:
            ref = _referenced(url, m, environ)
            text = text.replace(url, ref).replace(redact.userinfo(url), ref)
    return text


def _referenced(url: str, m: re.Match[str], environ: Mapping[str, str]) -> str:
    info = m.group("info")
    names = sorted(
        k for k, v in environ.items() if v and not k.startswith("HPCENV_") and shell_name(k)
    )
    for name in names:
        if environ[name] == url:
            return f"${{{name}}}"
    for name in names:
        if environ[name] == info:
            return url.replace(f"{info}@", f"${{{name}}}@", 1)
    user, _, password = info.partition(":")
    for name in names:
        if password and environ[name] == password:
            return url.replace(f"{info}@", f"{user}:${{{name}}}@", 1)
    host = url[m.end() :].split("/", 1)[0]
    raise BadInput(
        f"the lock names the index {m.group('scheme')}{host} with its credentials, and a lock "
        "never holds a secret: put them in an environment variable (TOKEN) and the lock "
        "refers to it, or write ${TOKEN} in their place in the project's file (uv and pip "
        f"expand it), or put them in ~/.netrc (machine {host.split(':')[0]})"
    )
