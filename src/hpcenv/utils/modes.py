"""Who may write what hpcenv makes: the process's umask, set once at start (``cli``).

Nothing hpcenv makes, nor what it starts makes (uv, Python compiling bytecode, sbatch),
is writable by the group or others (:data:`NOT_SHARED`), whatever the user's umask: what
runs as you or is trusted can be changed by you alone. Only the containers of a shared
``HPCENV_HOME`` keep the user's umask (:func:`shared_mode`, ``fsio.ensure_dir``)
so that each member of a group adds their own entries. Kept apart from ``fsio`` so that
``cli`` sets it without importing the writers (a fast command's start).
"""

from __future__ import annotations

import os

#: Write bits hpcenv never gives to the group or others.
NOT_SHARED = 0o022
_user_umask: list[int] = []  # the umask hpcenv was started with, once private_umask ran


def private_umask() -> None:
    """Add :data:`NOT_SHARED` to this process's umask (children inherit it); the user's
    own umask is kept for :func:`shared_mode`."""
    old = os.umask(0o077)
    os.umask(old | NOT_SHARED)
    if not _user_umask:
        _user_umask.append(old)


def restore_umask() -> None:
    """The user's umask back, as before :func:`private_umask` (``cli.main`` returning to a
    caller in the same process: a test, an embedding program)."""
    if _user_umask:
        os.umask(_user_umask.pop())


def user_umask() -> int:
    """The umask the user started hpcenv with (the one their own command should get)."""
    if _user_umask:
        return _user_umask[0]
    current = os.umask(0o077)
    os.umask(current)
    return current


def shared_mode() -> int:
    """The mode of a container directory: the user's umask (group write under 002)."""
    if _user_umask:
        return 0o777 & ~_user_umask[0]
    current = os.umask(0o077)
    os.umask(current)
    return 0o777 & ~current


def yours_alone(st: os.stat_result, uid: int | None = None) -> bool:
    """Owned by this user (``uid``: ``os.geteuid()``, passed in by a caller asking of
    thousands of files) and writable by nobody else: what hpcenv trusts of a file or
    directory it reads back (a cache entry, the proof record) or runs."""
    return st.st_uid == (os.geteuid() if uid is None else uid) and not st.st_mode & NOT_SHARED
