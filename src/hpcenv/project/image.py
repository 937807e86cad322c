"""A container image audited like a venv: ``hpcenv audit IMAGE``.

An image is a root filesystem. Its Python packages are found where images keep them:
``/usr/local/lib/python3.X/{site,dist}-packages`` (the python and NGC images; ``lib64``
on RHEL-like ones),
``/usr/lib/python3/dist-packages`` (a distribution's Python), ``/opt/conda/lib/...`` and
venvs under ``/opt/*``. The installation holding torch (else the one with the most
distributions) is read as a venv is (``audit.read_venv``: dist-info METADATA, no import),
and its GPU code is judged against the node by the venv audit's owner
(``binaries/archs.check_venv``), nothing else.

What can be given:

- a directory: an Apptainer sandbox, an unpacked OCI image, enroot's rootfs (it holds
  ``etc/`` and ``usr/``); a symlink in it is never followed out of it;
- ``podman:NAME``: an image in podman's store, mounted read-only for the audit with
  ``podman image mount`` (root, or inside ``podman unshare``) and unmounted after;
- a ``.sif`` file: named with the one step that turns it into a directory
  (``apptainer build --sandbox DIR IMAGE.sif``), since a SIF's squashfs is not read here.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from hpcenv.project import containment
from hpcenv.tools import command
from hpcenv.utils.errors import BadInput

PODMAN = "podman:"
#: Where images keep Python packages, most specific first (relative to the rootfs).
SITE_DIRS = (
    "usr/local/lib/python3*/site-packages",
    "usr/local/lib64/python3*/site-packages",  # RHEL's platlib: pip's torch on Rocky
    "usr/local/lib/python3*/dist-packages",
    "opt/conda/lib/python3*/site-packages",
    "opt/*/lib/python3*/site-packages",
    "usr/lib/python3*/site-packages",
    "usr/lib64/python3*/site-packages",
    "usr/lib/python3/dist-packages",
    "root/.local/lib/python3*/site-packages",
)


def is_rootfs(path: Path) -> bool:
    """A root filesystem: ``etc/`` and ``usr/`` directories of its own (not links out)."""
    return all((path / d).is_dir() and not (path / d).is_symlink() for d in ("etc", "usr"))


def site_dirs(root: Path) -> list[Path]:
    """The package directories of ``root`` (only those that stay inside it)."""
    found: list[Path] = []
    for pattern in SITE_DIRS:
        for d in sorted(root.glob(pattern)):
            if d.is_dir() and containment.inside(d, root) and d not in found:
                found.append(d)
    return found


def _torch_in(site: Path) -> bool:
    return any(site.glob("torch-*.dist-info"))


def prefix(root: Path) -> tuple[Path, list[Path]]:
    """The installation the image's Python runs from (its ``lib/python*/...`` parent): the
    one holding torch, else the one with the most distributions; and every one found."""
    sites = site_dirs(root)
    if not sites:
        raise BadInput(
            f"{root}: a root filesystem without Python packages ({', '.join(SITE_DIRS[:3])}, "
            "...); give the image whose Python runs the job"
        )
    best = max(sites, key=lambda s: (_torch_in(s), len(list(s.glob("*.dist-info")))))
    return best.parents[2], sites


def notes(root: Path, chosen: Path, sites: list[Path]) -> tuple[str, ...]:
    """What was read of the image, in words."""
    others = [str(s.relative_to(root)) for s in sites if s.parents[2] != chosen]
    out = [f"the image's Python packages: /{chosen.relative_to(root)} (in {root})"]
    if others:
        out.append(f"also in the image, not judged: /{', /'.join(others)}")
    return tuple(out)


@contextlib.contextmanager
def opened(target: str) -> Iterator[str]:
    """``target`` as a path the audit can read: ``podman:NAME`` mounted for the audit and
    unmounted after; a SIF named with its one step; anything else unchanged."""
    if target.endswith(".sif") and Path(target).is_file():
        raise BadInput(
            f"{target}: a SIF image; unpack it once with 'apptainer build --sandbox DIR "
            f"{target}' (or 'unsquashfs -d DIR' of its squashfs) and run 'hpcenv audit DIR'"
        )
    if not target.startswith(PODMAN):
        yield target
        return
    name = target.removeprefix(PODMAN)
    podman = shutil.which("podman")
    if not name or name.startswith("-"):
        raise BadInput(f"{target}: give podman:IMAGE, an image of 'podman images'")
    if podman is None:
        raise BadInput(f"{target}: podman is not on PATH (apt-get install podman)")
    try:  # unmounted on every way out, Ctrl-C while podman mounts included
        mounted = command.run([podman, "image", "mount", "--", name], check=False, timeout=120)
        if mounted.returncode != 0:
            why = (mounted.stderr.strip().splitlines() or ["no output"])[-1]
            raise BadInput(
                f"{target}: podman image mount failed ({why}); as a user run "
                f"'podman unshare hpcenv audit {target}', or pull the image first"
            )
        root = mounted.stdout.strip()
        if not Path(root).is_absolute() or not Path(root).is_dir():  # never the cwd
            raise BadInput(
                f"{target}: podman image mount gave no directory ({root!r}); check "
                f"'podman image mount {name}' by hand"
            )
        yield root
    finally:
        command.run([podman, "image", "unmount", "--", name], check=False, timeout=120)


__all__ = ["PODMAN", "is_rootfs", "opened", "prefix", "site_dirs"]
