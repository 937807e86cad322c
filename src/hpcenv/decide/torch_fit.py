"""Whether a torch release has a wheel for the env's Python and the node's glibc, checked
before anything is built (``plan``, and so ``build``; ``resolve``; ``audit``).

The facts are PyPI's: the CPython tags and the manylinux tags of a release's wheels per
CPU arch (``torch_pypi.toml``, ``pythons`` and ``tags``). The rule is the one
wheel-fits-node rule of ``hpcenv.models.wheel_fit`` (``packaging.tags``). A release or arch
the data lacks, or a node whose Python or glibc is unknown, passes: nothing is guessed.
Both refusals are ``NoCompatibleBuild`` (exit 3), naming what the release has and the fix:
the Python that has a wheel, or the newest release that has one for this Python and glibc.
"""

from __future__ import annotations

from collections.abc import Callable

from hpcenv import knowledge
from hpcenv.knowledge import Knowledge, PlatformVariants
from hpcenv.models import wheel_fit
from hpcenv.utils.errors import NoCompatibleBuild


def short_python(python: str | None) -> str | None:
    """``"3.11.9"`` -> ``"3.11"``, ``"3.13t"`` stays; None or not a version -> None."""
    key = wheel_fit.python_key(python or "")
    if key is None:
        return None
    (major, minor), free = key
    return f"{major}.{minor}{'t' if free else ''}"


def _has_python(plat: PlatformVariants, arch: str, python: str) -> bool:
    """Whether PyPI has a wheel of this release for CPython ``python`` (its tags when
    recorded: a free-threaded ``3.13t`` needs a ``cp313t`` wheel; else its CPython list)."""
    if plat.tags:
        return wheel_fit.tags_fit(plat.tags, python=python, arch=arch, glibc=None)
    return not plat.pythons or python in plat.pythons


def _fits(plat: PlatformVariants, arch: str, python: str | None, glibc: str | None) -> bool:
    if python and not _has_python(plat, arch, python):
        return False
    if glibc is None or not plat.tags:
        return True
    pythons = [python] if python else list(plat.pythons)
    return any(wheel_fit.tags_fit(plat.tags, python=py, arch=arch, glibc=glibc) for py in pythons)


def newest_fitting(
    arch: str,
    python: str | None,
    glibc: str | None,
    know: Knowledge | None = None,
    runs: Callable[[str], bool] | None = None,
) -> str | None:
    """The newest release hpcenv knows with a PyPI wheel for this Python and glibc (and,
    given ``runs``, one that hpcenv's resolver says runs on the node)."""
    know = know or knowledge.load()
    for version in reversed(know.known_versions()):
        release = know.release_of(version)
        plat = release.platforms.get(arch) if release else None
        fits = plat is not None and bool(plat.pythons) and _fits(plat, arch, python, glibc)
        if fits and (runs is None or runs(version)):
            return version
    return None


def check(
    version: str,
    arch: str,
    python: str | None,
    glibc: str | None = None,
    *,
    where: str,
    python_where: str | None = None,
    runs: Callable[[str], bool] | None = None,
) -> None:
    """``NoCompatibleBuild`` when torch ``version`` has no wheel for CPython ``python`` or
    for glibc ``glibc`` on ``arch`` (see the module docstring). ``where`` names the node or
    profile; ``python_where`` the setting that chose the Python (``[profile] python in
    profile p``). ``runs`` (``torch_choice.runs_on``: hpcenv's torch decision for the node)
    checks every fix before it is proposed: another Python only when a build of
    ``version`` runs there, another release only when it does."""
    know = knowledge.load()
    release = know.release_of(version)
    plat = release.platforms.get(arch) if release else None
    py = short_python(python)
    if plat is None:
        return
    if py and plat.pythons and not _has_python(plat, arch, py):
        newest = newest_fitting(arch, py, None, know, runs)
        fixes = []
        if runs is None or runs(version):
            fixes.append(f"use Python {plat.pythons[-1]} ({python_where or where})")
        if newest:
            fixes.append(f"torch {newest}, the newest release with a CPython {py} wheel"
                         + (" that runs here" if runs else ""))  # fmt: skip
        fix = ", or ".join(fixes) or f"no build of torch {version} runs on {where}"
        raise NoCompatibleBuild(
            f"torch {version} has no wheel for Python {py} on {arch} (PyPI lists its wheels "
            f"for CPython {', '.join(plat.pythons)}): {fix}"
        )
    if glibc is None or wheel_fit.glibc_key(glibc) is None or _fits(plat, arch, py, glibc):
        return
    need = wheel_fit.min_glibc(plat.tags)
    need_text = f"glibc >= {need[0]}.{need[1]}" if need else "a newer glibc"
    newest = newest_fitting(arch, py, glibc, know, runs)
    fix = f"use torch {newest}, the newest release with a wheel for it" if newest else ""
    fix += f"{', or ' if fix else ''}a node or container with {need_text}"
    platforms = sorted({t.rsplit("-", 1)[-1] for t in plat.tags})
    raise NoCompatibleBuild(
        f"torch {version}'s {arch} wheels need {need_text} ({', '.join(platforms)}) but "
        f"{where} has glibc {glibc}, so pip and uv cannot install them: {fix}"
    )


__all__ = ["check", "newest_fitting", "short_python"]
