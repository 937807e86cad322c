"""The environment a job needs on a cluster, as data, and its two renderings.

One ``JobEnv`` for ``hpcenv env`` (shell lines for ``eval``/``source``, or JSON),
``hpcenv run`` (applied to the command's environment) and the scripts of
``hpcenv sbatch -- CMD`` (the same lines inlined), so the three cannot drift apart:

- the modules (``module load`` lines: a module changes the shell, it cannot be
  exported), first, so that what they put on PATH comes after the venv;
- the profile's variables (``[env] always``, and ``multi_node`` only for N > 1 nodes);
  a secret-named variable, or one whose value carries URL credentials, is never
  printed: the shell lines refer to the caller's environment
  (``"${HF_TOKEN:?...}"``), and ``run`` gives the command the caller's value; a value
  the profile gives a secret itself is used by neither (``check_secrets``: both refuse
  without the caller's, naming the fix);
- the venv's activation (``VIRTUAL_ENV``, its ``bin`` first on PATH, no
  ``PYTHONHOME``): the build's fixes (``hpcenv_fix_*.pth`` in its site-packages) then
  load in every Python the command starts from it;
- ``TMPDIR`` on the profile's node-local scratch (``[job] scratch``): one directory
  per SLURM job (``<scratch>/<job id>``), or per user outside a job.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hpcenv.kit import slurm_env
from hpcenv.profile.schema import ENV_NAME, Profile
from hpcenv.tools import command
from hpcenv.utils import paths, redact
from hpcenv.utils.errors import BadInput, CannotRun
from hpcenv.utils.output import shell_quote

#: Variables the activation removes (a PYTHONHOME would point the venv's Python elsewhere).
UNSET = ("PYTHONHOME",)


@dataclass(frozen=True, kw_only=True)
class JobEnv:
    """What a command on ``nodes`` nodes of ``profile``'s cluster runs with."""

    profile: str
    nodes: int
    venv: Path | None  # None: no activation (a probe job names its python itself)
    modules: tuple[str, ...] = ()
    #: exported as they are, in this order
    values: dict[str, str] = field(default_factory=dict)
    #: names whose values come from the caller's environment (never printed)
    secrets: tuple[str, ...] = ()
    #: the profile's values of ``secrets``: for ``run`` when the caller has none
    secret_values: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    tmpdir: str | None = None
    #: the build's fixes active in the venv (``hpcenv_fix_<name>.pth``)
    fixes: tuple[str, ...] = ()

    @property
    def bin_dir(self) -> Path | None:
        return self.venv / "bin" if self.venv is not None else None

    def to_json(self) -> dict[str, Any]:
        """The environment for scripts; secret values never appear, only their names."""
        return {
            "schema": 1,
            "profile": self.profile,
            "nodes": self.nodes,
            "venv": str(self.venv) if self.venv else None,
            "modules": list(self.modules),
            "prepend": {"PATH": [str(self.bin_dir)]} if self.bin_dir else {},
            "set": {**self.values, **({"TMPDIR": self.tmpdir} if self.tmpdir else {})},
            "from_caller": list(self.secrets),
            "unset": list(UNSET) if self.venv else [],
            "make_dirs": [self.tmpdir] if self.tmpdir else [],
            "fixes": list(self.fixes),
        }


def default_nodes(environ: Mapping[str, str]) -> int:
    """The allocation's node count inside a SLURM job, else 1."""
    return slurm_env.read(environ).nnodes or 1


def tmpdir_for(profile: Profile, environ: Mapping[str, str]) -> str | None:
    """``<scratch>/<SLURM job id>`` in a job, ``<scratch>/hpcenv-<uid>`` outside one;
    None without ``[job] scratch``, or outside a job on a host without that directory
    (a login node has no compute node's local disk)."""
    scratch = profile.job.scratch
    if not scratch:
        return None
    job = slurm_env.read(environ).job_id
    if not job and not Path(scratch).is_dir():
        return None
    leaf = job if job else f"hpcenv-{os.getuid()}"
    return str(Path(scratch) / leaf)


def installed_fixes(venv: Path) -> tuple[str, ...]:
    """The fixes a build installed into ``venv`` (``hpcenv_fix_<name>.pth``)."""
    found = sorted(venv.glob("lib/python3*/site-packages/hpcenv_fix_*.pth"))
    return tuple(p.stem.removeprefix("hpcenv_fix_") for p in found)


def check_names(names: Iterable[str]) -> None:
    """Each name a variable name bash takes as one (``[A-Za-z_][A-Za-z0-9_]*``), before it
    is written into a job script; else BadInput naming it."""
    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise BadInput(f"environment variable name {name!r} is not a valid name; rename it")


def for_profile(
    profile: Profile,
    *,
    nodes: int,
    venv: Path | None,
    environ: Mapping[str, str] | None = None,
    tmpdir: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> JobEnv:
    """The job environment of ``profile`` on ``nodes`` nodes, activating ``venv``.

    ``environ`` (default ``os.environ``) gives the SLURM job id for TMPDIR;
    ``tmpdir=False`` leaves TMPDIR to the caller (a job script makes one per node);
    ``extra_env`` adds variables after the profile's.
    """
    if nodes < 1:
        raise BadInput(f"--nodes {nodes}: must be at least 1")
    env = os.environ if environ is None else environ
    wanted = {
        "HPCENV_HOME": str(paths.home()),
        **profile.env_for(nodes=nodes),
        **(extra_env or {}),
    }
    check_names(wanted)  # profiles are checked; this guards other callers
    secrets = {k: v for k, v in wanted.items() if redact.holds_secret(k, v)}
    values = {k: v for k, v in wanted.items() if k not in secrets}
    if venv is not None:
        values["VIRTUAL_ENV"] = str(venv)
    return JobEnv(
        profile=profile.name,
        nodes=nodes,
        venv=venv,
        modules=tuple(profile.modules.load),
        values=values,
        secrets=tuple(secrets),
        secret_values=secrets,
        tmpdir=tmpdir_for(profile, env) if tmpdir else None,
        fixes=installed_fixes(venv) if venv is not None else (),
    )


def venv_for(profile: Profile, given: str | None, *, must_exist: bool = True) -> Path:
    """The venv to activate: ``given`` (a venv directory), else the profile's build.
    ``must_exist``: a venv without ``bin/python`` is an error naming the fix."""
    venv = Path(given).absolute() if given else paths.built_venv(profile.name)
    if must_exist and not paths.venv_python(venv).exists():
        if given:
            raise BadInput(f"--env {given}: no bin/python in that directory; give a venv")
        raise BadInput(
            f"the environment of profile {profile.name} is not built ({venv} has no bin/python); "
            f"run 'hpcenv build {profile.name}' (nox -s build-{profile.name}) first"
        )
    return venv


def secret_line(name: str, where: str) -> str:
    """``export NAME="${NAME:?...}"``: the value from the caller's environment, or a stop."""
    return f'export {name}="${{{name}:?set {name} in {where}}}"'


def shell_lines(
    job: JobEnv, *, nounset_guard: bool = False, secrets_from: str = "your environment"
) -> list[str]:
    """Lines for ``eval``/``source`` (and job scripts): every value quoted (``output.shell_quote``).

    ``nounset_guard``: wrap ``module load`` in ``set +u``/``set -u`` (Lmod and
    Environment Modules read unset variables; job scripts run with ``set -u``).
    ``secrets_from`` names, in the stop message, where a secret must be set.
    """
    lines: list[str] = []
    if job.modules:
        lines += ["set +u"] if nounset_guard else []
        lines += [f"module load {shell_quote(m)}" for m in job.modules]
        lines += ["set -u"] if nounset_guard else []
    lines += [f"export {k}={shell_quote(v)}" for k, v in job.values.items()]
    lines += [secret_line(k, secrets_from) for k in job.secrets]
    if job.bin_dir is not None:
        lines.append(f'export PATH={shell_quote(str(job.bin_dir))}:"$PATH"')
        lines += [f"unset {name}" for name in UNSET]
    if job.tmpdir:
        lines += [f"export TMPDIR={shell_quote(job.tmpdir)}", 'mkdir -p -- "$TMPDIR"']
    return lines


def batch_lines(env: JobEnv) -> list[str]:
    """The job's environment (``shell_lines``), secrets read from the environment
    sbatch copies from the submitting shell."""
    lines = []
    if env.secrets:
        lines += [
            f"# Secrets ({' '.join(env.secrets)}) are not written here: the job reads them",
            "# from the environment sbatch copies from the submitting shell (--export=ALL,",
            "# the default). Export them before 'sbatch'; 'hpcenv sbatch --submit' passes the",
            "# profile's values that way.",
        ]
    return lines + shell_lines(env, nounset_guard=True, secrets_from="the submitting environment")


def check_secrets(job: JobEnv, environ: Mapping[str, str]) -> None:
    """The one rule of ``env`` and ``run`` for a secret the profile gives a value of its
    own: it comes from the caller's environment, never from the profile. ``env`` cannot
    print the profile's value, so ``run`` does not use it either: without the caller's,
    both refuse, naming the variable and the fix (exit 2)."""
    for name in job.secrets:
        if not environ.get(name) and job.secret_values.get(name):
            raise BadInput(
                f"{name}: profile {job.profile} gives this secret a value of its own, which "
                f"hpcenv never prints nor passes on; export {name} in your shell (or "
                "~/.bashrc) and remove it from the profile's [env]"
            )


def apply(job: JobEnv, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as the shell lines leave it (modules aside): what ``run`` gives CMD.

    A secret keeps the caller's value (``check_secrets``: the profile's is never used).
    """
    check_secrets(job, environ)
    out = dict(environ)
    out.update(job.values)
    for name in job.secrets:
        out[name] = environ.get(name, "")
    if job.bin_dir is not None:
        out["PATH"] = f"{job.bin_dir}:{out.get('PATH', '')}"
        for name in UNSET:
            out.pop(name, None)
    if job.tmpdir:
        out["TMPDIR"] = job.tmpdir
    return out


def caller_with_secrets(job: JobEnv, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a shell running ``shell_lines``, once ``check_secrets`` holds (its
    ``${NAME:?}`` references take the caller's values)."""
    check_secrets(job, environ)
    return dict(environ)


def exec_command(job: JobEnv, argv: Sequence[str], environ: Mapping[str, str]) -> NoReturn:
    """Become ``argv`` in ``job``'s environment (``os.execve``): nothing of hpcenv runs
    after it, so its exit code and the signals sent to this process are the command's.

    With modules, bash runs ``shell_lines`` (``module load`` is a shell function) and
    then ``exec "$@"``: the command's words are bash's arguments, never its script.
    Raises ``CannotRun`` (127 or 126) when the command cannot be started.
    """
    if not argv:
        raise BadInput("no command given after '--'")
    if job.modules:
        bash = shutil.which("bash", path=environ.get("PATH"))
        if bash is None:
            raise CannotRun(
                f"profile {job.profile} loads modules, which needs bash; bash is not on PATH",
                exit_code=127,
            )
        missing = (
            f"hpcenv: error: profile {job.profile} loads modules ({', '.join(job.modules)}) "
            "but 'module' is not a command here (no Lmod or Environment Modules); run on a "
            "node of the cluster, or use a profile without [modules] load"
        )
        no_module = (
            f"command -v module >/dev/null || {{ echo {shell_quote(missing)} >&2; exit 2; }}"
        )
        script = "\n".join(["set -e", no_module, *shell_lines(job), 'exec "$@"'])
        exe, full, env = (
            bash,
            [bash, "-c", script, "hpcenv-run", *argv],
            caller_with_secrets(job, environ),
        )
    else:
        env = apply(job, environ)
        found = shutil.which(argv[0], path=env.get("PATH"))
        if found is None:
            if "/" in argv[0] and Path(argv[0]).exists():
                raise CannotRun(f"{argv[0]}: not executable (chmod +x?)", exit_code=126)
            raise CannotRun(
                f"{argv[0]}: command not found on PATH (the venv's bin first)", exit_code=127
            )
        exe, full = found, list(argv)
    try:
        command.become(exe, full, env)
    except OSError as exc:
        code = 127 if exc.errno == errno.ENOENT else 126
        raise CannotRun(f"{full[0]}: cannot run it ({exc.strerror})", exit_code=code) from exc


def caller_environ() -> dict[str, str]:
    """The environment hpcenv was started with: ``/proc/self/environ`` where there is one
    (Python itself adds ``LC_CTYPE=C.UTF-8`` to ``os.environ`` in a C locale, PEP 538,
    which the command must not inherit from us), else ``os.environ``."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


def make_tmpdir(job: JobEnv) -> None:
    """Create TMPDIR (and its parents); refuse a symlink hpcenv did not make."""
    if not job.tmpdir:
        return
    path = Path(job.tmpdir)
    if path.is_symlink():
        raise BadInput(f"TMPDIR {path} is a symbolic link hpcenv did not make; remove it")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(
            f"cannot create TMPDIR {path} ({exc.strerror}); fix [job] scratch of {job.profile}"
        ) from exc


__all__ = [
    "JobEnv",
    "apply",
    "caller_environ",
    "caller_with_secrets",
    "check_secrets",
    "default_nodes",
    "exec_command",
    "for_profile",
    "make_tmpdir",
    "shell_lines",
    "venv_for",
]
