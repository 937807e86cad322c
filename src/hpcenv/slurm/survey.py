"""What SLURM says about a cluster, read from a login node for ``hpcenv profile init`` and
``profile check``: the partitions (default, MaxTime, node counts, state), the GRES of
their nodes, the GPU request syntax sbatch accepts there (``sbatch --test-only``, which
submits nothing), and a compute node's facts (``srun -N1 -p P hpcenv facts --json
--scratch`` under a timeout). Lmod's modules come from ``hpcenv.facts.lmod``.

Every command is an argument list (``tools.command``); a SLURM that is absent or does
not answer becomes a problem in the survey, never an exception.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence

from hpcenv.facts import lmod
from hpcenv.models.facts import Facts, from_json
from hpcenv.models.survey_model import Gres, Partition, SlurmSurvey, Survey, count_of
from hpcenv.tools import command
from hpcenv.utils.errors import BadInput, CommandFailed

TIMEOUT_S = 20.0
#: The most a compute node's ``hpcenv facts`` may take, queueing included.
SRUN_TIMEOUT_S = 120.0
#: hpcenv's GPU request syntaxes, the order init prefers them ([slurm] gpu_request).
REQUESTS = ("gpus-per-node", "gres", "gpus")


def _slurm(args: Sequence[str], env: Mapping[str, str], problems: list[str]) -> str | None:
    if shutil.which(args[0], path=env.get("PATH")) is None:
        problems.append(f"no {args[0]} on PATH: SLURM could not be read here")
        return None
    try:
        return command.run(list(args), env=dict(env), timeout=TIMEOUT_S).stdout
    except CommandFailed as exc:
        problems.append(f"{' '.join(args[:3])} failed: {str(exc).splitlines()[0]}")
        return None


def split_gres(text: str) -> tuple[Gres, ...]:
    """``gpu:h100:4(S:0-1),nvme:1`` -> its GRES (commas inside parentheses kept)."""
    parts = re.split(r",(?![^(]*\))", text.strip())
    return tuple(g for p in parts if (g := Gres.parse(p)) is not None)


def parse_partitions(scontrol: str, sinfo_nodes: str) -> tuple[Partition, ...]:
    """Partitions from ``scontrol show partition --oneliner`` and the GRES of their nodes
    from ``sinfo -h -N -o '%N|%P|%G'``."""
    gres: dict[str, list[Gres]] = {}
    for line in sinfo_nodes.splitlines():
        fields = line.split("|")
        if len(fields) != 3:
            continue
        part = fields[1].strip().rstrip("*")
        for g in split_gres(fields[2]):
            if g not in gres.setdefault(part, []):
                gres[part].append(g)
    out = []
    for line in scontrol.splitlines():
        kv = {m[1]: m[2] for m in re.finditer(r"(\w+)=(\S*)", line)}
        if "PartitionName" not in kv:
            continue
        name = kv["PartitionName"]
        nodes = kv.get("TotalNodes", "0")
        out.append(
            Partition(
                name=name,
                default=kv.get("Default") == "YES",
                max_time=kv.get("MaxTime", "UNLIMITED"),
                nodes=count_of(nodes) or 0,
                state=kv.get("State", "UP"),
                gres=tuple(gres.get(name, ())),
            )
        )
    return tuple(out)


def accepted_requests(
    partition: Partition, env: Mapping[str, str], problems: list[str]
) -> tuple[str, ...]:
    """The GPU request syntaxes ``sbatch --test-only`` accepts for one GPU on ``partition``
    (nothing is queued); empty when its nodes have no GPU GRES."""
    gpus = partition.gpus
    if not gpus:
        return ()
    typed = next((g.type for g in gpus if g.type), "")
    options = {
        "gpus-per-node": "--gpus-per-node=1",
        "gres": f"--gres=gpu:{typed}:1" if typed else "--gres=gpu:1",
        "gpus": "--gpus=1",
    }
    ok = []
    for how in REQUESTS:
        argv = [
            "sbatch",
            "--test-only",
            "-p",
            partition.name,
            "-N1",
            options[how],
            "--wrap",
            "true",
        ]
        try:
            command.run(argv, env=dict(env), timeout=TIMEOUT_S)
        except CommandFailed:
            continue
        ok.append(how)
    if not ok:
        problems.append(f"sbatch --test-only accepted no GPU request on partition {partition.name}")
    return tuple(ok)


def read_slurm(
    env: Mapping[str, str] | None,
    problems: list[str],
    partition: str | None = None,
    *,
    requests: bool = True,
) -> SlurmSurvey | None:
    """Partitions and GRES; with ``requests`` also the GPU syntaxes sbatch accepts on
    ``partition`` (else the default one). None when SLURM cannot be read."""
    env = os.environ if env is None else env
    scontrol = _slurm(["scontrol", "show", "partition", "--oneliner"], env, problems)
    if scontrol is None:
        return None
    nodes = _slurm(["sinfo", "-h", "-N", "-o", "%N|%P|%G"], env, problems) or ""
    parts = parse_partitions(scontrol, nodes)
    survey = SlurmSurvey(partitions=parts)
    target = survey.partition(partition) if partition else survey.default
    if partition and target is None:
        names = ", ".join(p.name for p in parts) or "none"
        raise BadInput(f"--partition {partition}: SLURM has no such partition; it has {names}")
    if target is None or not requests:
        return survey
    return SlurmSurvey(
        partitions=parts,
        gpu_requests=accepted_requests(target, env, problems),
        surveyed=target.name,
    )


def survey(env: Mapping[str, str] | None = None, *, partition: str | None = None) -> Survey:
    """The login node's view: SLURM and Lmod (each None when absent, with the reason)."""
    env = os.environ if env is None else env
    problems: list[str] = []
    slurm = read_slurm(env, problems, partition)
    modules = lmod.available(env, problems)
    return Survey(slurm=slurm, modules=modules, problems=tuple(problems))


def compute_facts(
    partition: str, env: Mapping[str, str] | None = None, *, timeout: float = SRUN_TIMEOUT_S
) -> tuple[Facts | None, str]:
    """A compute node's facts (``srun -N1 -p P hpcenv facts --json --scratch``), or None
    and why not."""
    env = os.environ if env is None else env
    if shutil.which("srun", path=env.get("PATH")) is None:
        return None, "no srun on PATH"
    argv = ["srun", "-N1", "-n1", "-p", partition, "--time=5", "--quiet",
            sys.executable, "-m", "hpcenv", "facts", "--json", "--scratch"]  # fmt: skip
    try:
        done = command.run(argv, env=dict(env), timeout=timeout)
    except CommandFailed as exc:
        return None, f"srun on partition {partition} failed: {str(exc).splitlines()[0]}"
    try:
        return from_json(json.loads(done.stdout), f"srun -p {partition} hpcenv facts"), ""
    except (ValueError, BadInput) as exc:
        return None, f"the compute node's 'hpcenv facts --json' was not facts ({exc})"


__all__ = ["accepted_requests", "compute_facts", "parse_partitions", "split_gres", "survey"]
