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
import contextlib
import csv
import errno
import hashlib
import itertools
import os
import re
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpcenv.kit import threads
from hpcenv.utils import fsio, modes, paths
from hpcenv.utils.names import canonicalize_name

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


@dataclass(frozen=True)
class Walk:
    """What :func:`protect`'s walk saw, for the proof and the file list: ``stats``, the
    ``lstat`` of every entry by path (taken before its mode changed); ``listed``, the
    paths the file list holds (bytecode and hpcenv's own files left out), in walk order;
    ``names``, each directory of those (the venv's own included) with its ``lstat`` and
    the names of its entries on the list."""

    stats: dict[str, os.stat_result] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)
    names: dict[str, tuple[os.stat_result, list[str]]] = field(default_factory=dict)


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


def _line(rel: str, path: str, st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return f"{rel}\tl\t0\t0\t{os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return f"{rel}\td\t0\t0"
    return f"{rel}\tf\t{st.st_size}\t{st.st_mtime_ns}"


def tree(venv: Path) -> list[str]:
    """One line per file, link and directory under ``venv`` (bytecode left out), sorted."""
    cut = len(str(venv)) + 1
    return sorted(_line(entry.path[cut:], entry.path, st) for entry, st in _walk(venv))


def tree_of(venv: Path, walk: Walk) -> list[str]:
    """:func:`tree` from :func:`protect`'s walk (``walk``) instead of a walk of its own; a
    link that is gone since is left out (the check of :func:`record_tree` then walks
    again)."""
    cut = len(str(venv)) + 1
    stats = walk.stats
    out: list[str] = []
    for path in walk.listed:
        with contextlib.suppress(OSError):
            out.append(_line(path[cut:], path, stats[path]))
    out.sort()
    return out


def _same_names(walk: Walk) -> bool:
    """Does every directory :func:`protect` listed still hold the entries it held then
    (bytecode and hpcenv's own files left out), and no other? A directory whose inode and
    mtime are as they were then is not listed again: adding, removing or renaming an
    entry sets its directory's mtime. A directory that cannot be read, or is no longer a
    directory, answers no."""
    for folder, (was, names) in walk.names.items():
        try:
            st = os.stat(folder, follow_symlinks=False)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        if (st.st_ino, st.st_mtime_ns) == (was.st_ino, was.st_mtime_ns):
            continue
        try:
            now = os.listdir(folder)
        except OSError:
            return False
        kept = [n for n in now if n not in _SKIP_NAMES and not n.endswith(".pyc")]
        if len(kept) != len(names) or set(kept) != set(names):
            return False
    return True


def record_tree(venv: Path, walk: Walk | None = None, before: list[str] | None = None) -> None:
    """Write ``venv``'s file list (once the environment is complete and checked).
    ``walk``: :func:`protect`'s, before the import check, and ``before`` the list
    :func:`tree_of` made from it; kept when every directory still holds the entries it held
    then (:func:`_same_names`: the check writes bytecode, which the list leaves out), else
    ``venv`` is walked again. A file the check changed in place (no package of a build
    does), or a change the directories' mtimes hid, would make the next no-op rebuild,
    naming it: that check walks the whole tree (:func:`tree_changes`)."""
    if walk is not None and _same_names(walk):
        lines = before if before is not None else tree_of(venv, walk)
    else:
        lines = tree(venv)
    text = "\n".join(lines) + "\n"
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

#: a file written this recently (its mtime) is read again next time: a write in the same
#: tick of the file system's coarse clock as our read would leave its mtime as it was
SETTLED_NS = 1_000_000_000

#: how many file identities the record of earlier proofs keeps (a torch build has ~18,000)
PROOFS_KEPT = 100_000

#: a file's identity in the record: ``"<device> <inode> <size> <mtime_ns>"``, the record's
#: line less its digest (a string, so that reading the record splits each line once)
_Identity = str


def _identity(st: os.stat_result) -> _Identity:
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns}"


@dataclass(frozen=True)
class Proof:
    """What :func:`prove` found: distribution -> the files whose content differs from the
    sha256 its RECORD lists, how many files it read and how many an earlier proof had
    read (the same inode, size and mtime: the same content)."""

    bad: dict[str, list[str]]
    read: int
    known: int


def proofs_path() -> Path | None:
    """This user's record of earlier proofs, kept with the files it is about: in uv's
    cache (``<uv cache>/hpcenv-proofs-<uid>/record.txt``), so a build in a new $HPCENV_HOME
    that links the same cache entries does not read them again. None when uv cannot name
    its cache (every file is then read)."""
    from hpcenv.tools import uv

    cache = uv.cache_dir()
    return cache / f"hpcenv-proofs-{os.getuid()}" / "record.txt" if cache else None


#: the most a record may hold (:data:`PROOFS_KEPT` lines of at most 200 bytes): a bigger
#: file is not hpcenv's record and is ignored, never read whole
PROOFS_MAX_BYTES = PROOFS_KEPT * 200


def _load_proofs(path: Path) -> dict[_Identity, str]:
    """The record at ``path``: identity -> sha256; empty when missing, unreadable, not a
    regular file, bigger than :data:`PROOFS_MAX_BYTES`, damaged, or when it or its
    directory is not only this user's to write (another user, the group or everyone
    could have added lines: its lines are then read again from disk). Its directory is
    never entered through a symlink (``fsio.private_dir``): one planted or swapped in
    for it could lead to a file of yours that you did not write as a record."""
    directory = fsio.private_dir(path.parent)
    if directory is None:
        return {}
    try:
        data = fsio.read_at(directory, path.name, PROOFS_MAX_BYTES)
    finally:
        os.close(directory)
    if data is None:
        return {}  # a record the group could add entries to proves nothing
    # each line as (identity, digest), unchecked: a line that is not one holds a key no
    # file's identity equals (``_identity``), which no lookup finds; ``_save_proofs`` keeps
    # only well-formed ones (checking 40,000 lines here took 25 ms of every build)
    lines = data.decode("ascii", errors="replace").splitlines()
    return {key: digest for key, _, digest in map(str.rpartition, lines, itertools.repeat(" "))}


#: a record's line as :func:`_save_proofs` writes it: an identity and a digest
_RECORD_LINE = re.compile(r"\d+ \d+ \d+ \d+ [A-Za-z0-9_-]{1,100}")


def _save_proofs(path: Path, new: dict[_Identity, str], old: dict[_Identity, str]) -> None:
    """This proof's identities first, then the older ones, :data:`PROOFS_KEPT` at most;
    written atomically at 0644 in a directory of this user's made 0755, whatever the umask
    (a record the group could write would be ignored), all of it through the directory's
    descriptor (``fsio.private_dir``, ``write_at``): never through a symlink, also one
    swapped in for the directory between a check and the write. A record that cannot be
    written only costs the next build its reads (a read-only or full cache, a directory
    of someone else's)."""
    merged = {**new, **{k: v for k, v in old.items() if k not in new}}
    rows = [f"{k} {v}\n" for k, v in list(merged.items())[:PROOFS_KEPT]]
    rows = [row for row in rows if _RECORD_LINE.fullmatch(row, 0, len(row) - 1)]
    directory = fsio.private_dir(path.parent, make=True)
    if directory is None:
        return
    try:
        with contextlib.suppress(OSError):
            fsio.write_at(directory, path.name, "".join(rows).encode("ascii"))
    finally:
        os.close(directory)


def prove(
    venv: Path,
    *,
    stop: threading.Event | None = None,
    record: Path | None = None,
    seen: Mapping[str, os.stat_result] | None = None,
) -> Proof:
    """Check every file a RECORD of ``venv`` lists with a sha256 against it.

    A new environment's files come from uv's cache: a cache entry changed after uv
    unpacked it (an edit through a hard link of an older build) shows up here. Each file
    is read in full (:data:`HASH_THREADS` at a time) unless ``record`` (the file of
    :func:`proofs_path`, one per user and uv cache) says an earlier proof read this very
    file: uv links the same cache entries into build after build, whatever $HPCENV_HOME,
    and a write through any link sets the entry's mtime, so a file whose device, inode,
    size and mtime are as they were holds what was hashed then (as git's index trusts
    them; the ctime cannot serve: every new link changes it). Only the file's owner can
    set an mtime back after a write (``touch -d``), so only files this user owns and
    nobody else may write are taken from the record (another user's cache entry is read
    every time); remove the record to have the next build read every file. A file this
    build alone holds (one link: its RECORD, scripts uv wrote) is never linked into
    another build, and is not recorded.
    The answer is in distribution and RECORD order. ``stop`` set: the threads hash no
    further file (the answer is then incomplete; the caller is stopping). ``seen``: the
    ``lstat`` of the venv's regular files from :func:`protect`'s walk just before, taken
    instead of a ``stat`` each (a file it lacks is ``stat``-ed). Either way the proof is of
    the files as they were at that ``stat``: both run beside the import check, which is
    the environment's own code, running as you, as every job will."""
    stats = seen or {}
    old = _load_proofs(record) if record is not None else {}
    uid = os.geteuid()
    bad: list[tuple[int, str, str]] = []  # (row, distribution, RECORD path)
    new: dict[_Identity, str] = {}
    taken = 0
    todo: list[tuple[int, str, str, str, str]] = []  # what the record does not vouch for
    for row, (name, rel, full, want) in enumerate(_record_rows(venv)):
        st = stats.get(full)
        if st is not None and stat.S_ISREG(st.st_mode) and modes.yours_alone(st, uid):
            key = _identity(st)
            digest = old.get(key)
            if digest is not None:  # taken here: threads would only contend for the GIL
                taken += 1
                if digest != want:
                    bad.append((row, name, rel))
                else:
                    new[key] = digest
                continue
        todo.append((row, name, rel, full, want))
    fresh, read, known = _read_files(todo, stats, old, uid=uid, stop=stop, bad=bad)
    new.update(fresh)
    if record is not None and any(k not in old for k in fresh):
        _save_proofs(record, new, old)
    out: dict[str, list[str]] = {}
    for _, name, rel in sorted(bad):
        out.setdefault(name, []).append(rel)
    return Proof(bad=out, read=read, known=taken + known)


def _record_rows(venv: Path) -> Iterator[tuple[str, str, str, str]]:
    """(distribution, RECORD path, full path, sha256) of each file a RECORD of ``venv``
    lists with a sha256, in distribution and RECORD order; never a file outside ``venv``."""
    inside = os.path.normpath(venv) + "/"
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
                rel = row[0]
                plain = not rel.startswith("/") and ".." not in rel and "." not in rel[:1]
                full = f"{base}/{rel}" if plain else os.path.normpath(os.path.join(base, rel))
                if plain or full.startswith(inside):  # never a file outside the venv
                    yield name, rel, full, row[1][len("sha256=") :]


def _read_files(
    todo: list[tuple[int, str, str, str, str]],
    stats: Mapping[str, os.stat_result],
    old: Mapping[_Identity, str],
    *,
    uid: int,
    stop: threading.Event | None,
    bad: list[tuple[int, str, str]],
) -> tuple[dict[_Identity, str], int, int]:
    """Hash the files of ``todo`` (:data:`HASH_THREADS` at a time) that the record does
    not vouch for; those differing from their RECORD are added to ``bad``. Returns the
    identities for the record (files of this user's alone, linked elsewhere, settled),
    how many files were read and how many the record vouched for after all (not in
    ``stats``: ``stat``-ed here)."""
    settled = time.time_ns() - SETTLED_NS
    Seen = tuple[str | None, _Identity | None, bool]  # digest, identity to keep, was read

    def check(path: str) -> Seen:
        if stop is not None and stop.is_set():
            return None, None, False
        st = stats.get(path)
        try:
            st = st if st and stat.S_ISREG(st.st_mode) else os.stat(path)
        except OSError:
            return None, None, False
        if not stat.S_ISREG(st.st_mode):  # a RECORD naming a FIFO or /dev/zero: never read
            return None, None, False
        mine = modes.yours_alone(st, uid)
        key = _identity(st)
        if mine and key in old:  # not in protect's walk, stat-ed here
            return old[key], key, False
        digest = _sha256_b64(path)
        keep = mine and st.st_nlink > 1 and st.st_mtime_ns < settled
        return digest, (key if digest and keep else None), True

    def check_batch(batch: list[tuple[int, str, str, str, str]]) -> list[Seen]:
        return [check(item[3]) for item in batch]

    batches = [todo[i : i + 128] for i in range(0, len(todo), 128)]
    checked = [s for done in threads.map_threads(check_batch, batches, HASH_THREADS) for s in done]
    fresh: dict[_Identity, str] = {}
    read = known = 0
    for (row, name, rel, _, want), (digest, key, was_read) in zip(todo, checked, strict=True):
        read += was_read
        known += digest is not None and not was_read
        if digest is not None and digest != want:
            bad.append((row, name, rel))
        elif key is not None and digest is not None:
            fresh[key] = digest
    return fresh, read, known


# -- bytecode a new build takes over from the one it replaces --------------------------


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a, follow_symlinks=False), os.stat(b, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(sa.st_mode) and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _read_only(path: str) -> None:
    """Take the write bits off ``path``, a regular file (``OSError`` for anything else: a
    planted link is neither followed nor shared)."""
    mode = os.stat(path, follow_symlinks=False).st_mode
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    if mode & 0o222:
        os.chmod(path, stat.S_IMODE(mode) & ~0o222)


def carry_bytecode(old: Path, new: Path) -> int:
    """Link the bytecode of ``old`` (the build ``new`` replaces) into ``new`` wherever its
    source is the very same file in both (one device and inode: both builds link the same
    entry of uv's cache), so that the import check, and every job's first start, do not
    compile again what did not change (``import torch`` 2.6 s without bytecode, 1.3 s with,
    measured here). Python still checks each ``.pyc`` against its source's mtime and size,
    and replaces one by a new file, never in place; a shared one is made read-only, as
    :func:`protect` does with files shared with uv's cache. Nothing is followed through a
    symlink. Nothing is carried from a build someone else could have written into
    (``fsio.untrusted``: a ``.pyc`` planted in a group-writable ``__pycache__``). Returns
    how many files were carried."""
    if fsio.untrusted(old):
        return 0
    carried = 0
    for old_site in paths.site_packages(old):
        new_site = new / old_site.relative_to(old)
        inside = os.path.realpath(new_site) + os.sep
        for folder, dirs, files in os.walk(old_site):
            if os.path.basename(folder) != "__pycache__":
                continue
            dirs.clear()
            rel = os.path.relpath(os.path.dirname(folder), old_site)
            source_dir = os.path.normpath(os.path.join(new_site, rel))
            target_dir = os.path.join(source_dir, "__pycache__")
            ready = False
            for name in files:
                module = name.split(".", 1)[0]
                if not name.endswith(".pyc") or not module:
                    continue
                old_source = os.path.join(os.path.dirname(folder), module + ".py")
                if not _same_file(old_source, os.path.join(source_dir, module + ".py")):
                    continue
                if not ready:  # a link anywhere on the way out of the new build: skipped
                    if not os.path.realpath(target_dir).startswith(inside):
                        break
                    try:
                        os.makedirs(target_dir, exist_ok=True)
                    except OSError:
                        break
                    ready = True
                pyc = os.path.join(folder, name)
                try:
                    _read_only(pyc)  # shared by two builds now: no in-place write reaches both
                    os.link(pyc, os.path.join(target_dir, name))
                except OSError:  # there already, another device, no hard links: compiled anew
                    continue
                carried += 1
    return carried


# -- what a build shares with uv's cache ------------------------------------------------


def protect(venv: Path, walk: Walk | None = None) -> int:
    """Take the write bits off every file ``venv`` shares with uv's cache (a hard link;
    none where the filesystem clones). An in-place write (an editor, ``>>``, a patch to
    debug) then fails instead of changing the cache, the kept previous build and every
    other build linked to it; a write that replaces the file (``sed -i``, most editors'
    save) makes a new file and touches nothing shared. Root ignores modes: what it writes
    anyway is seen by the no-op's file list, and the next build's RECORD check cleans the
    damaged cache entry (:func:`prove`). Copying instead was measured at 6-18 s for
    ``local``'s 1.0 GB, and a CUDA torch's gigabytes of disk quota per build. Returns how
    many files were made read-only. What uv made writable by others (its ``.lock``,
    0666 whatever the umask) loses that too: nobody else writes in a build
    (``fsio.untrusted``). ``walk`` gets what the walk saw (:class:`Walk`), which
    :func:`prove` then takes instead of a ``stat`` of its own, and :func:`tree_of` and
    :func:`record_tree` instead of a walk. One ``lstat`` per entry, in one loop (per-entry
    Python is most of its cost: ~20,000 entries for ``local``)."""
    walk = Walk() if walk is None else walk
    root = str(venv)
    try:
        walk.names[root] = (os.stat(root, follow_symlinks=False), [])
    except OSError:
        return 0
    protected = 0
    todo: list[tuple[str, bool]] = [(root, True)]
    while todo:
        folder, on_list = todo.pop()
        try:  # entries stat-ed and chmod-ed through the directory's descriptor: no path walk
            fd = os.open(folder, _DIR_FLAGS)
        except OSError:
            continue
        try:
            protected += _protect_dir(fd, folder, walk, on_list, todo)
        finally:
            os.close(fd)
    return protected


#: how :func:`protect` opens each directory: never through a symlink swapped in for it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _protect_dir(
    fd: int, folder: str, walk: Walk, on_list: bool, todo: list[tuple[str, bool]]
) -> int:
    """:func:`protect`'s work in one directory (open at ``fd``): each entry's ``lstat``
    into ``walk``, its subdirectories onto ``todo``; returns how many files it made
    read-only."""
    protected = 0
    stats, listed = walk.stats, walk.listed
    kept = walk.names[folder][1] if on_list else None
    with os.scandir(fd) as found:
        entries = list(found)
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        name, mode = entry.name, st.st_mode
        path = f"{folder}/{name}"
        stats[path] = st
        shown = False
        if kept is not None and name not in _SKIP_NAMES and not name.endswith(".pyc"):
            listed.append(path)
            kept.append(name)
            shown = True
        if stat.S_ISDIR(mode):
            todo.append((path, shown))
            if shown:
                walk.names[path] = (st, [])
        elif stat.S_ISLNK(mode):
            continue
        if stat.S_ISREG(mode) and st.st_nlink > 1 and mode & 0o222:
            os.chmod(name, stat.S_IMODE(mode) & ~0o222, dir_fd=fd)
            protected += 1
        elif mode & modes.NOT_SHARED:
            os.chmod(name, stat.S_IMODE(mode) & ~modes.NOT_SHARED, dir_fd=fd)
    return protected
