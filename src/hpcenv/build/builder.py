"""Carry out a plan: a new venv built beside the current one, switched in atomically.

The chain (each step timed into the JSON build report, shown through a ``Progress``):

1. take ``venvs/<profile>.lock`` (``build_lock``): two builds of one environment never
   interleave; remove leftovers of killed builds (build dirs without a marker);
2. the lock: kept when its inputs digest matches (``lockfiles.mismatch``), else compiled;
3. the stamp: hash of plan digest, lock content, the facts that matter, the fixes'
   sources and hpcenv's version. The current build has the same stamp and is still
   whole (``venv_check``: no file, link or directory added, removed or changed since
   the build, every distribution at its version) -> nothing to do (no uv call); a
   changed one is rebuilt, naming what changed;
4. ``uv venv`` into a new sibling ``venvs/<profile>-<stamp>-<time>``; ``uv pip sync``
   of the lock (or, with a project, ``swap``): files cloned where the filesystem can,
   else hard-linked from uv's cache and made read-only (``venv_check.protect``);
   flash-attn per plan; fixes;
5. every file against its RECORD hash (a damaged uv cache entry is cleaned and
   reinstalled); import check with the new venv's Python (torch and every package:
   ``import_check``); the file list a no-op compares with;
6. marker file, then ``os.replace`` of a temporary symlink over ``venvs/<profile>``:
   readers see the old build or the new one, never a half-built one;
7. older builds removed, the previous one kept (for a quick manual roll-back); the
   removal starts once the new build is proven (step 5) and runs beside step 6.

Any failure (or Ctrl-C) removes the new directory and leaves the symlink alone; a
SIGKILL leaves the directory, which the next build removes in step 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar, cast

from packaging.requirements import InvalidRequirement, Requirement

from hpcenv import __version__
from hpcenv.build import (
    build_lock,
    fixes,
    import_check,
    lockfiles,
    results,
    torch_first,
    venv_check,
)
from hpcenv.decide.plan import require_torch
from hpcenv.kit import threads
from hpcenv.knowledge import build_isolation
from hpcenv.models.facts import Facts
from hpcenv.models.plan import Plan
from hpcenv.tools import command, uv
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput, BuildFailed, CommandFailed
from hpcenv.utils.names import canonicalize_name

if TYPE_CHECKING:
    from hpcenv.project.request import ProjectRequest

#: Written into a build directory when (and only when) the build completed.
MARKER = paths.BUILD_MARKER

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class StepTime:
    """One timed step of a build: its name, what it did, and how long it took."""

    step: str
    what: str
    seconds: float

    def serialize(self) -> dict[str, Any]:
        return {"step": self.step, "what": self.what, "seconds": self.seconds}


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    """What a build did: the JSON next to its log (``logs/build-*.json``) and in the
    build's marker. A field left None was not reached (or, for a no-op, does not apply)
    and is left out of ``serialize()``. Masked where it leaves hpcenv (``fsio``, the
    commands' JSON)."""

    profile: str
    environment: str | None = None  # the profile's, or <profile>-<project>
    noop: bool = False
    stamp: str | None = None
    target: str | None = None  # no-op: the build that is kept
    reason: str | None = None  # no-op: why nothing was done
    locked_at: float | None = None
    hpcenv_version: str | None = None
    plan_digest: str | None = None
    facts: results.FactsSummary | None = None
    python: str | None = None
    torch: results.TorchSource | None = None
    sources: tuple[str, ...] | None = None
    leftovers_removed: tuple[str, ...] | None = None
    damaged: tuple[str, ...] | None = None  # why the current build was not kept
    repaired: tuple[str, ...] | None = None  # damaged uv cache entries cleaned and reinstalled
    steps: tuple[StepTime, ...] | None = None
    log: str | None = None
    lock: results.LockUsed | None = None
    build_dir: str | None = None
    project: results.ProjectInstall | None = None
    #: packages whose setup.py imports torch, built against the venv's (``torch_first``)
    no_build_isolation: results.NoIsolation | None = None
    flash_attn: results.FlashAttnOutcome | None = None
    fixes: tuple[str, ...] | None = None
    imports: import_check.ImportCheck | None = None
    installed: Mapping[str, str] | None = None
    seconds: float | None = None
    removed_old_builds: tuple[str, ...] | None = None
    previous: str | None = None  # after the switch: the build kept for a roll-back
    finished_at: float | None = None
    error: str | None = None

    def serialize(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.noop else {"schema": 1}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and not (f.name == "previous" and self.removed_old_builds):
                continue
            if f.name == "previous" and self.removed_old_builds is None:
                continue  # not switched yet
            out[f.name] = _json(value)
        return out


class _Serializable(Protocol):
    def serialize(self) -> dict[str, Any]: ...


def _json(value: object) -> object:
    """A report field as JSON: a typed result through its ``serialize()``, tuples as lists."""
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if callable(getattr(value, "serialize", None)):
        return cast(_Serializable, value).serialize()
    if isinstance(value, Mapping):
        return dict(value)
    return value


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    profile: str
    venv: Path  # the stable symlink
    target: Path  # the build directory it points to
    stamp: str
    noop: bool
    seconds: float
    report: BuildReport
    report_path: Path | None = None
    log_path: Path | None = None


def build_dir_pattern(profile: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(profile)}-[0-9a-f]{{12}}-\d{{8}}T\d{{6}}(-\d+)?$")


def stamp(plan: Plan, facts: Facts, lock_text: str, project_digest: str = "") -> str:
    """Hash of everything that changes the result; equal stamps -> nothing to do."""
    data = {
        "plan": plan.digest(),
        "lock": hashlib.sha256(lock_text.encode()).hexdigest(),
        "facts": {
            "arch": facts.arch,
            "glibc": facts.glibc,
            "compute_capabilities": list(facts.compute_capabilities),
        },
        "fixes": fixes.digest(plan.fixes) if plan.fixes else "",
        "project": project_digest,
        "hpcenv": __version__,
    }
    # built against the venv's torch since issue 23: an older build of these (against no
    # torch) is not up to date; the key only where there are some, so other stamps stay
    if rows := build_isolation.among(torch_first.lock_names(lock_text)):
        data["no_build_isolation"] = [r.name for r in rows]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def current_target(profile: str) -> Path | None:
    """The build directory ``venvs/<profile>`` points to (None: no build yet); a link
    hpcenv did not make is refused (``paths.built_venv``)."""
    link = paths.built_venv(profile)
    if not link.is_symlink():
        return None
    target = link.parent / os.readlink(link)
    return target if target.is_dir() else None


def _marker_object(build_dir: Path) -> dict[str, object] | None:
    """The JSON object in ``build_dir``'s marker; None when missing, unreadable or not an
    object (not a build hpcenv completed)."""
    try:
        data = fsio.load_json(build_dir / MARKER, "build marker")
    except BadInput:
        return None
    return data if isinstance(data, dict) else None


def read_marker(build_dir: Path) -> results.BuildMarker | None:
    """The marker of a complete build; None when missing or not hpcenv's (not an object).
    BadInput naming the file and key when the object's stamp or list of what is installed
    is not what hpcenv writes."""
    data = _marker_object(build_dir)
    return None if data is None else results.BuildMarker.parse(data, str(build_dir / MARKER))


def clean_leftovers(profile: str, keep: set[Path]) -> list[str]:
    """Remove build dirs of ``profile`` without a marker (killed builds) and temp links."""
    removed = []
    pattern = build_dir_pattern(profile)
    root = paths.venvs_dir()
    for entry in root.iterdir() if root.is_dir() else ():
        if entry.name.startswith(f".{profile}.tmp-") and entry.is_symlink():
            entry.unlink()
            removed.append(entry.name)
        elif pattern.match(entry.name) and entry not in keep and _marker_object(entry) is None:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed


def old_builds(profile: str, keep: set[Path]) -> list[Path]:
    """The build directories of ``profile`` but those in ``keep`` (real directories only)."""
    pattern = build_dir_pattern(profile)
    real = [e for e in sorted(paths.venvs_dir().iterdir()) if e.is_dir() and not e.is_symlink()]
    return [e for e in real if pattern.match(e.name) and e not in keep]


def _start_removal(dirs: list[Path]) -> subprocess.Popen[bytes] | None:
    """``rm -rf -- DIRS`` (which never follows a symlink in them) in a process of its own,
    so that it runs on another core beside the new build's last steps (8 Python threads
    removing files contended for the GIL with the walk of the file list; ``rm`` alone was
    also faster: 0.22 vs 0.28 s for a local build). None when there is nothing to remove
    or no ``rm``."""
    if not dirs:
        return None
    try:
        return command.spawn(["rm", "-rf", "--", *dirs])
    except CommandFailed:  # no rm: removed in this process (_finish_removal)
        return None


def _finish_removal(remover: subprocess.Popen[bytes] | None, dirs: list[Path]) -> list[str]:
    """Wait for :func:`_start_removal`'s process; what it left (nothing, or everything
    when there was no ``rm``) is removed here. Returns the names removed."""
    if remover is not None:
        remover.wait()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)  # never follows a symlink; a no-op when gone
    return [d.name for d in dirs]


def switch(profile: str, target: Path) -> None:
    """Point ``venvs/<profile>`` at ``target`` atomically (rename of a new symlink)."""
    link = paths.venv_dir(profile)
    if link.exists() and not link.is_symlink():
        raise BuildFailed(
            f"{link} is a real directory, not hpcenv's symlink; move it away and build again"
        )
    tmp = link.parent / f".{profile}.tmp-{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(target.name, tmp)
    os.replace(tmp, link)


def package_names(plan: Plan) -> list[str]:
    names: list[str] = []
    for req in plan.packages:
        try:
            names.append(canonicalize_name(Requirement(req).name))
        except InvalidRequirement:
            continue
    return names


def _unique_dir(profile: str, stamp_: str) -> Path:
    base = f"{profile}-{stamp_}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    candidate = paths.venvs_dir() / base
    n = 1
    while candidate.exists() or candidate.is_symlink():
        candidate = paths.venvs_dir() / f"{base}-{n}"
        n += 1
    return candidate


class Progress(Protocol):
    """How a build shows its steps to people (``hpcenv.ui.report.BuildProgress``)."""

    def running(self, what: str) -> AbstractContextManager[object]: ...

    def finished(self, what: str, seconds: float) -> None: ...


class _Steps:
    """Times each step (``done``) and shows it through ``progress`` when there is one."""

    def __init__(self, progress: Progress | None) -> None:
        self.done: list[StepTime] = []
        self.progress = progress

    def insert_before_last(self, step: StepTime) -> None:
        """A step timed elsewhere (in a thread), listed before the last one."""
        self.done.insert(max(len(self.done) - 1, 0), step)

    def __call__(self, name: str, what: str, fn: Callable[[], T]) -> T:
        start = time.monotonic()
        with self.progress.running(what) if self.progress else nullcontext():
            try:
                value = fn()
            finally:
                took = round(time.monotonic() - start, 3)
                self.done.append(StepTime(step=name, what=what, seconds=took))
        if self.progress:
            self.progress.finished(what, took)
        return value


def build(
    plan: Plan,
    facts: Facts,
    *,
    project: ProjectRequest | None = None,
    force: bool = False,
    progress: Progress | None = None,
    lock_timeout: float | None = None,
) -> BuildResult:
    """Build ``plan`` (see the module docstring). Raises ``BuildFailed``/``Busy``.

    With ``project`` the environment is ``venvs/<profile>-<project>`` (or the request's
    name), beside the profile's own: ``swap`` installs the project into it."""
    start = time.monotonic()
    if project is None:  # a project's set requires torch where it installs one (_decide)
        require_torch(plan)
    here = platform.machine()
    if plan.arch and plan.arch != here:
        raise BadInput(
            f"profile {plan.profile} is planned for {plan.arch} but this machine is {here}: "
            f"build it on an {plan.arch} node (to lock it from here: "
            f"'hpcenv lock {plan.profile} --declared')"
        )
    name = plan.profile
    if project is not None:
        from hpcenv.project.request import environment_name

        name = environment_name(plan.profile, project)
    venvs = fsio.ensure_dir(paths.venvs_dir())
    with build_lock.hold(venvs / f"{name}.lock", timeout=lock_timeout):
        return _build_locked(
            plan, facts, name=name, project=project, force=force, progress=progress, start=start
        )


def _noop(
    profile: str,
    current: Path | None,
    new_stamp: str,
    *,
    force: bool,
    start: float,
    damaged: list[str],
) -> BuildResult | None:
    """The no-op result when the current build has ``new_stamp`` and is still whole
    (``venv_check``) and no --force; a damaged one is noted in ``damaged`` and rebuilt."""
    if force or current is None or not new_stamp:
        return None
    try:
        marker = read_marker(current)
    except BadInput as exc:
        damaged.append(f"{exc}; rebuilding it")
        return None
    if marker is None or marker.stamp != new_stamp:
        return None
    if why := fsio.untrusted(current):  # bytecode included: nobody else may have written
        damaged.append(f"the environment could run someone else's code ({why}); rebuilding it")
        return None
    changes = venv_check.tree_changes(current)
    if changes:
        damaged.append(
            f"the environment changed since its build ({'; '.join(changes)}); rebuilding it"
        )
        return None
    problem = venv_check.damage(current, marker.installed, records=changes is None)
    if problem:
        damaged.append(f"the environment is damaged ({problem}); rebuilding it")
        return None
    return BuildResult(
        profile=profile,
        venv=paths.venv_dir(profile),
        target=current,
        stamp=new_stamp,
        noop=True,
        seconds=time.monotonic() - start,
        report=BuildReport(
            profile=profile,
            noop=True,
            stamp=new_stamp,
            target=str(current),
            reason="environment is up to date (same plan, lock, fixes and facts)",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class _Decision:
    """What the build must do, decided before anything is written: the lock to keep or
    compile, the Python, and the stamp when it is known without compiling the lockfiles."""

    current: Path | None
    leftovers: tuple[str, ...]
    lock_path: Path
    lock_why: str | None  # why the lock must be compiled; None: kept (or a project)
    project: bool
    python: str
    stamp: str  # "" until the lock is compiled


def _decide(plan: Plan, facts: Facts, *, name: str, project: ProjectRequest | None) -> _Decision:
    current = current_target(name)
    leftovers = clean_leftovers(name, {current} if current else set())
    fsio.remove_dead_work_dirs()  # what SIGKILLed runs left in $TMPDIR, no-op or not
    lock_path, lock_why = lockfiles.lock_path(plan, facts), None
    if project is None:
        lockfiles.check_not_edited(lock_path)
        lock_path, lock_why = lockfiles.build_lock_path(plan, facts)
    project_digest, python = "", plan.python
    if project is not None:
        from hpcenv.project import model
        from hpcenv.project import request as project_files

        project_digest = project_files.project_digest(project)
        # the one model of the project on the node (its torch fit checked, exit 3 before any
        # venv); read here, installed by swap.sync_and_swap: nothing is decided again
        python = model.on_node(project, plan, facts).python.version
    new_stamp = ""
    if lock_why is None:
        lock_text = fsio.read_text(lock_path, "lockfile") if project is None else ""
        new_stamp = stamp(plan, facts, lock_text, project_digest)
    return _Decision(
        current=current,
        leftovers=tuple(leftovers),
        lock_path=lock_path,
        lock_why=lock_why,
        project=project is not None,
        python=python,
        stamp=new_stamp,
    )


def _build_locked(
    plan: Plan,
    facts: Facts,
    *,
    name: str,
    project: ProjectRequest | None,
    force: bool,
    progress: Progress | None,
    start: float,
) -> BuildResult:
    profile = name  # the environment's name: the profile's, or <profile>-<project>
    locked_at = time.time()  # wall clock once the environment lock is held
    d = _decide(plan, facts, name=name, project=project)
    damaged: list[str] = []
    # Fast path first: a matching lock and an unchanged stamp need no log and no uv.
    if done := _noop(profile, d.current, d.stamp, force=force, start=start, damaged=damaged):
        return done

    logs = fsio.ensure_dir(paths.logs_dir(), sticky=True)
    when = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    log_path = logs / f"build-{profile}-{when}-{os.getpid()}.log"
    for n in range(2, 100):  # two builds of one process in one second: a new name each
        if not log_path.exists() and not log_path.with_suffix(".json").exists():
            break
        log_path = logs / f"build-{profile}-{when}-{os.getpid()}-{n}.log"
    report_path = log_path.with_suffix(".json")
    log_fh = fsio.MaskedLog(log_path)
    log = cast(IO[str], log_fh)
    report = BuildReport(
        profile=plan.profile,
        environment=profile,
        locked_at=locked_at,
        hpcenv_version=__version__,
        plan_digest=plan.digest(),
        facts=lockfiles.facts_summary(facts),
        python=d.python,
        torch=results.TorchSource(
            version=plan.torch.version,
            backend=plan.torch.backend,
            source=plan.torch_wheel or plan.torch.index_url or "",
        ),
        sources=tuple(uv.source_args(plan)),
        leftovers_removed=d.leftovers,
        damaged=tuple(damaged),
        log=str(log_path),
    )
    steps = _Steps(progress)
    new_dir: Path | None = None
    try:
        report, new_stamp = _lock_step(plan, facts, d, report, steps, log=log)
        relocked = new_stamp != d.stamp  # the lock was compiled: the stamp is known now
        if relocked and (
            done := _noop(profile, d.current, new_stamp, force=force, start=start, damaged=[])
        ):
            log_fh.close()
            return done
        new_dir = _unique_dir(profile, new_stamp)
        report = replace(report, stamp=new_stamp, build_dir=str(new_dir))
        report = _install(
            plan, facts, project=project, target=new_dir, d=d, report=report, steps=steps, log=log
        )
        report = _switch_in(profile, new_dir, report, steps, start=start, log=log)
    except BaseException as exc:
        if new_dir is not None and current_target(profile) != new_dir:
            shutil.rmtree(new_dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # a full disk must not hide why the build failed
            _write_report(report_path, replace(report, steps=tuple(steps.done), error=str(exc)))
        with contextlib.suppress(OSError):
            log_fh.close()
        failure = _build_failure(exc, profile, new_dir or paths.venvs_dir(), log_path)
        if failure is exc:
            raise
        raise failure from exc
    report = replace(report, seconds=_since(start), finished_at=time.time())
    _write_report(report_path, report)
    log_fh.close()
    return BuildResult(
        profile=profile,
        venv=paths.venv_dir(profile),
        target=new_dir,
        stamp=new_stamp,
        noop=False,
        seconds=time.monotonic() - start,
        report=report,
        report_path=report_path,
        log_path=log_path,
    )


def _build_failure(exc: BaseException, profile: str, where: Path, log_path: Path) -> BaseException:
    """What a failed build raises: uv's own message, or "disk full at PATH", exit 4."""
    untouched = f"the previous environment is untouched (log: {log_path})"
    no_space = isinstance(exc, OSError) and exc.errno in fsio.NO_SPACE
    if isinstance(exc, CommandFailed):
        detail = uv.error_summary(exc.output) or str(exc)
        no_space = "No space left on device" in exc.output or "Disk quota exceeded" in exc.output
        if python := uv.python_not_downloaded(exc.output):
            return BuildFailed(
                f"building {profile} failed: Python {python} is not installed here and uv "
                f"could not download it ({detail}); fix: `uv python install {python}` where "
                f"the network reaches it, or a profile/project Python this machine has; "
                f"{untouched}"
            )
        if not no_space:
            return BuildFailed(f"building {profile} failed: {detail}; {untouched}")
    if no_space:
        full = fsio.disk_full(getattr(exc, "filename", None) or where)
        return BuildFailed(f"building {profile} failed: {full}; {untouched}")
    return exc


def _since(start: float) -> float:
    return round(time.monotonic() - start, 3)


def _lock_step(
    plan: Plan,
    facts: Facts,
    d: _Decision,
    report: BuildReport,
    steps: _Steps,
    *,
    log: IO[str],
) -> tuple[BuildReport, str]:
    """Compile the lock when it does not match (never for a project, which brings its
    own); the report, and the stamp, known now."""
    path = d.lock_path
    if d.project:
        return report, d.stamp
    if d.lock_why is None:
        kept = results.LockUsed(path=str(path), action="kept (inputs digest matches)")
        return replace(report, lock=kept), d.stamp
    steps(
        "lock",
        f"locking {report.environment} ({path.name})",
        lambda: lockfiles.compile_lock(plan, facts, path=path, log=log),
    )
    info = results.LockUsed(path=str(path), action=f"compiled: {d.lock_why}")
    return replace(report, lock=info), stamp(plan, facts, fsio.read_text(path, "lockfile"))


def _install(
    plan: Plan,
    facts: Facts,
    *,
    project: ProjectRequest | None,
    target: Path,
    d: _Decision,
    report: BuildReport,
    steps: _Steps,
    log: IO[str],
) -> BuildReport:
    """venv, packages (the lock, or the project with this node's torch), flash-attn,
    fixes, import check, freeze: what the new build directory gets."""
    log.write(f"# hpcenv build {report.environment} -> {target}\n")
    steps("venv", f"creating venv (Python {d.python})", lambda: uv.venv(target, d.python, log=log))
    project_report: results.ProjectInstall | None = None
    isolation: results.NoIsolation | None = None
    if project is None:
        isolation = steps(
            "sync", f"installing {d.lock_path.name}", lambda: _sync(target, d.lock_path, plan, log)
        )
    else:
        from hpcenv.build import swap

        proj = project
        project_report = steps(
            "project",
            f"installing project {proj.directory.name} with this node's torch",
            lambda: swap.sync_and_swap(proj, target, plan, log=log, facts=facts),
        )
    fa: results.FlashAttnOutcome
    no_torch = project_report is not None and project_report.torch_after is None
    if project_report is not None and (project_report.flash_attn_from_project or no_torch):
        fa = results.FlashAttnOutcome.left_to_project()  # the project's, or none without torch
    else:
        fa = steps(
            "flash-attn",
            f"flash-attn: {plan.flash_attn.action}",
            lambda: _flash_attn(target, plan, log=log),
        )
    installed_fixes = steps("fixes", "installing fixes", lambda: fixes.install(target, plan.fixes))
    if d.current is not None:
        current = d.current
        carried = steps("bytecode", "bytecode of unchanged files taken over from the current build",
                        lambda: venv_check.carry_bytecode(current, target))  # fmt: skip
        log.write(f"# {carried} bytecode files taken over from {current.name}\n")
    # with a project: every package built against torch, and the profile's (swap names them)
    names = package_names(plan) if project_report is None else list(project_report.checked)
    walk = venv_check.Walk()  # what protect saw, for the proof and the file list
    steps("protect", "files shared with uv's cache made read-only",
          lambda: venv_check.protect(target, walk))  # fmt: skip
    repaired, imports = _prove_and_probe(
        target, plan, names, steps, log=log, walk=walk, torch=not no_torch
    )
    if project_report is not None:
        isolation = project_report.no_build_isolation
    return replace(
        report,
        project=project_report,
        no_build_isolation=isolation,
        flash_attn=fa,
        fixes=tuple(installed_fixes),
        repaired=repaired or None,
        imports=imports,
    )


def _switch_in(
    profile: str, new_dir: Path, report: BuildReport, steps: _Steps, *, start: float, log: IO[str]
) -> BuildReport:
    """Complete the proven, import-checked build, write its marker and switch it in. The
    builds it supersedes (all but the one it replaces, kept for a roll-back) are removed
    meanwhile."""
    previous = current_target(profile)
    superseded = old_builds(profile, keep={new_dir} | ({previous} if previous else set()))
    remover = _start_removal(superseded)
    try:
        report = _complete(new_dir, report, log=log)
        report = replace(report, steps=tuple(steps.done), seconds=_since(start))
        fsio.write_json(new_dir / MARKER, report.serialize())
        switch(profile, new_dir)
    except BaseException:
        with contextlib.suppress(Exception):  # why the build failed comes first
            _finish_removal(remover, superseded)
        raise
    return replace(
        report,
        removed_old_builds=tuple(_finish_removal(remover, superseded)),
        previous=str(previous) if previous else None,
    )


def _complete(target: Path, report: BuildReport, *, log: IO[str]) -> BuildReport:
    """What a proven build gets last: the list of what is installed (its file list was
    written once the import check passed: :func:`_prove_and_probe`)."""
    return replace(report, installed=uv.freeze(target, log=log))


def _sync(target: Path, lock_path: Path, plan: Plan, log: IO[str]) -> results.NoIsolation | None:
    """``uv pip sync`` of the lock; packages whose setup.py imports torch are built
    against the venv's torch, without build isolation (``torch_first``)."""
    with fsio.work_dir("hpcenv-sync-") as work:
        return torch_first.sync(target, lock_path, plan=plan, work=work, log=log)


def _prove_and_probe(
    target: Path,
    plan: Plan,
    names: list[str],
    steps: _Steps,
    *,
    log: IO[str],
    walk: venv_check.Walk,
    torch: bool = True,
) -> tuple[tuple[str, ...], import_check.ImportCheck]:
    """The RECORD proof (:func:`_prove`) and the import check, at the same time: the files
    are hashed in threads while the import check's interpreters start (both only read the
    tree; the check's bytecode lands in ``__pycache__``, which no RECORD hashes). When the
    proof repairs a distribution, the check runs again on the repaired tree, and only
    that answer counts; a failed check before a repair is no verdict either. Last, the
    file list a no-op compares with (``venv_check.record_tree``)."""
    stop = threading.Event()
    check = import_check.check
    hashed: dict[str, float] = {}
    listed: list[list[str]] = []  # the file list from protect's walk, made meanwhile

    def hash_tree() -> venv_check.Proof:
        start = time.monotonic()
        try:
            record = venv_check.proofs_path()
            proof = venv_check.prove(target, stop=stop, record=record, seen=walk.stats)
        finally:
            hashed["seconds"] = round(time.monotonic() - start, 3)
        listed.append(venv_check.tree_of(target, walk))
        return proof

    hashing = threads.Beside(hash_tree)
    probe_error: BuildFailed | None = None
    imports: import_check.ImportCheck | None = None
    try:
        imports = steps("probe", "import check", lambda: check(target, names, log=log, torch=torch))
    except BuildFailed as exc:
        probe_error = exc
    except BaseException:
        stop.set()  # Ctrl-C, a stop signal: the hashing threads end at their next file
        with contextlib.suppress(Exception):  # the stop is what this reports
            hashing.result()
        raise
    proof = hashing.result()
    bad = proof.bad
    verify_what = (
        f"checking files against their RECORD hashes, beside the import check ({proof.read} "
        f"read, {proof.known} unchanged since an earlier check)"
    )
    steps.insert_before_last(StepTime(step="verify", what=verify_what, seconds=hashed["seconds"]))
    repaired: tuple[str, ...] = ()
    if bad:
        repaired = steps("repair", "reinstalling what differed from its RECORD",
                         lambda: _prove(target, plan, bad, log=log))  # fmt: skip
    if repaired:  # the reinstalled files are new links into uv's cache: protect them too
        venv_check.protect(target)
        imports = steps("probe", "import check of the repaired environment",
                        lambda: check(target, names, log=log, torch=torch))  # fmt: skip
    elif probe_error is not None:
        raise probe_error
    assert imports is not None
    # the list a no-op compares with, once the import check wrote its bytecode (which it
    # leaves out): protect's walk unless the check or a repair changed the tree since
    if repaired:
        venv_check.record_tree(target)
    else:
        venv_check.record_tree(target, walk, before=listed[0])
    return repaired, imports


def _prove(target: Path, plan: Plan, bad: dict[str, list[str]], *, log: IO[str]) -> tuple[str, ...]:
    """``bad``: the files that differ from their RECORD hash. A mismatch in a new
    environment is a damaged uv cache entry (a file edited through a hard link of an older
    build): the entry is cleaned, the distribution reinstalled and checked again; still
    wrong: exit 4."""
    names = sorted(bad)
    versions = uv.freeze(target, log=log)
    log.write(f"# damaged in uv's cache: {', '.join(names)}; cleaning and reinstalling\n")
    uv.cache_clean(names, log=log)
    uv.install(
        target,
        [f"{n}=={versions[n]}" for n in names if n in versions],
        plan=plan,
        extra=["--reinstall", "--no-deps"],
        log=log,
    )
    still = venv_check.prove(target).bad  # the files are new: read them all
    if still:
        name = sorted(still)[0]
        raise BuildFailed(
            f"{name}'s files differ from its RECORD even after 'uv cache clean {name}' "
            f"({still[name][0]}): check where uv finds {name} (a wheelhouse or index with a "
            f"changed file); the previous environment is untouched"
        )
    return tuple(
        f"uv's cache held a damaged {n} ({bad[n][0]} differed from its RECORD): cleaned "
        f"(uv cache clean {n}) and reinstalled"
        for n in names
    )


def _write_report(path: Path, report: BuildReport) -> None:
    fsio.write_json(path, report.serialize())


def _flash_attn(venv: Path, plan: Plan, *, log: IO[str]) -> results.FlashAttnOutcome:
    fa = plan.flash_attn
    done = results.FlashAttnOutcome(action=fa.action, reason=fa.reason, version=fa.version)
    if fa.action == "wheel" and fa.wheel_url:
        uv.install(venv, [fa.wheel_url], plan=plan, log=log)
        return replace(done, wheel=fa.wheel_url)
    if fa.action == "build":
        from hpcenv.build import flashattn

        return replace(done, built=flashattn.install_flash_attn(venv, plan, log=log))
    return done


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use 'hpcenv build'")
