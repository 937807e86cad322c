"""The script of a job that runs hpcenv itself on a cluster: a probe (or all of them) or a
build (``hpcenv sbatch PROFILE TARGET``).

What is SLURM's (the ``#SBATCH`` directives, the GPU request, submission, waiting) is
``hpcenv.slurm.sbatch``'s; this module writes what runs in the job: the environment
``hpcenv env`` prints (modules, the profile's variables, secrets read from the
submitting environment, never written), scratch, and the hpcenv command whose report
is kept next to the logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcenv.job import environment
from hpcenv.profile.schema import Profile
from hpcenv.slurm import sbatch
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import shell_join, shell_quote


def render(
    profile: Profile,
    target: str,
    *,
    nodes: int = 1,
    ntasks_per_node: int | None = None,
    output_dir: Path | None = None,
    venv: str | None = None,
    workdir: Path | None = None,
    run: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    pairs: bool = False,
    time_limit: str | None = None,
    request: sbatch.Request | None = None,
) -> sbatch.Job:
    """The sbatch script for ``target`` on ``profile``'s cluster (``request``: GPUs per
    node and the sbatch options given on the command line).

    ``run`` replaces the hpcenv command (tests use a trivial one); its output
    still goes to ``report.json`` in the job's output directory. ``pairs``: the job
    runs the bad-node finder (``hpcenv probe nccl --pairs``). ``time_limit`` (``--time``)
    replaces the profile's walltime; a build job gets ``[slurm] build_time``.
    """
    if target not in sbatch.TARGETS:
        raise BadInput(f"unknown sbatch target {target!r}; use one of: {', '.join(sbatch.TARGETS)}")
    if nodes < 1:
        raise BadInput(f"--nodes {nodes}: must be at least 1")
    if pairs and (target != "nccl" or nodes < 2):
        raise BadInput(
            f"--pairs runs nccl between pairs of nodes: use it with target nccl and --nodes 2 "
            f"or more (got {target!r}, --nodes {nodes})"
        )
    cwd = (workdir or Path.cwd()).absolute()
    log_dir = sbatch.logs_dir(profile, cwd)
    out_dir = (output_dir or log_dir).absolute()
    name = f"hpcenv-{profile.name}-{target}"
    lines = [
        "#!/bin/bash",
        f"# Rendered by 'hpcenv sbatch {shell_quote(profile.name)} {shell_quote(target)}'.",
        *sbatch.directives(
            profile,
            name=name,
            nodes=nodes,
            ntasks_per_node=sbatch.tasks_per_node(
                profile, ntasks_per_node, target, request.gpus if request else None
            ),
            time=time_limit or (profile.slurm.build_time if target == "build" else None),
            log_dir=log_dir,
            cwd=cwd,
            request=request,
        ),
        "",
        "set -euo pipefail",
    ]
    env = environment.for_profile(
        profile, nodes=nodes, venv=None, tmpdir=False, extra_env=extra_env
    )
    lines += environment.batch_lines(env)
    if profile.job.scratch:
        lines += [
            f'export TMPDIR={shell_quote(profile.job.scratch)}/"$SLURM_JOB_ID"',
            'mkdir -p "$TMPDIR"',
        ]
    argv = list(run) if run is not None else sbatch.hpcenv_argv(profile, target, venv, pairs=pairs)
    keep = ""
    if run is None and target != "build":  # rank files and JUnit kept with the report
        keep = ' --results-dir "$out/ranks" --junit "$out/junit.xml"'
    lines += [
        f'out={shell_quote(str(out_dir))}/"$SLURM_JOB_ID"',
        *sbatch.OWN_OUT_DIR,
        "status=0",
        f'{shell_join(argv)}{keep} > "$out/report.json" || status=$?',
        'cat "$out/report.json"',
        'exit "$status"',
        "",
    ]
    return sbatch.Job(
        name=name, script="\n".join(lines), log_dir=log_dir, output_dir=out_dir, nodes=nodes
    )


__all__ = ["render"]
