"""Running a named suite of probes in a target environment: the checks on the
request (names, ranks, timeout), the results directory, then ``probes.run_suite``.

The launcher and the progress callbacks come from the caller (``hpcenv probe`` and
``hpcenv doctor`` pass ``slurm.srun.launcher_here()`` and the console's lines), so this
layer neither touches SLURM nor prints.
"""

from __future__ import annotations

import datetime
import errno
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from hpcenv.models.results import ProbeResult
from hpcenv.runner import probes
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BadInput


def check_ranks(ranks: int | None, launcher: probes.Launcher) -> None:
    """``--ranks`` against this node's cap (local ranks; srun places its own)."""
    if ranks is None:
        return
    if isinstance(launcher, probes.LocalLauncher):
        probes.check_ranks(ranks, probes.local_default_ranks())
    elif ranks < 1:
        raise BadInput(f"--ranks {ranks}: must be 1 or more")


def result_dir(target: probes.Target, results_dir: str | None, timeout: float | None) -> Path:
    """Where the ranks write (made here); checks --timeout first."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise BadInput(f"--timeout {timeout:g}: must be a finite number greater than 0")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # the name is only a label: never a path (a python given by path names its venv)
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", target.name).lstrip(".") or "env"
    if results_dir:
        return fsio.ensure_dir(Path(results_dir).absolute())
    try:
        return fsio.ensure_dir(paths.home().absolute() / "results" / f"{label}-{stamp}")
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
    # a read-only HPCENV_HOME (a shared, read-only software tree): probing needs no write
    # there; the ranks write into a private directory, named in the report
    return Path(tempfile.mkdtemp(prefix=f"hpcenv-results-{label}-{stamp}-"))


def execute(
    target: probes.Target,
    names: tuple[str, ...],
    *,
    launcher: probes.Launcher,
    ranks: int | None = None,
    timeout: float | None = None,
    results_dir: str | None = None,
    extra: dict[str, list[str]] | None = None,
    on_start: Callable[[probes.ProbeSpec], None] | None = None,
    on_done: Callable[[ProbeResult], None] | None = None,
) -> tuple[list[ProbeResult], Path]:
    """Run ``names`` in ``target`` with ``launcher``; the results and where the ranks wrote."""
    probes.check_names(names)
    if ranks is None:
        ranks = launcher.default_ranks()
    check_ranks(ranks, launcher)
    where = result_dir(target, results_dir, timeout)
    results = probes.run_suite(
        target,
        names,
        launcher=launcher,
        ranks=ranks,
        result_dir=where,
        timeout_s=timeout,
        extra_args=extra or {},
        on_start=on_start,
        on_done=on_done,
    )
    return results, where
