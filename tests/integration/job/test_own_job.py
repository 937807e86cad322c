"""``hpcenv sbatch PROFILE [options] -- CMD``: the researcher's own job, rendered.

What the rendering must hold for every profile and option (``bash -n`` accepts it, the
command's words come back exactly), the issue's Isambard script (and the copy of it in
docs/own-job.md), and every bad option as one line with exit 2. The jobs themselves
run on the real multi-node test SLURM in ``test_own_job_slurm.py``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import main
from hpcenv.job import render as own
from hpcenv.profile import schema as profile
from hpcenv.utils.output import shell_join
from support import REPO, require

PROFILES = sorted(p.stem for p in (REPO / "envs").glob("*.toml"))
ISAMBARD_ARGS = ["isambard", "--nodes", "2", "--chain", "3", "--", "python", "train.py",
                 "--name", "my run"]  # fmt: skip
DOC = REPO / "docs" / "own-job.md"


def _bash_n(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)


def _words(joined: str) -> list[str]:
    """What bash makes of ``cmd=(JOINED)``: the array's elements."""
    done = subprocess.run(
        ["bash", "-c", f'cmd=({joined})\nprintf "%s\\0" "${{cmd[@]}}"'],
        capture_output=True,
        check=True,
    )
    return [w.decode() for w in done.stdout.split(b"\0")[:-1]]


def _isambard(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["sbatch", *ISAMBARD_ARGS]) == 0
    return capsys.readouterr().out


def test_the_isambard_job_of_the_issue(capsys: pytest.CaptureFixture[str]) -> None:
    """``hpcenv sbatch isambard --nodes 2 --chain 3 -- python train.py --name "my run"``:
    modules, the multi-node NCCL settings, the gate, the quoted command, the chain."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    script = _isambard(capsys)
    assert _bash_n(script).returncode == 0, _bash_n(script).stderr
    lines = script.splitlines()
    assert [x for x in lines if x.startswith("module load")] == [
        "module load PrgEnv-cray", "module load cuda/12.6", "module load brics/aws-ofi-nccl/1.8.1",
    ]  # fmt: skip
    for line in ("export NCCL_NET='AWS Libfabric'", "export NCCL_PROTO='^LL128'",
                 "export FI_PROVIDER=cxi", "#SBATCH --nodes=2", "#SBATCH --gpus-per-node=4",
                 "#SBATCH --ntasks-per-node=4", "#SBATCH --signal=B:USR1@300",
                 "export HPCENV_CHAIN_LINK=$link HPCENV_CHAIN_MAX=3",
                 "cmd=(python train.py --name 'my run')"):  # fmt: skip
        assert line in lines, line
    assert _words("python train.py --name 'my run'") == ["python", "train.py", "--name", "my run"]
    assert any(" preflight isambard" in x and x.startswith("gate ") for x in lines)
    assert any('--dependency=afterany:"$this_job" "$0"' in x for x in lines)
    # the modules come before the venv goes first on PATH
    assert lines.index("module load cuda/12.6") < next(
        i for i, x in enumerate(lines) if x.startswith("export PATH=")
    )


def test_docs_show_the_script_hpcenv_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/own-job.md holds the rendered Isambard script; it must stay what hpcenv renders
    (there: in /home/user/project, HPCENV_HOME=/home/user/.hpcenv, hpcenv's python3)."""
    monkeypatch.setenv("HPCENV_HOME", "/home/user/.hpcenv")
    monkeypatch.setattr(sys, "executable", "/home/user/.local/bin/python3")
    spec = own.CommandJob(argv=("python", "train.py", "--name", "my run"), nodes=2, chain=3)
    old = os.umask(0o022)  # the user's umask the script gives CMD back (there: 022)
    try:
        script = own.render(profile.load("isambard"), spec, workdir=Path("/home/user/project"))
    finally:
        os.umask(old)
    m = re.search(r"```bash\n(#!/bin/bash\n.*?)```", DOC.read_text(), re.S)
    assert m, f"{DOC} has no rendered script"
    assert m.group(1) == script.script, "docs/own-job.md is stale: render it again (see the doc)"


_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")
SPECS = st.builds(
    own.CommandJob,
    argv=st.lists(st.text(_TEXT, max_size=20), min_size=1, max_size=5)
    .filter(lambda a: a[0] != "")
    .map(tuple),
    nodes=st.integers(1, 4),
    launch=st.sampled_from(own.LAUNCHES),
    chain=st.integers(1, 4),
    dependency=st.sampled_from(own.DEPENDENCIES),
    gate=st.sampled_from([(), ("nccl",), ("torch", "nccl"), ("imports", "ray")]),
    preflight=st.booleans(),
    cpus_per_task=st.one_of(st.none(), st.integers(1, 64)),
    copy_back=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
            lambda d: not d.startswith("/") and ".." not in d.split("/")
        ),
        max_size=2,
    ).map(tuple),
    time=st.just("1-00:00:00"),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(PROFILES), spec=SPECS)
def test_every_profile_and_option_renders_a_script_bash_accepts(
    name: str, spec: own.CommandJob
) -> None:
    """Any command words (quotes, $, newlines, backticks) and options: ``bash -n`` accepts
    the script and the command comes back word for word."""
    prof = profile.load(name)
    spec = dataclasses.replace(
        spec,
        copy_back=spec.copy_back if prof.job.scratch else (),
        gate=spec.gate if spec.preflight else (),
    )
    script = own.render(prof, spec, workdir=Path("/w/my proj")).script
    checked = _bash_n(script)
    assert checked.returncode == 0, checked.stderr
    assert f"cmd=({shell_join(spec.argv)})" in script
    assert _words(shell_join(spec.argv)) == list(spec.argv)
    assert ("--signal=B:USR1@300" in script) == (spec.chain > 1)
    assert ("sbatch --parsable --dependency=" in script) == (spec.chain > 1)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["local", "--copy-back", "x", "--", "true"], "--copy-back needs node-local scratch"),
        (["brtx", "--copy-back", "../x", "--", "true"], "relative directory under $TMPDIR"),
        (["brtx", "--copy-back", "/abs", "--", "true"], "relative directory under $TMPDIR"),
        (["local", "--gate", "nope", "--", "true"], "--gate nope: unknown probe"),
        (["local", "--chain", "0", "--", "true"], "--chain 0: give 1 to 1000 links"),
        (["local", "--time", "2h", "--", "true"], "--time '2h' is not a SLURM time"),
        (["local", "--time", "2h", "imports"], "--time '2h' is not a SLURM time"),
        (["local", "--chain", "2", "--time", "3", "--", "true"], "not shorter than the walltime"),
        (["local", "imports", "--", "true"], "not both"),
        (["local", "--chain", "2", "imports"], "--chain: only for your own command"),
        (["local", "--", ""], "give the command"),
        (["local", "--nodes", "0", "--", "true"], "--nodes 0"),
        (["local", "--job-name", "a b", "--", "true"], "cannot go on an #SBATCH line"),
    ],
)
def test_bad_options_are_one_line_with_exit_2(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sbatch", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err


def test_walltimes_build_jobs_fit_a_flash_attn_build_and_time_overrides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def time_of(*args: str) -> str:
        assert main(["sbatch", *args]) == 0
        return re.findall(r"^#SBATCH --time=(\S+)$", capsys.readouterr().out, re.M)[0]

    assert time_of("isambard", "build") == "02:00:00"  # [slurm] build_time
    assert time_of("isambard", "nccl") == "00:20:00"  # [slurm] time
    assert time_of("isambard", "build", "--time", "3:00:00") == "3:00:00"
    assert time_of("isambard", "--time", "1-00:00:00", "--", "true") == "1-00:00:00"
    assert time_of("isambard", "--", "true") == "00:20:00"


def test_the_launch_lines_and_the_ray_cpu_request(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sbatch", "brtx", "--per-task", "--", "python", "x.py"]) == 0
    task = capsys.readouterr().out
    assert "srun --kill-on-bad-exit=1 -- bash -c " in task and 'hpcenv-node "${cmd[@]}" &' in task
    assert main(["sbatch", "brtx", "--nodes", "2", "--ray", "--cpus-per-task", "16",
                 "--", "python", "x.py"]) == 0  # fmt: skip
    ray = capsys.readouterr().out
    assert "#SBATCH --cpus-per-task=16" in ray
    assert 'export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"' in ray
    assert "-m hpcenv.slurm.ray_cluster" in ray and "--inherit-output" in ray
    assert main(["sbatch", "brtx", "--no-gate", "--", "true"]) == 0
    assert "gate " not in capsys.readouterr().out.replace("# --- no gate", "")


def test_cmd_gets_the_users_umask_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """hpcenv writes under a private umask (nothing it makes is group-writable) and sbatch
    hands the job the submitter's umask: the script gives CMD the user's own back, so a
    shared project directory under umask 002 stays group-writable for what CMD writes."""
    old = os.umask(0o002)
    try:
        assert main(["sbatch", "local", "--", "python", "train.py"]) == 0
    finally:
        os.umask(old)
    lines = capsys.readouterr().out.splitlines()
    assert "umask 0002" in lines
    assert lines.index("umask 0002") < next(i for i, x in enumerate(lines) if x.startswith("cmd="))
