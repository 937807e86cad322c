"""Is a built environment still whole? The check a no-op build does before saying so.

A build's marker lists every distribution it installed (``installed``: name -> version).
An environment is whole when each of them is still there with that version, and every
file its ``RECORD`` lists exists, with the recorded size for files of
``SIZE_CHECK_BYTES`` or more (torch's libraries: a truncated or replaced one is caught
without hashing gigabytes). Bytecode caches are left out (they come and go). The check
lists each directory once and ``stat``s only the big files: ~0.07 s (median; min 0.06)
for the ``local`` build's 27 distributions and 20,000 files, measured here.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

from hpcenv.kit import threads
from hpcenv.utils import fsio, paths

#: Files at least this big have their size compared with RECORD's.
SIZE_CHECK_BYTES = 64 << 10


def _dist_infos(site: Path) -> dict[str, tuple[str, Path]]:
    """canonical name -> (version, .dist-info directory)."""
    out: dict[str, tuple[str, Path]] = {}
    try:
        entries = list(os.scandir(site))
    except OSError:
        return {}
    for entry in entries:
        if entry.name.endswith(".dist-info") and entry.is_dir():
            name, _, version = entry.name[: -len(".dist-info")].rpartition("-")
            if name:
                out[canonicalize_name(name)] = (version, Path(entry.path))
    return out


def _record_problem(site: Path, dist: str, info: Path, listings: dict[str, set[str]]) -> str | None:
    """The first file of ``dist``'s RECORD that is missing or (if big) of another size.

    Presence is checked against one listing per directory (``listings``, shared by all
    distributions): a few hundred ``listdir`` calls instead of a ``stat`` per file."""
    try:
        with open(info / "RECORD", encoding="utf-8", errors="replace", newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError:
        return f"{dist} has no RECORD (its {info.name} is damaged)"
    base = str(site)
    for row in rows:
        if not row or not row[0] or "__pycache__" in row[0]:
            continue
        rel = row[0]
        if rel.startswith("/") or ".." in rel:  # scripts in bin/ (../../../bin/ray)
            rel = os.path.normpath(os.path.join(base, rel))
            folder, _, name = rel.rpartition("/")
        else:
            sub, _, name = rel.rpartition("/")
            folder = f"{base}/{sub}" if sub else base
        names = listings.get(folder)
        if names is None:
            try:
                names = set(os.listdir(folder))
            except OSError:
                names = set()
            listings[folder] = names
        if name not in names:
            return f"{dist}: {row[0]} is missing"
        want = row[2] if len(row) > 2 else ""
        if want.isdigit() and int(want) >= SIZE_CHECK_BYTES:
            try:
                size = os.stat(f"{folder}/{name}").st_size
            except OSError:
                return f"{dist}: {row[0]} is missing"
            if size != int(want):
                return f"{dist}: {row[0]} is {size} bytes, installed as {want}"
    return None


def damage(venv: Path, installed: Mapping[str, str], *, records: bool = True) -> str | None:
    """What is wrong with ``venv`` against ``installed`` (name -> version); None: whole.
    ``records=False`` skips the RECORD walk (the file list of ``tree_changes`` saw every
    file already)."""
    sites = paths.site_packages(venv)
    if not sites or not (venv / "bin" / "python").exists():
        return f"{venv} has no bin/python or site-packages"
    found: dict[str, tuple[str, Path]] = {}
    for site in sites:
        found.update(_dist_infos(site))
    for name, version in sorted(installed.items()):
        have = found.get(canonicalize_name(name))
        if have is None:
            return f"{name} {version} is no longer installed"
        if have[0] != version:
            return f"{name} is {have[0]}, the build installed {version}"
    listings: dict[str, set[str]] = {}
    for site in sites if records else []:
        for name, (_, info) in sorted(_dist_infos(site).items()):
            problem = _record_problem(site, name, info, listings)
            if problem:
                return problem
    return None


# -- the tree fingerprint: what a no-op build compares -------------------------------
#
# The RECORD check above finds missing and resized files; it cannot see a file edited in
# place (a patched ``.py``, a library zeroed at its size), a ``.pth`` file added beside
# the packages, ``pyvenv.cfg`` removed or ``bin/python`` replaced. A build therefore
# records every path of its environment with its type, size and modification time (and a
# link's target) in ``FILES`` beside the marker; the no-op compares a fresh walk with it.
# Any write through the filesystem moves a file's mtime, so an edit is caught without
# hashing gigabytes; the list, not a digest, lets the rebuild say which files changed.

#: The list of a build's files (``path<TAB>kind<TAB>size<TAB>mtime_ns[<TAB>link]``).
FILES = ".hpcenv-files"

#: Written by Python itself as it runs (bytecode), or by hpcenv after the list.
_SKIP_NAMES = frozenset({"__pycache__", FILES, paths.BUILD_MARKER})


def _walk(venv: Path) -> Iterator[tuple[os.DirEntry[str], os.stat_result]]:
    """Every entry under ``venv`` with its ``lstat`` (bytecode and hpcenv's own files
    left out); directories are entered, never followed through a link."""
    todo = [str(venv)]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name in _SKIP_NAMES or entry.name.endswith(".pyc"):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                todo.append(entry.path)
            yield entry, st


def tree(venv: Path) -> list[str]:
    """One line per file, link and directory under ``venv`` (bytecode left out), sorted."""
    out: list[str] = []
    cut = len(str(venv)) + 1
    for entry, st in _walk(venv):
        rel = entry.path[cut:]
        if stat.S_ISLNK(st.st_mode):
            out.append(f"{rel}\tl\t0\t0\t{os.readlink(entry.path)}")
        elif stat.S_ISDIR(st.st_mode):
            out.append(f"{rel}\td\t0\t0")
        else:
            out.append(f"{rel}\tf\t{st.st_size}\t{st.st_mtime_ns}")
    out.sort()
    return out


def record_tree(venv: Path) -> None:
    """Write ``venv``'s file list (called last, once the environment is complete)."""
    text = "\n".join(tree(venv)) + "\n"
    fsio.write_bytes(venv / FILES, text.encode())  # paths, not prose: written as they are


def _split(lines: list[str]) -> dict[str, str]:
    return {line.partition("\t")[0]: line for line in lines if line}


def tree_changes(venv: Path, *, limit: int = 3) -> list[str] | None:
    """What changed in ``venv`` since its build (at most ``limit`` items, then a count);
    [] when nothing did; None when the build recorded no list (built by an older hpcenv)."""
    try:
        recorded = (venv / FILES).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError):
        return None
    now = tree(venv)
    if now == recorded:
        return []
    before, after = _split(recorded), _split(now)
    changes: list[str] = []
    for rel in sorted(before.keys() | after.keys()):
        if before.get(rel) == after.get(rel):
            continue
        if rel not in after:
            changes.append(f"{rel} was removed")
        elif rel not in before:
            changes.append(f"{rel} was added")
        elif after[rel].split("\t")[1] != before[rel].split("\t")[1]:
            changes.append(f"{rel} was replaced")
        else:
            changes.append(f"{rel} was changed")
    if len(changes) > limit:
        changes = [*changes[:limit], f"and {len(changes) - limit} more"]
    return changes


# -- RECORD hashes: what a new build proves before it is switched in ------------------


def _sha256_b64(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


#: threads hashing files at once: hashlib releases the GIL on large buffers and the reads
#: wait on the disk, so a few threads beat one even on a busy node
HASH_THREADS = 8


def hash_mismatches(venv: Path, *, stop: threading.Event | None = None) -> dict[str, list[str]]:
    """distribution -> the files whose content differs from the sha256 its RECORD lists.

    A new environment's files come from uv's cache: a cache entry changed after uv
    unpacked it (an edit through a hard link of an older build) shows up here. Every file
    a RECORD lists with a hash is read in full (:data:`HASH_THREADS` at a time); the
    answer is in distribution and RECORD order. ``stop`` set: the threads hash no further
    file (the answer is then incomplete; the caller is stopping)."""
    rows: list[tuple[str, str, str, str]] = []  # (distribution, RECORD path, full path, hash)
    for site in paths.site_packages(venv):
        base = str(site)
        for name, (_, info) in sorted(_dist_infos(site).items()):
            try:
                with open(info / "RECORD", encoding="utf-8", errors="replace", newline="") as fh:
                    records = list(csv.reader(fh))
            except OSError:
                continue
            for row in records:
                if len(row) < 2 or not row[1].startswith("sha256="):
                    continue
                full = os.path.normpath(os.path.join(base, row[0]))
                rows.append((name, row[0], full, row[1][len("sha256=") :]))

    def hash_batch(batch: list[str]) -> list[str | None]:
        return [None if stop is not None and stop.is_set() else _sha256_b64(p) for p in batch]

    files = [r[2] for r in rows]
    batches = [files[i : i + 128] for i in range(0, len(files), 128)]
    got = [d for done in threads.map_threads(hash_batch, batches, HASH_THREADS) for d in done]
    bad: dict[str, list[str]] = {}
    for (name, rel, _, want), digest in zip(rows, got, strict=True):
        if digest is not None and digest != want:
            bad.setdefault(name, []).append(rel)
    return bad


# -- what a build shares with uv's cache ------------------------------------------------


def protect(venv: Path) -> int:
    """Take the write bits off every file ``venv`` shares with uv's cache (a hard link;
    none where the filesystem clones). An in-place write (an editor, ``>>``, a patch to
    debug) then fails instead of changing the cache, the kept previous build and every
    other build linked to it; a write that replaces the file (``sed -i``, most editors'
    save) makes a new file and touches nothing shared. Root ignores modes: what it writes
    anyway is seen by the no-op's file list, and the next build's RECORD check cleans the
    damaged cache entry (``hash_mismatches``). Copying instead was measured at 6-18 s for
    ``local``'s 1.0 GB, and a CUDA torch's gigabytes of disk quota per build. Returns how
    many files were made read-only."""
    protected = 0
    for entry, st in _walk(venv):
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and st.st_mode & 0o222:
            os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~0o222)
            protected += 1
    return protected
