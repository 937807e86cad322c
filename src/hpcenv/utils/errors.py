"""One error hierarchy, each class with its own exit code, caught once in ``cli.main``.

Every message is one line a researcher can act on: what is wrong (file, key, value)
and what would fix it.
"""

from __future__ import annotations


class HpcenvError(Exception):
    """Base of every error hpcenv reports to a user (never with a traceback)."""

    exit_code = 1


class BadInput(HpcenvError):
    """A file, key, value or argument is wrong; the message names it and the fix."""

    exit_code = 2


class NoCompatibleBuild(HpcenvError):
    """No torch build (variant) can run on this node."""

    exit_code = 3


class BuildFailed(HpcenvError):
    """Building an environment failed; the previous environment is untouched."""

    exit_code = 4


class ProbeFailed(HpcenvError):
    """At least one probe failed."""

    exit_code = 5


class Busy(HpcenvError):
    """Another hpcenv process holds the lock on this environment."""

    exit_code = 6


class Stale(HpcenvError):
    """hpcenv's compatibility data lacks a release PyPI has (``hpcenv knowledge check``)."""

    exit_code = 7


class PreflightFailed(HpcenvError):
    """A preflight check failed: this node is not fit for the job (GPUs, scratch, logs...)."""

    exit_code = 8


class JobFailed(HpcenvError):
    """A SLURM job ended without completing, and not because its build or probes failed:
    it timed out, was cancelled or preempted, ran out of memory, or its node failed."""

    exit_code = 9


class DiskFull(HpcenvError):
    """A disk hpcenv had to write is full or over quota (not the input's fault, and not
    the environment's): the message names the path, its free space and the fix."""

    exit_code = 12


class JobHung(HpcenvError):
    """``hpcenv sbatch --hang-timeout``: the watchdog found the command silent, dumped its
    stacks into the job log and ended the link (the chain's next link goes on)."""

    exit_code = 10


class BadNodes(HpcenvError):
    """``hpcenv sbatch --gate pairs --requeue-bad N``: the bad-node finder named nodes; the
    link was resubmitted without them, or ended naming them when N requeues were used."""

    exit_code = 11


class CommandFailed(HpcenvError):
    """A subprocess exited non-zero (raised by ``command.run``)."""

    exit_code = 1

    def __init__(self, message: str, *, returncode: int, output: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.output = output


class CannotRun(HpcenvError):
    """The user's command cannot be started (``hpcenv run``): 127 when it is not found,
    126 when it is not executable, the codes shells use."""

    def __init__(self, message: str, *, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(HpcenvError):
    """The user pressed Ctrl-C; children were shut down."""

    exit_code = 130
