"""Keep secrets out of everything that leaves hpcenv.

Masking happens once, at the exits, never at the places data is made: the rich
consoles (``report``), JSON on stdout (``commands.print_json``), the error line of
``cli.main`` and every file hpcenv writes (``fsio``) call ``text`` or ``deep`` here.
A new output path that uses those exits is safe by construction.

What is a secret:

- by name: the value of a variable whose name has a word like TOKEN, SECRET,
  PASSWORD, KEY, AUTH or CREDENTIAL (``HF_TOKEN``, ``WANDB_API_KEY``,
  ``AWS_SECRET_ACCESS_KEY``). Words, not substrings: ``NCCL_IB_PKEY`` (an InfiniBand
  partition key, which jobs need) and ``KEYTIMEOUT`` are not secrets, nor is
  ``SSH_AUTH_SOCK`` (a socket path);
- by value: the values of such variables in this process's environment and in every
  profile loaded (``remember``), masked wherever they appear in free text;
- URL credentials: ``scheme://user:password@host`` anywhere in a string becomes
  ``scheme://REDACTED@host``, and the credentials of URLs seen in profiles and in the
  environment are masked on their own too (a uv error may quote the password alone).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "REDACTED"
#: A secret value shorter than this is masked by name only (masking "1" or "yes"
#: everywhere in free text would garble every report).
MIN_VALUE_LEN = 6
#: Name words that make a variable secret (also as the end of a word: APIKEY, GHTOKEN).
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS")
#: Name words that make a variable secret only as a whole word.
SECRET_WHOLE_WORDS = frozenset({"KEY", "KEYS", "AUTH", "PASS", "PW", "TOKENS", "SECRETS"})
#: Last words that mark a name as a locator, not a secret (``SSH_AUTH_SOCK``).
NOT_SECRET_LAST = frozenset({"SOCK", "SOCKET"})
#: ``scheme://userinfo@``: the userinfo runs to the last '@' before the host's end
#: (a '/', '?', '#' or whitespace), so an unencoded '@' in a password is masked whole
#: rather than leaving its tail behind (quotes are allowed: shlex.quote turns a "'"
#: in a password into '"'"').
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^\s/?#]*)@")

#: ``NAME=value`` in free text (the value: quoted, or up to whitespace/quote/comma).
ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)=(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\",;]+)"
)
#: Keys of a JSON document that name environment variables (``deep``).
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")

_remembered: set[str] = set()


def is_secret(name: str) -> bool:
    """A variable name that holds a secret (by its words, see the module docstring)."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    if not words or words[-1] in NOT_SECRET_LAST:
        return False
    return any(w in SECRET_WHOLE_WORDS or w.endswith(SECRET_WORDS) for w in words)


def holds_secret(name: str, value: str) -> bool:
    """A secret-named variable, or any variable whose value carries URL credentials
    (``PIP_INDEX_URL=https://user:token@mirror/simple``)."""
    return bool(value) and (is_secret(name) or URL_USERINFO.search(value) is not None)


def _url_secrets(value: str) -> list[str]:
    """The userinfo of every URL in ``value``, whole and its password alone."""
    out = []
    for m in URL_USERINFO.finditer(value):
        info = m.group("info")
        out += [info, info.partition(":")[2]]
    return out


def remember(env: Mapping[str, str] = {}, values: Iterable[str] = ()) -> None:
    """Mask these from now on: the secret values of ``env`` (by name, and URL
    credentials in any value) and every URL's credentials in ``values``."""
    for name, value in env.items():
        if is_secret(name):
            _remembered.add(value)
        _remembered.update(_url_secrets(value))
    for value in values:
        _remembered.update(_url_secrets(value))


def secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every value masked in free text now, longest first (so a secret that contains
    another is masked whole)."""
    found = set(_remembered)
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret(name):
            found.add(value)
        if "@" in value:
            found.update(_url_secrets(value))
    return sorted((s for s in found if len(s) >= MIN_VALUE_LEN), key=len, reverse=True)


def _secret_var(key: object) -> bool:
    return isinstance(key, str) and ENV_NAME.fullmatch(key) is not None and is_secret(key)


def userinfo(value: str) -> str:
    """``value`` with the credentials of every URL in it masked."""
    return URL_USERINFO.sub(rf"\g<scheme>{MASK}@", value)


def _assignments(value: str) -> str:
    """``NAME=value`` with a secret NAME (``HF_TOKEN=hf_x`` in a command line or a plan
    step) -> ``NAME=REDACTED``, however short the value; a shell reference
    (``HF_TOKEN="${HF_TOKEN:?...}"`` in a rendered script) holds no value and stays."""
    if "=" not in value:
        return value

    def mask(m: re.Match[str]) -> str:
        reference = m["value"].lstrip("'\"").startswith("$")  # "${HF_TOKEN:?...}": no value
        return f"{m['name']}={MASK}" if is_secret(m["name"]) and not reference else m.group(0)

    return ASSIGNMENT.sub(mask, value)


def text(value: str, environ: Mapping[str, str] | None = None) -> str:
    """``value`` with every known secret value, every secret ``NAME=value`` and every
    URL's credentials masked."""
    for secret in secrets(environ):
        if secret in value:
            value = value.replace(secret, MASK)
    return userinfo(_assignments(value))


def env(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` with secret-named values masked whole (and the rest as text)."""
    return {k: (MASK if is_secret(k) and v else text(v)) for k, v in mapping.items()}


def deep(data: Any) -> Any:
    """JSON-like ``data`` with every string masked (``text``), and the values of
    secret-named variables (upper-case keys like ``HF_TOKEN``: an environment table)
    masked whole, for reports and JSON output."""
    known = secrets()

    def one(value: str) -> str:
        for secret in known:
            if secret in value:
                value = value.replace(secret, MASK)
        return userinfo(_assignments(value))

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return one(item)
        if isinstance(item, Mapping):
            return {
                one(str(k)): MASK if _secret_var(k) and isinstance(v, str) and v else walk(v)
                for k, v in item.items()
            }
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(data)
