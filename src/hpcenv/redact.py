"""Keep secrets out of logs and reports.

Any environment variable whose name contains TOKEN, SECRET, PASSWORD, PASSWD, KEY or
CREDENTIAL (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, ...) has its value
replaced by ``REDACTED`` wherever hpcenv prints or writes an environment, and its
value is scrubbed from free text (command output captured into build logs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
MASK = "REDACTED"
#: Names matching SECRET_NAME that are known not to hold secrets.
NOT_SECRET = frozenset({"KEYTIMEOUT", "SSH_AUTH_SOCK"})


def is_secret(name: str) -> bool:
    return name not in NOT_SECRET and bool(SECRET_NAME.search(name))


def env(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``mapping`` with secret values masked."""
    return {k: (MASK if is_secret(k) and v else v) for k, v in mapping.items()}


def text(value: str, environ: Mapping[str, str]) -> str:
    """``value`` with every secret value from ``environ`` (4+ characters) masked."""
    for name, secret in environ.items():
        if is_secret(name) and len(secret) >= 4:
            value = value.replace(secret, MASK)
    return value
