"""Every file hpcenv writes, and every text file it reads, goes through here.

``HPCENV_HOME`` may be shared by a group, and the directories hpcenv writes to may
hold names someone else planted. So a write:

- never follows a symlink: a file is written to a new temporary file in its
  directory and renamed over its name (a symlink standing there is replaced, its
  target untouched); the few files that must keep their inode (the environment lock,
  a rank's output) are opened with ``O_NOFOLLOW`` and refused when they are a symlink;
- never goes through someone else's symlink on the way: a directory reached through a
  symlink owned by another user (not you, not root) is refused, naming it and its owner;
- is never writable by the group or others, whatever the umask (``modes.private_umask``,
  set once by ``cli``, so uv, Python's bytecode and everything hpcenv starts make the same):
  what runs as you or is trusted (builds and their ``__pycache__``, the kit copy, the proof
  record, locks, reports) can be changed by you alone; only the *containers* of a shared
  home (``HPCENV_HOME``, ``venvs/``, ``cache/``, ``logs/``, ``kit/``: ``ensure_dir``)
  keep the umask's group write, so a group's members each add their own entries;
- is trusted only when nobody else could have changed it (``untrusted``): an entry owned
  by another user than its tree's owner, or writable by the group or others (a build made
  by an older hpcenv under ``umask 002``), is named and rebuilt or refused;
- is masked (``redact``) on the way out: no secret reaches a log, report, lock or script;
- that is denied names the owner and mode of what refused it, and the fix, in one line.

A read is UTF-8 or one ``BadInput`` line naming the file; JSON and TOML are parsed here
with a bound on nesting (``MAX_DEPTH``) so a hostile file is bad input, never a
``RecursionError`` that breaks a whole listing.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import os
import pwd
import shutil
import stat
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpcenv.kit import threads
from hpcenv.utils import modes, redact
from hpcenv.utils.errors import BadInput, DiskFull, HpcenvError
from hpcenv.utils.modes import NOT_SHARED

#: Deepest nesting of lists/tables/objects a JSON or TOML input may have (profiles and
#: facts need 4; uv.lock files 5).
MAX_DEPTH = 32
TMP_MARK = ".hpcenv-tmp-"


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _me() -> str:
    return _owner(os.getuid())


def _foreign_link(path: Path) -> Path | None:
    """The first symlink on ``path`` (itself or an ancestor) owned by another user."""
    mine = {os.getuid(), 0}
    current = Path(path).absolute()
    for p in (current, *current.parents):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in mine:
            return p
    return None


def check_dir(path: Path) -> Path:
    """``path`` unless reaching it goes through another user's symlink (BadInput)."""
    link = _foreign_link(path)
    if link is not None:
        owner = _owner(os.lstat(link).st_uid)
        raise BadInput(
            f"{link} is a symlink owned by {owner}, not by you ({_me()}); hpcenv does not "
            f"write through it. Remove it (or ask {owner} to), or set HPCENV_HOME to a "
            "directory of yours"
        )
    return path


def denied(path: Path, exc: OSError) -> BadInput:
    """The one line for a file or directory hpcenv may not write: whose it is, and the fix."""
    where = Path(path)
    for p in (where, *where.parents):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        owner = _owner(st.st_uid)
        mode = stat.filemode(st.st_mode)
        whose = "yours" if st.st_uid == os.getuid() else f"owned by {owner}"
        return BadInput(
            f"{p}: {exc.strerror or exc} ({whose}, {mode}); you are {_me()}. A directory "
            f"shared by a group needs group write access: ask {owner} to run "
            f"'chmod -R g+w {p}' (and to build with umask 002), or set HPCENV_HOME to a "
            "directory of yours"
        )
    return BadInput(f"{path}: {exc.strerror or exc}")  # pragma: no cover - '/' always exists


#: errno values of a disk that is full or over quota
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _free(path: Path) -> str:
    for p in (path, *path.parents):
        try:
            return f"{shutil.disk_usage(p).free / (1 << 20):.0f} MiB free"
        except OSError:
            continue
    return "free space unknown"  # pragma: no cover - '/' always exists


def disk_full(path: Path | str | None) -> DiskFull:
    import tempfile  # tempfile and secrets are imported where used: a read imports neither

    where = Path(path or tempfile.gettempdir())
    return DiskFull(
        f"disk full at {where} ({_free(where)}): free space there, or point HPCENV_HOME "
        "(environments, logs, results) or TMPDIR at a file system with room"
    )


def write_failure(exc: OSError, path: Path | str | None = None) -> HpcenvError | None:
    """The one line for a write the disk refused (full, read-only, not ours), or None."""
    where = path or exc.filename
    if exc.errno in NO_SPACE:
        return disk_full(where)
    if exc.errno == errno.EROFS:
        return BadInput(
            f"{where} is on a read-only file system: hpcenv writes its environments, logs "
            "and results under HPCENV_HOME; set HPCENV_HOME to a writable directory"
        )
    if isinstance(exc, PermissionError) and where:
        return denied(Path(where), exc)
    return None


def untrusted(root: Path) -> str:
    """Why the tree at ``root`` cannot be trusted to run as you ("" when it can): its first
    entry (``root`` too) that another user than ``root``'s owner owns, or that the group or
    others may write (a link's own mode does not count: only its directory can change it).
    Someone who could write there could have planted code or bytecode in it."""
    try:
        top = os.lstat(root)
    except OSError:
        return ""
    if why := _bad_entry(Path(root), top, top.st_uid):
        return why
    owner, todo = top.st_uid, [str(root)]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if why := _bad_entry(Path(entry.path), st, owner):
                return why
            if stat.S_ISDIR(st.st_mode):
                todo.append(entry.path)
    return ""


def _bad_entry(path: Path, st: os.stat_result, owner: int) -> str:
    if st.st_uid != owner:
        return f"{path} is owned by {_owner(st.st_uid)}, not by {_owner(owner)} who made it"
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & NOT_SHARED:
        return f"{path} is writable by others ({stat.filemode(st.st_mode)})"
    return ""


def ensure_dir(path: Path, *, sticky: bool = False) -> Path:
    """Create ``path`` (and its parents) as containers (the user's umask: under 002 the
    group adds its own entries to ``venvs/``, ``logs/``, ``cache/``; the files in them are
    never writable by others); refuse foreign symlinks on it. ``sticky``: a container of
    per-user entries hpcenv reads back (``logs/``, a job's log and output directories, the
    kit copies, results) also gets the sticky bit (``container_mode``); not ``venvs/``,
    where a member's build switches the profile's link by design."""
    check_dir(path)
    try:
        missing = [p for p in (Path(path), *Path(path).parents) if not os.path.lexists(p)]
        Path(path).mkdir(parents=True, exist_ok=True)
        for made in missing:
            with contextlib.suppress(OSError):  # made by a concurrent run of another user
                os.chmod(made, container_mode(sticky=sticky))
        if sticky:
            _keep_sticky(Path(path))
    except FileExistsError as exc:
        raise BadInput(f"{path}: exists and is not a directory; move it away") from exc
    except PermissionError as exc:
        raise denied(path, exc) from exc
    return check_dir(path)


def container_mode(*, sticky: bool = False) -> int:
    """The mode of a container directory: the user's umask (``modes.shared_mode``) and,
    with ``sticky`` when the group or others may add entries, the sticky bit (like
    ``/tmp``): each member adds their own entries and cannot rename or delete anyone
    else's (a job's script, outcome or report swapped for theirs)."""
    mode = modes.shared_mode()
    return mode | stat.S_ISVTX if sticky and mode & NOT_SHARED else mode


def _keep_sticky(path: Path) -> None:
    """A container of yours that others may write gets the sticky bit (one an older
    hpcenv made without it); another user's is left as it is."""
    with contextlib.suppress(OSError):
        st = os.stat(path)
        shared = st.st_mode & NOT_SHARED and not st.st_mode & stat.S_ISVTX
        if shared and st.st_uid == os.geteuid():
            os.chmod(path, stat.S_IMODE(st.st_mode) | stat.S_ISVTX)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(directory: Path) -> list[Path]:
    """Temporary files of hpcenv processes that died before renaming them (SIGKILL)."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        _, mark, rest = entry.name.partition(TMP_MARK)
        pid = rest.split("-", 1)[0]
        if not mark or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid == os.getuid():
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def _remove_dead_work_dirs(root: Path, prefix: str) -> None:
    """``<prefix><pid>-*`` directories of this user's hpcenv processes that are gone
    (SIGKILL: no handler ran)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        try:
            mine = entry.stat(follow_symlinks=False).st_uid == os.getuid()
            dead = pid.isdigit() and not _alive(int(pid))
            if dead and mine and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


#: The prefixes of hpcenv's work directories in $TMPDIR (``work_dir``).
WORK_PREFIXES = (
    "hpcenv-run-",
    "hpcenv-lock-",
    "hpcenv-archs-",
    "hpcenv-plan-",
    "hpcenv-project-",
    "hpcenv-resolve-",
)


def remove_dead_work_dirs() -> None:
    """Remove every work directory a SIGKILLed hpcenv process of this user left in
    $TMPDIR (called at the start of a build, which may run no command at all)."""
    import tempfile

    root = Path(tempfile.gettempdir())
    for prefix in WORK_PREFIXES:
        _remove_dead_work_dirs(root, prefix)


@contextmanager
def work_dir(prefix: str) -> Iterator[Path]:
    """A private temporary directory ``$TMPDIR/<prefix><pid>-XXXX``, removed on exit
    (also on SIGTERM/SIGHUP, which ``cli`` turns into exceptions); what a SIGKILLed
    process left is removed by the next one that makes a work directory."""
    import tempfile

    root = Path(tempfile.gettempdir())
    _remove_dead_work_dirs(root, prefix)
    path: Path | None = None
    try:
        # made with the stop signals held: one that arrives meanwhile is taken when they
        # are released, inside this try, so the directory it interrupts is removed below
        with threads.stop_signals_blocked():
            path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))
        yield path
    finally:  # a stop signal arriving now waits for the removal, not cut it short
        if path is not None:
            with threads.stop_signals_blocked():
                shutil.rmtree(path, ignore_errors=True)


def new_dir(parent: Path, prefix: str) -> Path:
    """A new, uniquely named directory in the container ``parent``, readable by the group
    (unlike ``mkdtemp``'s 0700: renamed into a shared place, the group must read it), never
    writable by it (the process's umask, ``modes``)."""
    import secrets

    ensure_dir(parent)
    while True:
        path = Path(parent) / f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        except PermissionError as exc:
            raise denied(Path(parent), exc) from exc
        return path


def temp_name(path: Path) -> Path:
    """A fresh name beside ``path`` for a file that will be renamed over it."""
    import secrets

    return path.parent / f".{path.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _not_regular(path: Path, mode: int) -> BadInput:
    return BadInput(
        f"{path} is {_kind(mode)}; hpcenv writes only regular files (it neither replaces nor "
        "writes into one): give the path of a file"
    )


def check_writable_kind(path: Path) -> Path:
    """``path`` unless a device node, FIFO or socket stands there (BadInput naming it): an
    output is a regular file, so ``--output /dev/null`` as root is not replaced by one, and
    ``--summary FIFO`` never blocks. A symlink or a missing name is fine (replaced/made)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return path
    if stat.S_ISLNK(mode) or stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return path
    raise _not_regular(path, mode)


def write_bytes(
    path: Path, data: bytes, *, executable: bool = False, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename, never through a symlink,
    never over a device, FIFO or socket); with ``mode`` the file gets exactly that mode
    whatever the umask (a cache hpcenv trusts only when nobody else can write it)."""
    path = check_writable_kind(Path(path))
    ensure_dir(path.parent)
    remove_stale_temps(path.parent)
    tmp = temp_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, (0o777 if executable else 0o666) & ~NOT_SHARED)
    except PermissionError as exc:
        raise denied(path.parent, exc) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, path)
    except IsADirectoryError as exc:
        raise BadInput(f"{path}: is a directory; give a file name") from exc
    except PermissionError as exc:
        raise denied(path, exc) from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def private_dir(path: Path, *, make: bool = False) -> int | None:
    """A descriptor of the directory ``path`` when it is yours and nobody else may write it
    (a per-user record in a cache others share: the proof record), else None. ``path``
    itself is opened without following a symlink, and all that is done in it afterwards
    goes through the descriptor (:func:`read_at`, :func:`write_at`): a directory swapped
    for a link after any check (a neighbour who can rename entries of a group-writable
    uv cache) is never entered, never read from, written to or chmod-ed by its name.
    ``make``: made when missing; an empty one of yours gets exactly 0755 (on the
    descriptor), whatever the umask, since a group-writable one would not be trusted."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        check_dir(path.parent)
        if make:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
        fd = os.open(path, flags)
    except (OSError, BadInput):
        return None
    try:
        st = os.fstat(fd)
        fresh = make and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o755
        if fresh and not os.listdir(fd):  # only one just made: never a directory in use
            os.fchmod(fd, 0o755)
            st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not modes.yours_alone(st):
        os.close(fd)
        return None
    return fd


def read_at(directory: int, name: str, limit: int) -> bytes | None:
    """The bytes of ``name`` in the directory open at ``directory`` (:func:`private_dir`)
    when it is a regular file that is yours, writable by nobody else, and at most
    ``limit`` bytes; None otherwise (a symlink, a FIFO, another user's, too big)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=directory)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)  # the reading rule (``not_yours``), in a private directory
        if not_yours(st) or st.st_size > limit:
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


def write_at(directory: int, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` atomically as ``name`` in the directory open at ``directory``
    (:func:`private_dir`): a temporary file made and renamed relative to the descriptor,
    so no symlink, at the name or in place of the directory, is ever written through;
    ``mode`` exactly, whatever the umask. A killed writer's temporary file is removed."""
    import secrets

    with os.scandir(directory) as entries:
        stale = [e.name for e in entries if _stale_temp(e.name)]
    for old in stale:
        with contextlib.suppress(OSError):
            os.unlink(old, dir_fd=directory)
    tmp = f".{name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise


def _stale_temp(name: str) -> bool:
    _, mark, rest = name.partition(TMP_MARK)
    pid = rest.split("-", 1)[0]
    return bool(mark) and pid.isdigit() and not _alive(int(pid))


def write_text(path: Path, text: str, *, executable: bool = False) -> Path:
    """Write ``text``, masked (``redact.text``), to ``path`` atomically."""
    return write_bytes(path, redact.text(text).encode(), executable=executable)


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as indented JSON, masked (``redact.deep``), to ``path`` atomically."""
    return write_bytes(path, (json.dumps(redact.deep(data), indent=2, default=str) + "\n").encode())


def append_text(path: Path, text: str) -> Path:
    """Append ``text``, masked, to ``path`` (a file others append to as well, such as
    ``$GITHUB_STEP_SUMMARY``): created if missing, never through a symlink."""
    path = Path(path)
    ensure_dir(path.parent)
    fd = _open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(redact.text(text))
    return path


def _open_nofollow(path: Path, flags: int, mode: int = 0o666 & ~NOT_SHARED) -> int:
    """``path`` opened without following a symlink and without blocking (a FIFO), and only
    when it is a regular file (a device, FIFO or socket is refused before any write)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise _not_regular(path, stat.S_IFIFO) from exc
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and os.path.islink(path)):
            raise BadInput(
                f"{path} is a symlink; hpcenv never writes through one (someone may have "
                "planted it to make you overwrite their target). Remove it and run again"
            ) from exc
        if isinstance(exc, PermissionError):
            raise denied(path, exc) from exc
        if isinstance(exc, FileExistsError):
            raise BadInput(f"{path}: already exists; hpcenv makes this file new") from exc
        raise
    st_mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(st_mode):
        os.close(fd)
        raise _not_regular(path, st_mode)
    os.set_blocking(fd, True)
    return fd


def open_new(path: Path) -> int:
    """A file descriptor of a file written in place (a rank's output): created or
    truncated, never through a symlink."""
    path = Path(path)
    check_dir(path.parent)
    return _open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)


def open_lock(path: Path) -> tuple[int, bool]:
    """(fd, writable) of a lock file that keeps its inode: never through a symlink.

    A lock file another user of the group made without group write access (an older
    hpcenv, umask 022) is still lockable read-only: ``flock`` needs no write access.
    """
    path = Path(path)
    ensure_dir(path.parent)
    try:
        return _open_nofollow(path, os.O_RDWR | os.O_CREAT), True
    except BadInput:
        if not path.is_file() or path.is_symlink():
            raise
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
        # a read-only HPCENV_HOME: nobody builds here, reading needs no lock of its own;
        # the directory stands in for a lock file that cannot be made
        if not path.is_file():
            return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), False
    return _open_nofollow(path, os.O_RDONLY), False


class MaskedLog(io.TextIOBase):
    """A log file, created new (never through a symlink), masking every write."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        ensure_dir(path.parent)
        fd = _open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        self.path = path

    def write(self, s: str) -> int:
        self._fh.write(redact.text(s))
        return len(s)

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        super().close()


# --- reading --------------------------------------------------------------------------


def read_bytes(path: Path, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``. A FIFO, device or socket there is refused
    without blocking (opened non-blocking, checked before any read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    try:  # checked on the descriptor: fdopen of a directory would fail naming the fd
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "not a regular file"
        )
        raise BadInput(f"{path}: {what} is {kind}; give a file (hpcenv reads only regular files)")
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def open_regular(path: Path, what: str = "file") -> int:
    """``path`` opened for reading when it is a regular file (a FIFO, device or socket is
    refused without blocking); BadInput naming it otherwise. The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else _kind(mode)
        raise BadInput(f"{path}: {what} is {kind}; give a file (hpcenv reads only regular files)")
    os.set_blocking(fd, True)
    return fd


def open_trusted(path: Path, what: str = "file", *, group_may_write: bool = False) -> int:
    """``path`` opened for reading by the reading rule (below: :func:`not_yours`) where
    others may have put something in its directory (a shared home's ``logs/``, a job's log
    directory): through the directory's descriptor without following a link
    (``O_NOFOLLOW``, non-blocking), a regular file, owned by you or by root (SLURM writes
    as root), writable by nobody else (the group may write it when ``group_may_write``: a
    log SLURM named for your own job under your umask). Otherwise ``NotYours`` naming it
    and why; BadInput when it cannot be opened. The caller closes the descriptor."""
    try:
        return _open_yours(path, what, group_may_write=group_may_write)
    except FileNotFoundError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc


def _open_yours(path: Path, what: str, *, group_may_write: bool = False) -> int:
    """:func:`open_trusted`, FileNotFoundError when nothing is there."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    check_dir(path.parent)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    try:
        fd = os.open(path.name, flags, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, what, "is a symlink") from exc
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    finally:
        os.close(parent)
    if why := not_yours(os.fstat(fd), group_may_write=group_may_write):
        os.close(fd)
        raise _refused(path, what, why)
    os.set_blocking(fd, True)
    return fd


def read_blocks(
    path: Path, what: str = "file", size: int = 8 << 20
) -> Generator[bytes, None, None]:
    """The bytes of the regular file ``path`` in blocks of ``size`` (a 1 GB log read in
    bounded memory); refused like ``read_bytes`` when it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(f"{path}: {what} is not a regular file; hpcenv reads only regular files")
        while block := fh.read(size):
            yield block


def read_text(path: Path, what: str = "file") -> str:
    """The UTF-8 text of ``path``; BadInput naming it (and ``what`` it is) otherwise."""
    return decode(read_bytes(path, what), f"{path}", what)


def decode(data: bytes, where: str, what: str = "file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadInput(
            f"{where}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
            "save it as UTF-8"
        ) from exc


def read_tail(path: Path, max_bytes: int, *, yours: bool = False) -> str:
    """The last ``max_bytes`` of ``path`` as text (bad bytes replaced); "" if unreadable
    or not a regular file (a FIFO or device is never read: opened non-blocking, checked
    before any read). Reads only that much, however large the file. ``yours``: a file
    read back from a directory others may write, by the reading rule (no link; another
    user's or one others may write is ``NotYours`` naming it)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if yours else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if yours and exc.errno == errno.ELOOP:
            raise _refused(Path(path), "log", "is a symlink") from exc
        return ""
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return ""
            if yours and (why := not_yours(st)):
                raise _refused(Path(path), "log", why)
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            return fh.read(max_bytes).decode("utf-8", errors="replace")
    except OSError:
        return ""


# --- reading back from a directory others may write ----------------------------------
#
# The reading rule, beside the writing rule above: a file hpcenv reads back from a
# directory others may write (a shared home's ``logs/``, ``venvs/``, ``kit/``, ``cache/``,
# ``results/``; ``XDG_CACHE_HOME``; a job's log directory) is believed only when you wrote
# it. It is opened without following a symlink, through its directory's descriptor (so a
# name swapped for a link after a check is never followed), never blocks (a FIFO), and
# must be a regular file, owned by you (or by root, as SLURM's daemons write) and
# writable by nobody else; anything else is refused naming it (:func:`read_yours`).

#: Who besides you may own a file hpcenv reads back: root (SLURM's daemons, an admin).
TRUSTED_OWNERS = (0,)


def not_yours(st: os.stat_result, *, group_may_write: bool = False) -> str:
    """Why a file with ``st`` is not one hpcenv believes it wrote ("" when it is): not a
    regular file, another user's, or writable by the group (unless ``group_may_write``)
    or others. The reading rule's one test (``open_trusted``, ``read_yours``, ``read_at``,
    ``read_tail(yours=True)``)."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}" if not stat.S_ISDIR(st.st_mode) else "is a directory"
    if st.st_uid != os.geteuid() and st.st_uid not in TRUSTED_OWNERS:
        return f"is owned by {_owner(st.st_uid)}, not by you ({_me()})"
    if st.st_mode & (stat.S_IWOTH if group_may_write else NOT_SHARED):
        return f"is writable by others ({stat.filemode(st.st_mode)})"
    return ""


def _bytes(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"


class NotYours(BadInput):
    """A file the reading rule refused (:func:`read_yours`): one line naming it."""


def _refused(path: Path, what: str, why: str) -> NotYours:
    return NotYours(
        f"{path}: {what} {why}; hpcenv reads back from a shared directory only files you "
        "wrote (regular, yours, writable by you alone): remove it (or ask its owner to) "
        "and run again"
    )


def read_yours(path: Path, what: str = "file", *, limit: int) -> bytes | None:
    """The bytes of ``path``, a file hpcenv wrote in a directory others may write, when it
    is still yours (the reading rule above, :func:`open_trusted`); None when nothing is
    there. ``NotYours`` naming it when it is a symlink, not a regular file, another
    user's, writable by others or larger than ``limit`` bytes."""
    path = Path(path)
    try:
        fd = _open_yours(path, what)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if os.fstat(fd).st_size > limit:
            raise _refused(path, what, f"is larger than {_bytes(limit)}")
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise _refused(path, what, f"is larger than {_bytes(limit)}")
    return data


def load_json_yours(path: Path, what: str = "JSON file", *, limit: int) -> Any:
    """:func:`read_yours` parsed as JSON (``parse_json``: bounded nesting, one line when
    it is not JSON); None when nothing is there."""
    data = read_yours(path, what, limit=limit)
    if data is None:
        return None
    return parse_json(decode(data, str(path), what), str(path))


def depth(data: Any) -> int:
    """How deeply lists and dicts nest in ``data`` (iteratively: any depth is safe)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Iterator[Any] = iter(item.values())
        elif isinstance(item, list):
            children = iter(item)
        else:
            continue
        deepest = max(deepest, level + 1)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((c, level + 1) for c in children)
    return deepest


def _too_deep(where: str) -> BadInput:
    return BadInput(
        f"{where}: nested deeper than {MAX_DEPTH} levels of lists/tables; "
        "this is not a file hpcenv or uv writes: fix or regenerate it"
    )


def _too_long_number(where: str) -> BadInput:
    return BadInput(
        f"{where}: holds a number with thousands of digits; this is not a file hpcenv or uv "
        "writes: fix or regenerate it"
    )


def parse_json(text: str, where: str, hint: str = "") -> Any:
    """JSON ``text``; BadInput naming ``where`` (line, column, ``hint``) when it is not."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{where}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            + (f"; {hint}" if hint else "")
        ) from exc
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise _too_long_number(where) from exc
    except RecursionError as exc:
        raise _too_deep(where) from exc
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where)
    return data


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """TOML ``text``; BadInput naming ``where`` when it is not TOML or nests too deeply."""
    if sys.version_info >= (3, 11):  # imported here: ``hpcenv facts`` reads no TOML
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: invalid TOML: {exc}") from exc
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise _too_long_number(where) from exc
    except RecursionError as exc:
        raise _too_deep(where) from exc
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where)
    return data


#: The largest YAML text parsed (a launcher's config is a few KiB).
MAX_YAML_BYTES = 4 * 1024 * 1024


def safe_yaml(text: str) -> Any:
    """``text`` read by PyYAML's safe loader with aliases refused (``yaml.YAMLError``): an
    alias (``*name``) is never a launcher's need, and ten lines of nested ones expand to
    billions of values (the "billion laughs"). The one YAML loader of hpcenv."""
    loader = _no_alias_loader()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@functools.cache
def _no_alias_loader() -> Any:
    import yaml  # type: ignore[import-untyped]  # here: only a job with a YAML config pays for it

    class NoAliases(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"an alias (*{event.anchor}): hpcenv reads YAML without aliases (nested "
                    "ones expand to billions of values); write the value out",
                    event.start_mark,
                )
            return super().compose_node(parent, index)

    return NoAliases


def parse_yaml(text: str, where: str, what: str = "YAML file") -> Any:
    """YAML ``text`` (``safe_yaml``: no aliases); BadInput naming ``where`` when it is not
    YAML, holds an alias, is larger than ``MAX_YAML_BYTES``, nests deeper than
    ``MAX_DEPTH`` or holds a huge number."""
    import yaml  # here: only a job with a YAML config pays for it

    if len(text) > MAX_YAML_BYTES:
        raise BadInput(
            f"{where}: {what} is larger than {MAX_YAML_BYTES // 2**20} MiB; this is not a "
            "launcher's config: give the right file"
        )
    try:
        data = safe_yaml(text)
    except yaml.composer.ComposerError as exc:
        if not str(exc.problem).startswith("an alias"):
            raise BadInput(f"{where}: not a readable {what} ({exc.problem}); fix the file") from exc
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise BadInput(f"{where} (line {line}): {what} holds {exc.problem}") from exc
    except yaml.YAMLError as exc:
        why = " ".join(str(exc).split())  # YAML's messages span lines
        raise BadInput(f"{where}: not a readable {what} ({why}); fix the file") from exc
    except RecursionError as exc:
        raise _too_deep(where) from exc
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise _too_long_number(where) from exc
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where)
    return data


def load_json(path: Path, what: str = "JSON file", hint: str = "") -> Any:
    return parse_json(read_text(path, what), str(path), hint)


def load_toml(path: Path, what: str = "TOML file") -> dict[str, Any]:
    return parse_toml(read_text(path, what), str(path))


#: Linux's FICLONE ioctl (``_IOW(0x94, 9, int)``): share a file's blocks copy-on-write.
_FICLONE = 0x40049409


def reflinks(directory: Path) -> bool:
    """Whether ``directory``'s filesystem clones files copy-on-write (btrfs, XFS with
    reflink, bcachefs): two scratch files, one ``ioctl``, removed again. False where the
    probe cannot even be written (then nothing will be installed there either)."""
    try:
        import fcntl
    except ImportError:  # not Linux
        return False
    import tempfile

    src = dst = -1
    names: list[str] = []
    try:
        for _ in range(2):
            fd, name = tempfile.mkstemp(prefix=".hpcenv-reflink-", dir=directory)
            names.append(name)
            if src < 0:
                src = fd
                os.write(src, b"x")
            else:
                dst = fd
        fcntl.ioctl(dst, _FICLONE, src)
    except OSError:
        return False
    finally:
        for fd in (src, dst):
            if fd >= 0:
                os.close(fd)
        for name in names:
            with contextlib.suppress(OSError):
                os.unlink(name)
    return True
