"""Node-local scratch candidates: where a job's TMPDIR could go on this node.

The places clusters put node-local disks (the job's ``$TMPDIR``, ``/local``,
``/scratch``, ``/srv/local*``, ``/tmp``), each with the filesystem it is on (read from
``/proc/mounts``) and its free space; a network filesystem (NFS, Lustre, GPFS, ...) is
never a candidate: it is listed with ``local = False`` so the reason can be said.
``hpcenv facts --scratch`` adds them to the facts; ``hpcenv profile init`` picks one.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from pathlib import Path

from hpcenv.models.facts import ScratchCandidate

#: Filesystems that are shared over the network: slow for TMPDIR and for builds.
NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "cephfs",
        "fuse.sshfs",
        "fuse.ceph",
        "pvfs2",
        "orangefs",
        "panfs",
        "wekafs",
        "fuse.glusterfs",
        "glusterfs",
        "afs",
        "9p",
        "fuse.juicefs",
    }
)


def mount_of(path: Path, mounts: str) -> tuple[str, str] | None:
    """(mount point, fs type) of the longest mount point containing ``path``."""
    best: tuple[str, str] | None = None
    target = str(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return best


#: Where node-local scratch usually is, in the order a profile prefers them.
PLACES = ("/local", "/scratch", "/srv/local*", "/tmp")


def read_mounts(path: Path = Path("/proc/mounts")) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _free_gib(path: str) -> float | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return round(st.f_bavail * st.f_frsize / 2**30, 1)


def candidates(
    env: Mapping[str, str] | None = None, mounts: str | None = None
) -> tuple[ScratchCandidate, ...]:
    """Every existing scratch place on this node (``$TMPDIR`` first), with its filesystem
    and free space; network filesystems are kept, marked ``local=False``."""
    env = os.environ if env is None else env
    mounts = read_mounts() if mounts is None else mounts
    places: list[tuple[str, str]] = []
    if env.get("TMPDIR"):
        places.append((env["TMPDIR"], "$TMPDIR"))
    for pattern in PLACES:
        places += [(p, pattern) for p in sorted(glob.glob(pattern))]
    out: list[ScratchCandidate] = []
    seen: set[str] = set()
    for place, why in places:
        path = Path(place)
        if not path.is_dir() or str(path.resolve()) in seen:
            continue
        seen.add(str(path.resolve()))
        mount = mount_of(path.resolve(), mounts)
        fstype = mount[1] if mount else "unknown"
        out.append(
            ScratchCandidate(
                path=place,
                found_as=why,
                mount_point=mount[0] if mount else None,
                fstype=fstype,
                free_gib=_free_gib(place),
                local=fstype not in NETWORK_FS,
            )
        )
    return tuple(out)


__all__ = ["NETWORK_FS", "PLACES", "candidates", "mount_of", "read_mounts"]
