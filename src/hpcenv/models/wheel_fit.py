"""Whether a wheel can be installed on a node: the one rule, on ``packaging.tags``.

A Linux node with CPython X.Y and glibc 2.N on CPU arch A accepts exactly the tags pip
and uv accept there: ``cpython_tags`` and ``compatible_tags`` of that interpreter over the
platforms the node's glibc admits (``manylinux_2_M_A`` for every M <= N, with the legacy
aliases ``manylinux2014`` = 2.17, ``manylinux2010`` = 2.12, ``manylinux1`` = 2.5), then
``linux_A``. musllinux wheels never fit a glibc node; a ``manylinux_2_28`` wheel does not
fit glibc 2.17. With the glibc unknown, every manylinux tag is admitted (said by callers
that know it). Used by the plan's torch checks (``decide/torch_fit.py``), its wheelhouse
lookup (``decide/plan.py``), the project reader (``project/uv_lock.py``) and every
locked package's wheels (``decide/cuda_packages.platform_verdict``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from hpcenv.utils import answers

if TYPE_CHECKING:  # imported where used: a lock audited again asks packaging nothing
    from packaging.tags import Tag

_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_LEGACY_ARCHES = {"manylinux2014": None, "manylinux2010": ("x86_64", "i686"),
                  "manylinux1": ("x86_64", "i686")}  # fmt: skip
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(.+)$")
_GLIBC = re.compile(r"^(\d+)\.(\d+)")
UNKNOWN_GLIBC = (2, 99)  # glibc unknown: admit every manylinux tag


def glibc_key(glibc: str | None) -> tuple[int, int] | None:
    """``"2.28"`` -> (2, 28); None or text that is not a glibc version -> None."""
    m = _GLIBC.match((glibc or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def python_key(python: str) -> tuple[tuple[int, int], bool] | None:
    """``"3.11.9"`` -> ((3, 11), False); ``"3.13t"`` -> ((3, 13), True); else None."""
    m = re.match(r"^(\d+)\.(\d+)(t?)", python.strip())
    return ((int(m.group(1)), int(m.group(2))), m.group(3) == "t") if m else None


def platforms(arch: str, glibc: str | None) -> tuple[str, ...]:
    """The platform tags a glibc Linux node on ``arch`` admits, most specific first."""
    major, minor = glibc_key(glibc) or UNKNOWN_GLIBC
    out: list[str] = []
    if major == 2:
        for m in range(minor, 4, -1):
            out.append(f"manylinux_2_{m}_{arch}")
            legacy = _LEGACY.get(m)
            allowed = _LEGACY_ARCHES.get(legacy or "")
            if legacy and (allowed is None or arch in allowed):
                out.append(f"{legacy}_{arch}")
    out.append(f"linux_{arch}")
    return tuple(out)


@cache
def node_tags(python: str, arch: str, glibc: str | None) -> frozenset[Tag]:
    """Every tag CPython ``python`` on a glibc ``glibc`` Linux ``arch`` node installs."""
    from packaging.tags import compatible_tags, cpython_tags

    key = python_key(python)
    if key is None:
        return frozenset()
    version, free = key
    abi = f"cp{version[0]}{version[1]}{'t' if free else ''}"
    plats = platforms(arch, glibc)
    tags = set(cpython_tags(version, [abi], plats))
    tags |= set(compatible_tags(version, f"cp{version[0]}{version[1]}", plats))
    return frozenset(tags)


#: a platform no wheel names, to read the (interpreter, abi) pairs packaging pairs with each
_ONE_PLATFORM = "hpcenv_one_platform"


@cache
def _node(
    python: str, arch: str, glibc: str | None
) -> tuple[frozenset[tuple[str, str]], frozenset[str], frozenset[Tag]]:
    """:func:`node_tags` factored: the (interpreter, abi) pairs the node installs on each of
    its platforms, those platforms, and the tags for any platform (``py3-none-any``).
    packaging's ``cpython_tags`` and ``compatible_tags`` give every pair for every platform,
    so a tag is in ``node_tags`` when its pair and platform are here or it is an ``any``
    tag; this is its membership test without building the ~1,800 tags."""
    from packaging.tags import compatible_tags, cpython_tags

    key = python_key(python)
    if key is None:
        return frozenset(), frozenset(), frozenset()
    version, free = key
    abi = f"cp{version[0]}{version[1]}{'t' if free else ''}"
    one = [*cpython_tags(version, [abi], [_ONE_PLATFORM])]
    one += compatible_tags(version, f"cp{version[0]}{version[1]}", [_ONE_PLATFORM])
    pairs = frozenset((t.interpreter, t.abi) for t in one if t.platform == _ONE_PLATFORM)
    anys = frozenset(t for t in one if t.platform == "any")
    return pairs, frozenset(platforms(arch, glibc)), anys


def _installs(tag: Tag, python: str, arch: str, glibc: str | None) -> bool:
    """``tag in node_tags(python, arch, glibc)``, read from :func:`_node`."""
    pairs, plats, anys = _node(python, arch, glibc)
    return tag in anys or (tag.platform in plats and (tag.interpreter, tag.abi) in pairs)


def tags_fit(tags: Iterable[str], *, python: str, arch: str, glibc: str | None) -> bool:
    """Whether any of ``tags`` (``cp311-cp311-manylinux_2_28_x86_64``, compressed tag sets
    allowed) installs on the node."""
    from packaging.tags import parse_tag

    return any(_installs(t, python, arch, glibc) for text in tags for t in parse_tag(text))


def wheel_fits(filename: str, *, python: str, arch: str, glibc: str | None = None) -> bool:
    """Whether the wheel file ``filename`` installs on the node (see the module docstring);
    the answer is kept for a lock's next audit (``utils/answers``)."""
    return answers.remembered(
        "wheel_fits",
        (filename, python, arch, glibc),
        lambda: _wheel_fits(filename, python=python, arch=arch, glibc=glibc),
    )


def _wheel_fits(filename: str, *, python: str, arch: str, glibc: str | None) -> bool:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _name, _version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return any(_installs(t, python, arch, glibc) for t in tags)


def min_glibc(tags: Iterable[str]) -> tuple[int, int] | None:
    """The lowest glibc any of ``tags``' Linux platforms needs, or None (none is manylinux)."""
    from packaging.tags import parse_tag

    needs: list[tuple[int, int]] = []
    for text in tags:
        for t in parse_tag(text):
            m = _MANYLINUX.match(t.platform)
            if m:
                needs.append((int(m.group(1)), int(m.group(2))))
                continue
            for minor, legacy in _LEGACY.items():
                if t.platform.startswith(f"{legacy}_"):
                    needs.append((2, minor))
    return min(needs) if needs else None


__all__ = ["glibc_key", "min_glibc", "node_tags", "platforms", "tags_fit", "wheel_fits"]
