"""Where hpcenv keeps things. One place, so every module agrees.

``$HPCENV_HOME`` (default ``./.hpcenv`` in the working directory) holds:

- ``venvs/<profile>``: the built environment of a profile, a symlink switched
  atomically to the latest complete build ``venvs/<profile>-<stamp>``;
- ``venvs/<profile>-<project>`` (or ``build --project --name``): a user's uv project
  built for that profile, the same way, beside the profile's own environment;
- ``cache/``: built wheels (flash-attn) keyed by their ABI (parsed data files are kept
  per user instead, outside it: :func:`per_user_cache_dir`);
- ``logs/``: build logs and JSON build reports;
- ``kit/<hash>``: the probe kit alone, for target environments' ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

#: Written into a build directory when (and only when) the build completed.
BUILD_MARKER = ".hpcenv-build.json"


def home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    where = Path(env.get("HPCENV_HOME") or Path.cwd() / ".hpcenv").absolute()
    if any(ord(c) < 32 or ord(c) == 127 for c in str(where)):
        from hpcenv.utils.errors import BadInput

        name = "HPCENV_HOME" if env.get("HPCENV_HOME") else "the working directory"
        raise BadInput(
            f"{name} {str(where)!r} holds a line break or control character: scripts in an "
            "environment there could not run (their #! line would break); use another path"
        )
    return where


def venvs_dir() -> Path:
    return home() / "venvs"


def venv_dir(profile_name: str) -> Path:
    """The stable path of a profile's environment (a symlink to the current build)."""
    return venvs_dir() / profile_name


def built_venv(name: str) -> Path:
    """``venvs/<name>`` when it is hpcenv's own build link (or absent: not built yet): a
    symlink to a build directory beside it (``<name>-...``, holding hpcenv's build marker).
    Anything else there (a link elsewhere, a directory, a file) was not made by hpcenv and
    is never run: BadInput naming it, what it is and its owner."""
    import pwd
    import stat

    from hpcenv.utils.errors import BadInput

    link = venv_dir(name)
    try:
        st = os.lstat(link)
    except FileNotFoundError:
        return link
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(link)
        beside = link.parent / target
        ours = "/" not in target and target.startswith(f"{name}-")
        if ours and not beside.is_symlink() and (beside / BUILD_MARKER).is_file():
            return link
        what = f"a symlink to {target}"
    else:
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "a file"
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = f"uid {st.st_uid}"
    raise BadInput(
        f"{link} is not an environment hpcenv built ({what}, owned by {owner}); hpcenv runs "
        f"only its own builds. Remove it (or ask {owner} to) and run 'hpcenv build {name}'"
    )


def environment_profile(name: str) -> str | None:
    """The profile an environment ``venvs/<name>`` was built for (from its build marker),
    e.g. ``isambard`` for ``isambard-open-instruct``; None when there is no such build."""
    from hpcenv.utils.errors import BadInput

    try:
        data = json.loads((built_venv(name) / BUILD_MARKER).read_text())
    except (OSError, ValueError, BadInput):
        return None
    profile = data.get("profile") if isinstance(data, dict) else None
    return profile if isinstance(profile, str) else None


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def site_packages(venv: Path) -> list[Path]:
    """The site-packages directories of ``venv`` (``lib/python3*``, then ``lib64/python3*``
    where that is another directory, not a link to the first); empty when it has none."""
    found: dict[Path, Path] = {}
    for lib in ("lib", "lib64"):
        for site in sorted(venv.glob(f"{lib}/python3*/site-packages")):
            if site.is_dir():
                found.setdefault(site.resolve(), site)
    return list(found.values())


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HPCENV_CACHE") or home(env) / "cache").absolute()


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """A cache that follows the user rather than the working directory: ``$HPCENV_CACHE``,
    else ``$HPCENV_HOME/cache``, else :func:`per_user_cache_dir`, so a command run
    anywhere does not leave a ``.hpcenv/`` behind."""
    env = os.environ if env is None else env
    if env.get("HPCENV_CACHE") or env.get("HPCENV_HOME"):
        return cache_dir(env)
    return per_user_cache_dir(env)


def per_user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """This user's own cache, whatever ``$HPCENV_HOME`` or ``$HPCENV_CACHE``:
    ``$XDG_CACHE_HOME/hpcenv`` (an absolute ``XDG_CACHE_HOME`` only, as the XDG base
    directory spec says), else ``~/.cache/hpcenv``. It holds what depends on nothing but
    the bytes it was made from (``utils/data_cache``: the parsed knowledge tables, uv.lock
    and pyproject.toml files), so a new or group-shared home finds it warm. RuntimeError
    when there is no home directory to put it in."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME") or ""
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "hpcenv"


def logs_dir() -> Path:
    return home() / "logs"


def repo_dir(name: str) -> Path:
    """A top-level directory shipped with hpcenv (``probes``, ``sitecustomize``, ``envs``):
    the source checkout's in development, the wheel's ``_<name>`` copy when installed."""
    here = Path(__file__).resolve().parents[1]
    for candidate in (here / f"_{name}", here.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hpcenv installation is missing its {name}/ directory")


def kit_path() -> Path:
    """A directory holding only ``hpcenv/__init__.py`` and ``hpcenv/kit/``, for the probes'
    ``PYTHONPATH``: the target environment imports the kit and sees nothing else of
    hpcenv, nor hpcenv's dependencies (which sit next to hpcenv in an installed wheel's
    site-packages, so that directory cannot be put on the path).

    Copies, made once per kit content under ``$HPCENV_HOME/kit/<hash>`` (a job's other
    nodes see it there, as they see the results directory) and never changed after:
    a concurrent run finds it complete or makes its own and keeps the first.
    """
    import hashlib
    import secrets
    import shutil

    from hpcenv.utils import fsio
    from hpcenv.utils.errors import BadInput

    pkg = Path(__file__).resolve().parents[1]
    files = {"hpcenv/__init__.py": pkg / "__init__.py"}
    for f in sorted((pkg / "kit").iterdir()):
        if f.is_file() and f.suffix in (".py", ".json"):
            files[f"hpcenv/kit/{f.name}"] = f
    digest = hashlib.sha256()
    for rel, src in files.items():
        digest.update(rel.encode() + b"\0" + src.read_bytes() + b"\0")
    base = home() / "kit"
    # one copy per user: it runs as you in every probe, so nobody else may have made it
    root = base / f"{digest.hexdigest()[:16]}-{os.getuid()}"
    # another user's symlink planted there would have the probes import its code
    if fsio.check_dir(root).is_dir():
        if not (why := fsio.untrusted(root)) and os.lstat(root).st_uid == os.getuid():
            return root
        try:  # appended to by someone else (a copy under umask 002): made again
            shutil.rmtree(root)
        except OSError as exc:
            raise BadInput(
                f"the probes' kit {root} cannot run as you ({why or 'not yours'}) and "
                f"cannot be removed ({exc.strerror}); remove it, or set HPCENV_HOME to a "
                "directory of yours"
            ) from exc
    # a container: the group adds its own copies (sticky: never renames yours); no foreign links
    fsio.ensure_dir(base, sticky=True)
    tmp = base / f"{fsio.TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.mkdir(mode=0o755)
        (tmp / "hpcenv").mkdir(mode=0o755)
        (tmp / "hpcenv" / "kit").mkdir(mode=0o755)
        new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for rel, src in files.items():  # a directory only this process knows: plain writes
            with os.fdopen(os.open(tmp / rel, new, 0o644), "wb") as fh:
                fh.write(src.read_bytes())
        tmp.rename(root)
    except OSError:
        if not root.is_dir():  # not a concurrent run that made it first: a real error
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def kit_pythonpath(existing: str | None) -> str:
    """``PYTHONPATH`` for a target environment's Python: the kit first, then what the
    caller had (a user's own PYTHONPATH)."""
    return os.pathsep.join(p for p in (str(kit_path()), existing) if p)
