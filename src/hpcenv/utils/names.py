"""A package, extra or group name normalised, without importing ``packaging.utils``.

``packaging.utils.canonicalize_name`` is the rule (PEP 503); its module imports
``packaging.tags`` (and with it logging, platform, sysconfig), which the audit of a lock
read before never needs. ``tests/unit/project/test_uv_lock_read.py`` checks this function
against packaging's on every name of the real locks in tests/data.
"""

from __future__ import annotations


def canonicalize_name(name: str) -> str:
    """``name`` with runs of ``-``, ``_`` and ``.`` made one ``-``, in lower case."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value
