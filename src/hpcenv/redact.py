"""Keep secrets out of logs and reports.

Any environment variable whose name contains TOKEN, SECRET, PASSWORD, PASSWD, KEY or
CREDENTIAL (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, ...) has its value
replaced by ``REDACTED`` wherever hpcenv prints or writes an environment, and its
value is scrubbed from free text (command output captured into build logs).
Credentials written into a URL (``https://user:token@mirror/simple``, the way
private package indexes are often given) are masked in free text too:
``https://REDACTED@mirror/simple``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
MASK = "REDACTED"
#: Names matching SECRET_NAME that are known not to hold secrets.
NOT_SECRET = frozenset({"KEYTIMEOUT", "SSH_AUTH_SOCK"})
#: ``scheme://userinfo@``: the userinfo runs to the last '@' before the host's end
#: (a '/', '?', '#' or whitespace), so an unencoded '@' in a password is masked whole
#: rather than leaving its tail behind (quotes are allowed: shlex.quote turns a "'"
#: in a password into '"'"').
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")


def is_secret(name: str) -> bool:
    return name not in NOT_SECRET and bool(SECRET_NAME.search(name))


def holds_secret(name: str, value: str) -> bool:
    """A secret-named variable, or any variable whose value carries URL credentials
    (``PIP_INDEX_URL=https://user:token@mirror/simple``)."""
    return bool(value) and (is_secret(name) or URL_USERINFO.search(value) is not None)


def env(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` with secret values masked (and URL credentials in the rest)."""
    return {k: (MASK if is_secret(k) and v else userinfo(v)) for k, v in mapping.items()}


def userinfo(value: str) -> str:
    """``value`` with the credentials of every URL in it masked."""
    return URL_USERINFO.sub(rf"\g<scheme>{MASK}@", value)


def text(value: str, environ: Mapping[str, str] | None = None) -> str:
    """``value`` with every secret value from ``environ`` (4+ characters) and every
    URL's credentials masked."""
    for name, secret in (environ or {}).items():
        if is_secret(name) and len(secret) >= 4:
            value = value.replace(secret, MASK)
    return userinfo(value)


def deep(data: Any) -> Any:
    """JSON-like ``data`` (dicts, lists, strings) with URL credentials masked in every
    string, for reports that carry index URLs and command lines."""
    if isinstance(data, str):
        return userinfo(data)
    if isinstance(data, dict):
        return {k: deep(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [deep(v) for v in data]
    return data
