"""The one status type of probes, their checks, preflight checks and whole runs."""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Status(str, enum.Enum):
    """pass, fail, skip or error; a ``str`` so that it compares and serialises as one."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @classmethod
    def combine(cls, statuses: Iterable[Status | str]) -> Status:
        """The worst of several: error, then fail; any pass beats skip (the CUDA checks
        may skip on a CPU node while the CPU checks pass: that is a pass); nothing at
        all, or only skips, is a skip."""
        seen = {cls(s) for s in statuses}
        for worst in (cls.ERROR, cls.FAIL, cls.PASS):
            if worst in seen:
                return worst
        return cls.SKIP

    @property
    def failed(self) -> bool:
        """fail or error: what makes a command exit non-zero."""
        return self in (Status.FAIL, Status.ERROR)

    def __str__(self) -> str:
        return self.value
