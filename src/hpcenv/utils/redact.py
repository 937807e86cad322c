"""Keep secrets out of everything that leaves hpcenv.

Masking happens once, at the exits, never at the places data is made: the rich
consoles (``report``), JSON on stdout (``commands.print_json``), the error line of
``cli.main`` and every file hpcenv writes (``fsio``) call ``text`` or ``deep`` here.
A new output path that uses those exits is safe by construction.

What a secret is, and the masking of text, is ``hpcenv.kit.masking`` (the one rule,
shared with the probes, which mask the rank files they write). This module adds what
hpcenv knows beyond its environment: the secrets of every profile loaded
(``remember``), masked by value from then on, and ``deep`` for JSON documents.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hpcenv.kit.masking import (
    MASK,
    MIN_VALUE_LEN,
    URL_USERINFO,
    env_secrets,
    is_secret,
    mask,
    ordered,
    url_secrets,
)

#: Keys of a JSON document that name environment variables (``deep``).
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")

_remembered: set[str] = set()


def holds_secret(name: str, value: str) -> bool:
    """A secret-named variable, or any variable whose value carries URL credentials
    (``PIP_INDEX_URL=https://user:token@mirror/simple``)."""
    return bool(value) and (is_secret(name) or URL_USERINFO.search(value) is not None)


def remember(env: Mapping[str, str] = {}, values: Iterable[str] = ()) -> None:
    """Mask these from now on: the secret values of ``env`` (by name, and URL
    credentials in any value) and every URL's credentials in ``values``."""
    _remembered.update(env_secrets(env))
    for value in values:
        _remembered.update(url_secrets(value))


def secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every value masked in free text now (remembered and in the environment)."""
    return ordered(_remembered | env_secrets(os.environ if environ is None else environ))


def userinfo(value: str) -> str:
    """``value`` with the credentials of every URL in it masked."""
    return URL_USERINFO.sub(rf"\g<scheme>{MASK}@", value)


def text(value: str, environ: Mapping[str, str] | None = None) -> str:
    """``value`` with every known secret value, every secret ``NAME=value`` and every
    URL's credentials masked."""
    return mask(value, secrets(environ))


def env(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` with secret-named values masked whole (and the rest as text)."""
    known = secrets()
    return {k: (MASK if is_secret(k) and v else mask(v, known)) for k, v in mapping.items()}


def _secret_var(key: object) -> bool:
    return isinstance(key, str) and ENV_NAME.fullmatch(key) is not None and is_secret(key)


def deep(data: Any) -> Any:
    """JSON-like ``data`` with every string masked (``text``), and the values of
    secret-named variables (upper-case keys like ``HF_TOKEN``: an environment table)
    masked whole, for reports and JSON output."""
    known = secrets()

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return mask(item, known)
        if isinstance(item, Mapping):
            return {
                mask(str(k), known): MASK
                if _secret_var(k) and isinstance(v, str) and v
                else walk(v)
                for k, v in item.items()
            }
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(data)


__all__ = [
    "MASK",
    "MIN_VALUE_LEN",
    "URL_USERINFO",
    "deep",
    "env",
    "holds_secret",
    "is_secret",
    "remember",
    "secrets",
    "text",
    "userinfo",
]
