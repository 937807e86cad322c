"""``packaging``'s answers kept between runs of one audit: what a PEP 508 marker evaluates
to in a marker environment, what a requirement line names, whether a ``requires-python``
admits a version, whether a wheel's tags install on a node, whether a version is in a
specifier set. Each is a pure function of its arguments, of packaging's version and of
hpcenv's own rules around packaging's (a wheel's platforms, the patch releases a
``requires-python`` is asked about, how a torch spec is pinned: the source of
:data:`RULES` is in the key), so a second audit of the same lock on the same node by the
same hpcenv asks ``packaging`` nothing, and imports
neither its marker, requirement, specifier nor tag modules (with ``packaging.utils``'s
import of ``packaging.tags``: logging, platform, sysconfig; ~20 ms of a ~0.13 s audit).

:func:`kept` opens a scope (an audit of one lock: the lock's digest) whose answers are
read from ``data_cache`` (this user's own cache, trusted as every entry there) and stored
again when the run added one; :func:`remembered` answers from it, or computes and keeps
the answer. Outside a scope, or with no usable cache, every answer is computed as before.
Only answers are kept, never an error: a marker that cannot be evaluated raises every
time, and a marker's validity was checked when its answer was first computed. Keys and
values are plain data (str, bool, None, tuples of them) for ``marshal``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: Bumped when a kind's arguments or answer change shape.
FORMAT = b"1"

#: The modules (relative to the package) that ask :func:`remembered`: what they compute
#: around packaging's answer is hpcenv's rule, so their source is part of a scope's key and
#: an hpcenv whose rules changed (an upgrade, an edit) asks again
#: (``tests/unit/utils/test_answers.py`` checks that every caller is named here).
RULES = (
    "utils/answers.py",
    "project/uv_lock.py",
    "models/wheel_fit.py",
    "decide/torch_variant.py",
    "decide/cuda_packages.py",
)


class _Open:
    """The open scope's answers (None: no scope open) and whether this run added one."""

    known: dict[tuple[Hashable, ...], object] | None = None
    added = False


_open = _Open()


def remembered(kind: str, args: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
    """The answer of ``compute()`` (``packaging``'s, for ``kind`` with ``args``): the one
    kept in the open scope, else computed (and kept there)."""
    known = _open.known
    if known is None:
        return compute()
    key = (kind, *args)
    if key in known:
        return known[key]  # type: ignore[return-value]
    answer = known[key] = compute()
    _open.added = True
    return answer


def _package() -> Path:
    """hpcenv's package directory, where :data:`RULES` are read."""
    return Path(__file__).resolve().parent.parent


def in_specifier(spec: str, version: str, *, prereleases: bool | None = None) -> bool:
    """Whether ``version`` is in the specifier set ``spec`` (``>=0.10,<0.11``), as
    ``SpecifierSet.contains`` says with ``prereleases``; kept in the open scope. Raises
    packaging's ``InvalidVersion`` or ``InvalidSpecifier`` (never kept)."""

    def contains() -> bool:
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        return SpecifierSet(spec).contains(Version(version), prereleases)

    return remembered("in_specifier", (spec, version, prereleases), contains)


@contextlib.contextmanager
def kept(scope: str | None) -> Iterator[None]:
    """Answers of the scope ``scope`` (a digest; None: none kept) read before the block and
    stored after it when it added one (not when it raised: a run that fails may have asked
    only part of what the next asks)."""
    if scope is None or _open.known is not None:
        yield
        return
    import packaging

    from hpcenv.utils import data_cache

    version = packaging.__version__.encode()
    package = _package()
    rules = [(f"rules {rel}", (package / rel).read_bytes()) for rel in RULES]
    digest = data_cache.key(
        [("answers", FORMAT), ("scope", scope.encode()), ("packaging", version), *rules]
    )
    where = data_cache.entry("answers", digest)
    found = data_cache.read(where, digest)
    _open.known, _open.added = (found if isinstance(found, dict) else {}), False
    try:
        yield
        if _open.added:
            data_cache.write(where, digest, _open.known, keep=64)
    finally:
        _open.known, _open.added = None, False


__all__ = ["in_specifier", "kept", "remembered"]
