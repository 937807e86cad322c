"""The one place hpcenv calls uv.

Every uv invocation is an argument list run through ``command.run`` (logged,
shlex-quoted, timed). Which indexes, wheelhouses and offline switches a call gets
is derived here from the ``Plan``, so lock, build and swap agree on where torch
comes from:

- ``plan.torch_wheel`` set (a matching wheel sits in a wheelhouse): torch is
  required as ``torch==<version>+<label>`` of that file and found through
  ``--find-links``; the PyTorch index is never contacted (it may be unreachable).
- otherwise torch is required *with its local version label*
  (``torch==2.9.1+cu126``) and the variant index is added. PyPI never carries the
  labelled builds, so the requirement can only be met from the variant index and
  the variant is pinned in the lock; a later ``sync`` cannot undo it. The
  ``unsafe-best-match`` strategy lets the remaining packages come from whichever
  index has the best version (the PyTorch index mirrors a few PyPI packages, often
  older ones, which ``first-index`` would otherwise force on us).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from hpcenv.tools import command
from hpcenv.tools.command import Completed
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput, CommandFailed

if TYPE_CHECKING:  # packaging and the plan are imported where used: audit starts uv first
    from hpcenv.models.plan import Plan


def uv_argv() -> list[str]:
    """How to start uv: ``$HPCENV_UV``, ``uv`` on PATH, else the uv installed with hpcenv
    (a dependency: ``.venv/bin/hpcenv`` works without its venv on PATH)."""
    explicit = os.environ.get("HPCENV_UV")
    if explicit:
        return [explicit]
    found = shutil.which("uv")
    if found:
        return [found]
    try:
        import uv as _uv  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise BadInput(
            "uv not found: install it (pip install uv, or "
            "https://docs.astral.sh/uv/getting-started/installation/) or set HPCENV_UV"
        ) from exc
    try:
        return [str(_uv.find_uv_bin())]
    except FileNotFoundError:
        return [sys.executable, "-m", "uv"]


def available() -> bool:
    try:
        uv_argv()
    except BadInput:
        return False
    return True


def wheel_version(path: str | os.PathLike[str]) -> str:
    """The version (with local label) in a wheel's file name."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return str(parse_wheel_filename(Path(path).name)[1])
    except InvalidWheelFilename as exc:
        raise BadInput(f"{path}: not a wheel file name (name-version-py-abi-platform.whl)") from exc


def torch_requirement(plan: Plan) -> str | None:
    """The requirement line that fixes torch's version *and* variant."""
    t = plan.torch
    if plan.torch_wheel:
        return f"torch=={wheel_version(plan.torch_wheel)}"
    if not t.version:
        return None
    if t.backend and "+" not in t.version:
        return f"torch=={t.version}+{t.backend}"
    return f"torch=={t.version}"


def requirements(plan: Plan) -> list[str]:
    """The top-level requirements of a plan, torch first (the lock's input)."""
    torch = torch_requirement(plan)
    return ([torch] if torch else []) + list(plan.packages)


def find_links(plan: Plan) -> list[str]:
    links = list(plan.find_links)
    if plan.torch_wheel:
        folder = str(Path(plan.torch_wheel).parent)
        if folder not in links:
            links.append(folder)
    return links


def source_args(plan: Plan) -> list[str]:
    """Index, wheelhouse and offline options for any resolve or install of ``plan``."""
    args: list[str] = []
    for link in find_links(plan):
        args += ["--find-links", link]
    if plan.torch.index_url and not plan.torch_wheel:
        args += ["--index", plan.torch.index_url, "--index-strategy", "unsafe-best-match"]
    if plan.offline:
        args.append("--offline")
    return args


def python_platform(arch: str, glibc: str | None) -> str:
    """uv's ``--python-platform`` for a Linux node: ``<arch>-manylinux_<glibc>``.

    The node's glibc when known (2.17 to 2.40, what uv accepts), else 2.28, the floor
    of current torch wheels on both arches.
    """
    if arch not in ("x86_64", "aarch64"):
        raise BadInput(f"arch {arch!r}: can lock only for x86_64 or aarch64 Linux")
    major, minor = 2, 28
    if glibc and re.fullmatch(r"2\.\d+", glibc):
        minor = min(max(int(glibc.split(".")[1]), 17), 40)
    return f"{arch}-manylinux_{major}_{minor}"


def _run(
    args: Sequence[str | os.PathLike[str]],
    *,
    log: IO[str] | None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> Completed:
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    full_env.setdefault("UV_NO_PROGRESS", "1")
    return command.run([*uv_argv(), *args], env=full_env, cwd=cwd, timeout=timeout, log=log)


def version() -> str:
    """``uv 0.13.9`` (recorded in lock headers)."""
    return _run(["--version"], log=None).stdout.strip().split(" (")[0]


def venv(path: Path, python: str, *, log: IO[str] | None = None) -> Completed:
    return _run(["venv", "--python", python, "--no-project", str(path)], log=log)


def compile_lock(
    requirements_in: Path,
    output: Path,
    *,
    plan: Plan,
    python_platform: str,
    python_version: str,
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> Completed:
    """``uv pip compile --generate-hashes`` for another platform (no header: ours is).

    Run in the input's directory with its bare name, so the lock's ``# via -r``
    annotations name ``requirements.in`` and not a temporary path (which would make
    every compile of the same inputs a different file).
    """
    return _run(
        [
            "pip",
            "compile",
            requirements_in.name,
            "--generate-hashes",
            "--no-header",
            "--no-python-downloads",  # the target Python is only a resolution setting
            "--python-platform",
            python_platform,
            "--python-version",
            python_version,
            *source_args(plan),
            *extra,
            "-o",
            str(output.absolute()),
        ],
        log=log,
        env=env,
        cwd=requirements_in.parent,
    )


def compile_argv_for_header(plan: Plan, *, python_platform: str, python_version: str) -> list[str]:
    """The compile command as recorded in a lock header (input file by its role)."""
    return [
        "uv",
        "pip",
        "compile",
        "requirements.in",
        "--generate-hashes",
        "--no-python-downloads",
        "--python-platform",
        python_platform,
        "--python-version",
        python_version,
        *source_args(plan),
    ]


def link_mode(venv_path: Path) -> str:
    """How uv puts files into a venv: a copy-on-write clone where the filesystem has them
    (nothing shared), else hard links into its cache, which the builder makes read-only
    (``venv_check.protect``) and proves against their RECORD hashes: a full copy would
    cost a CUDA torch's gigabytes of disk quota per build, twice with the kept one."""
    return "clone" if fsio.reflinks(venv_path.parent) else "hardlink"


def sync(
    venv_path: Path,
    lockfile: Path,
    *,
    plan: Plan,
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> Completed:
    return _run(
        [
            "pip",
            "sync",
            str(lockfile),
            "--python",
            str(venv_path / "bin" / "python"),
            "--link-mode",
            link_mode(venv_path),
            *source_args(plan),
            *extra,
        ],
        log=log,
        env=env,
    )


def install(
    venv_path: Path,
    reqs: Sequence[str],
    *,
    plan: Plan | None = None,
    extra: Sequence[str] = (),
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Completed:
    return _run(
        [
            "pip",
            "install",
            "--python",
            str(venv_path / "bin" / "python"),
            "--link-mode",
            link_mode(venv_path),
            *(source_args(plan) if plan else []),
            *extra,
            *reqs,
        ],
        log=log,
        env=env,
    )


def cache_dir() -> Path | None:
    """Where uv keeps its cache (``uv cache dir``: ``UV_CACHE_DIR``, uv.toml's
    ``cache-dir``, else the XDG default); None when uv cannot say."""
    try:
        done = _run(["cache", "dir"], log=None, timeout=60)
    except (CommandFailed, BadInput, OSError):
        return None
    where = done.stdout.strip()
    return Path(where) if where.startswith("/") else None


def cache_clean(names: Sequence[str], *, log: IO[str] | None = None) -> Completed:
    """``uv cache clean NAME...``: drop uv's cached files of these distributions."""
    return _run(["cache", "clean", *names], log=log)


def freeze(venv_path: Path, *, log: IO[str] | None = None) -> dict[str, str]:
    """``{normalised name: version}`` of what is installed in ``venv_path``."""
    from hpcenv.utils.names import canonicalize_name

    done = _run(["pip", "freeze", "--python", str(venv_path / "bin" / "python")], log=log)
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if "==" in line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version.strip()
    return out


def project_export(
    project: Path,
    *,
    selection: Sequence[str] = (),
    log: IO[str] | None = None,
    fmt: str = "requirements-txt",
) -> str:
    """``uv export --frozen`` of a project's ``uv.lock``: one requirement line per package
    ``uv sync`` would install for the selection flags, with PEP 508 markers for the
    platform (uv resolves the conflict markers of groups and extras itself). Local
    packages (the project, workspace members) come as ``-e ./path`` lines. ``fmt``
    ``pylock.toml``: the same set as PEP 751 ``[[packages]]`` tables, each with its
    version, index or URL and marker. Reads the project's files and writes none:
    ``--no-config``, since a repo under audit is data and its ``uv.toml`` or ``[tool.uv]``
    settings (``cache-dir = "/anywhere"``) made uv write outside it (the export's text is
    the same without them: the groups, extras and conflicts are the project's, not
    settings)."""
    return _run(
        ["export", "--frozen", "--no-config", "--no-hashes", "--no-annotate", "--no-header",
         "--format", fmt, "--project", str(project.absolute()), *selection],
        log=log,
        cwd=project,
    ).stdout  # fmt: skip


def build_wheel(
    source: str,
    out_dir: Path,
    *,
    python: Path,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log: IO[str] | None = None,
) -> Completed:
    """``uv build --wheel`` of a source tree or sdist into ``out_dir``."""
    return _run(
        ["build", "--wheel", "--python", str(python), "--out-dir", str(out_dir), *extra, source],
        log=log,
        env=env,
    )


_PYTHON_DOWNLOAD = re.compile(r"Failed to download\W+\S*/cpython-(\d+\.\d+)[.\d]*%2B")


def python_not_downloaded(output: str) -> str | None:
    """The Python (``3.8``) uv failed to download for a venv, from its error output (a
    python-build-standalone archive it could not fetch); None for any other failure."""
    m = _PYTHON_DOWNLOAD.search(output.replace("\n", " "))
    return m.group(1) if m else None


def error_summary(output: str) -> str:
    """uv's error line, with the first cause naming a URL or file and the root cause.
    uv wraps its messages at ``$COLUMNS`` (nox and pytest-xdist set it): an indented line
    that opens no new message continues the one before it."""
    lines: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continue
        opens = line.lower().startswith(("error:", "×", "cause:", "hint:", "warning:", "help:"))
        if lines and raw[:1].isspace() and not opens:
            lines[-1] = f"{lines[-1]} {line}"
        else:
            lines.append(line)
    head = next((ln for ln in lines if ln.lower().startswith(("error:", "×"))), "")
    causes = [ln.removeprefix("cause:").strip() for ln in lines if ln.startswith("cause:")]
    where = next((c for c in causes if "://" in c or "/" in c), "")
    root = causes[-1] if causes else ""
    parts = [p for p in (head.lstrip("×").removeprefix("error:").strip(), where, root) if p]
    if not parts:
        return lines[-1] if lines else ""
    return ": ".join(dict.fromkeys(parts))


def compile_for(
    input_file: Path,
    *,
    python_platform: str,
    python_version: str,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    extras: Sequence[str] = (),
    constraints: Path | None = None,
    hashes: bool = False,
    log: IO[str] | None = None,
    timeout: float | None = 600,
    config_file: Path | None = None,
) -> str:
    """``uv pip compile`` of a hand-written input (a ``requirements.in`` hpcenv wrote, or a
    project's ``pyproject.toml``/``setup.py``/``setup.cfg``, whose metadata uv gets from
    the build backend) for another node; the pinned set on stdout. The indexes are the ones
    the project names; with more than one, the best version wins across them, as pip does
    (``unsafe-best-match``). uv's ``# via`` lines are kept: who pulls each package
    (``decide/cuda_packages`` attributes a CUDA runtime wheel by them)."""
    args: list[str] = ["pip", "compile", input_file.name, "--no-header"]
    args += ["--no-python-downloads", "--python-platform", python_platform]
    args += ["--python-version", python_version, "--quiet"]
    if hashes:
        args.append("--generate-hashes")
    if index_url == "":
        args.append("--no-index")
    elif index_url:
        args += ["--index-url", index_url]
    for url in extra_index_urls:
        args += ["--extra-index-url", url]
    if extra_index_urls or index_url:
        args += ["--index-strategy", "unsafe-best-match"]
    for link in find_links:
        args += ["--find-links", link]
    for extra in extras:
        args += ["--extra", extra]
    if constraints is not None:
        args += ["--constraint", str(constraints)]
    if config_file is not None:  # hpcenv's own (dependency-metadata), never the project's
        args += ["--config-file", str(config_file)]
    return _run(args, log=log, cwd=input_file.parent, timeout=timeout).stdout
