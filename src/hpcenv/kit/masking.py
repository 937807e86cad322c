"""What a secret is, and masking it in text: the one rule, for hpcenv and for probes.

hpcenv's exits mask through ``hpcenv.utils.redact`` (which adds the secrets of loaded
profiles); a probe writing its rank files inside a job masks with this module and the
job's environment. Standard library only (see ``hpcenv.kit``).

- by name: a variable whose name has a word like TOKEN, SECRET, PASSWORD, KEY, AUTH or
  CREDENTIAL (``HF_TOKEN``, ``WANDB_API_KEY``). Words, not substrings: ``NCCL_IB_PKEY``
  (an InfiniBand partition key, which jobs need), ``KEYTIMEOUT`` and ``SSH_AUTH_SOCK``
  (a socket path) are not secrets;
- by value: the values of such variables, wherever they appear (``MIN_VALUE_LEN``
  characters or more: masking "1" everywhere would garble every report);
- ``NAME=value`` with a secret NAME, however short the value;
- URL credentials: ``scheme://user:password@host`` -> ``scheme://REDACTED@host``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "REDACTED"
MIN_VALUE_LEN = 6
#: Name words that make a variable secret (also as the end of a word: APIKEY, GHTOKEN).
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS")
#: Name words that make a variable secret only as a whole word.
SECRET_WHOLE_WORDS = frozenset({"KEY", "KEYS", "AUTH", "PASS", "PW", "TOKENS", "SECRETS"})
#: Last words that mark a name as a locator, not a secret (``SSH_AUTH_SOCK``).
NOT_SECRET_LAST = frozenset({"SOCK", "SOCKET"})
#: ``scheme://userinfo@``: the userinfo runs to the last '@' before the host's end
#: (a '/', '?', '#' or whitespace), so an unencoded '@' in a password is masked whole.
#: (Userinfo holding a ``${VAR}`` reference names no secret: uv and pip expand it when
#: they read a requirements file, and a lock writes credentials that way.)
URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>(?![^\s/?#@]*\$\{)[^\s/?#]*)@"
)
#: ``NAME=value`` in free text (the value: quoted, or up to whitespace/quote/comma); a
#: requirement pin ``tiktoken==0.12.0`` is no assignment.
ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)=(?!=)(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\",;]+)"
)


def is_secret(name: str) -> bool:
    """A variable name that holds a secret (by its words, see the module docstring)."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    if not words or words[-1] in NOT_SECRET_LAST:
        return False
    return any(w in SECRET_WHOLE_WORDS or w.endswith(SECRET_WORDS) for w in words)


def url_secrets(value: str) -> list[str]:
    """The userinfo of every URL in ``value``, whole and its password alone."""
    out = []
    for m in URL_USERINFO.finditer(value):
        info = m.group("info")
        out += [info, info.partition(":")[2]]
    return out


def env_secrets(environ: Mapping[str, str]) -> set[str]:
    """The secret values an environment holds (by name, and URL credentials)."""
    found = set()
    for name, value in environ.items():
        if is_secret(name):
            found.add(value)
        if "@" in value:
            found.update(url_secrets(value))
    return found


def ordered(values: Iterable[str]) -> list[str]:
    """The values worth masking by value, longest first (a secret that contains another
    is masked whole)."""
    return sorted({v for v in values if len(v) >= MIN_VALUE_LEN}, key=len, reverse=True)


def _assignment(m: re.Match[str]) -> str:
    value = m["value"]
    reference = value.lstrip("'\"").startswith("$")  # "${HF_TOKEN:?...}": no value
    if is_secret(m["name"]) and not reference:
        return f"{m['name']}={MASK}"
    if len(value) > 1 and value[0] in "'\"" and "=" in value:  # X='... token=hf_x ...'
        inner = ASSIGNMENT.sub(_assignment, value[1:-1])
        return f"{m['name']}={value[0]}{inner}{value[-1]}"
    return m.group(0)


def mask(value: str, secrets: Iterable[str]) -> str:
    """``value`` with every one of ``secrets`` (from ``ordered``), every secret
    ``NAME=value`` and every URL's credentials masked."""
    for secret in secrets:
        if secret in value:
            value = value.replace(secret, MASK)
    if "=" in value:
        value = ASSIGNMENT.sub(_assignment, value)
    return URL_USERINFO.sub(rf"\g<scheme>{MASK}@", value)
