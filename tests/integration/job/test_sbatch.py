"""Rendered sbatch scripts: each cluster's conventions, quoting, and real submission."""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.job import targets
from hpcenv.models import walltime
from hpcenv.profile import schema as profile
from hpcenv.slurm import sbatch
from hpcenv.utils.errors import BadInput, CommandFailed
from support import REPO, require
from support.slurm_cluster import SlurmCluster

EVIL = "x; rm -rf ~"


def _render(name: str, target: str = "nccl", nodes: int = 1, **kw: object) -> str:
    prof = profile.load(str(REPO / "envs" / f"{name}.toml"))
    return targets.render(prof, target, nodes=nodes, workdir=Path("/home/u/proj"), **kw).script  # type: ignore[arg-type]


def _directives(script: str) -> list[str]:
    return [line.split(None, 1)[1] for line in script.splitlines() if line.startswith("#SBATCH")]


def test_isambard_gpus_per_node_modules_and_nccl_net_only_multi_node() -> None:
    one, two = _render("isambard"), _render("isambard", nodes=2)
    d = _directives(two)
    assert "--gpus-per-node=4" in d and "--ntasks-per-node=4" in d and "--nodes=2" in d
    assert not any(x.startswith(("--gres", "--gpus=")) for x in d)
    assert "--partition" not in two  # Isambard's default partition
    mods = [line for line in two.splitlines() if line.startswith("module load")]
    assert mods == [
        "module load PrgEnv-cray",
        "module load cuda/12.6",
        "module load brics/aws-ofi-nccl/1.8.1",
    ]
    assert "export NCCL_NET='AWS Libfabric'" in two
    assert "NCCL_NET=" not in one  # single node: NVLink paths must stay allowed
    assert "export FI_PROVIDER=cxi" in one and "export NCCL_SOCKET_IFNAME=hsn" in one
    assert "TMPDIR" not in one  # no scratch declared


def test_brtx_total_gpus_partition_and_scratch_tmpdir() -> None:
    script = _render("brtx", nodes=2)
    d = _directives(script)
    assert "--gpus=16" in d and "--partition=brtx6" in d and "--ntasks-per-node=8" in d
    assert 'export TMPDIR=/srv/local1/"$SLURM_JOB_ID"' in script
    assert 'mkdir -p "$TMPDIR"' in script
    assert "module load" not in script


def test_cpu_profiles_get_two_ranks_for_multi_rank_probes() -> None:
    assert "--ntasks-per-node=2" in _directives(_render("local", target="nccl"))
    assert "--ntasks-per-node=1" in _directives(_render("local", target="imports"))
    assert not any(d.startswith(("--gpus", "--gres")) for d in _directives(_render("local")))


def test_a_profile_file_and_a_venv_reach_the_job(tmp_path: Path) -> None:
    """A profile given by path is named by its absolute path in the job (its name finds
    no envs/ file there), and ``--env VENV`` keeps the profile's settings (--profile)."""
    mine = tmp_path / "mine.toml"
    mine.write_text((REPO / "envs" / "local.toml").read_text())
    prof = profile.load(str(mine))
    job = targets.render(prof, "nccl", workdir=tmp_path, venv="/opt/venv")
    assert f" -m hpcenv probe nccl --env /opt/venv --profile {mine} --json" in job.script
    build = targets.render(prof, "build", workdir=tmp_path).script
    assert f" -m hpcenv build {mine}" in build
    named = targets.render(profile.load("local"), "nccl", workdir=tmp_path, venv="/v").script
    assert " -m hpcenv probe nccl --env /v --profile local --json" in named


def test_supercloud_gres_with_type() -> None:
    d = _directives(_render("supercloud"))
    assert "--gres=gpu:volta:2" in d and "--ntasks-per-node=2" in d
    assert not any(x.startswith(("--gpus", "--partition")) for x in d)


def test_common_shape() -> None:
    script = _render("brtx", target="probe")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "set -euo pipefail" in lines
    d = _directives(script)
    assert "--job-name=hpcenv-brtx-probe" in d and "--time=00:20:00" in d
    assert '--output="/home/u/proj/logs/hpcenv-brtx-probe-%j.out"' in d
    assert '--error="/home/u/proj/logs/hpcenv-brtx-probe-%j.err"' in d
    assert '--chdir="/home/u/proj"' in d
    assert any(" -m hpcenv probe --env brtx --json" in line for line in lines)
    assert any(" -m hpcenv build brtx" in line for line in _render("brtx", "build").splitlines())
    with pytest.raises(BadInput, match="unknown sbatch target"):
        _render("brtx", target="nope")


def _evil_profile(tmp_path: Path, partition: str = "gpu", account: str = "proj") -> profile.Profile:
    text = f"""
[profile]
python = "3.11"
[modules]
load = [{json.dumps(EVIL)}, "cuda/12.6"]
[env.always]
EVIL = {json.dumps(EVIL)}
QUOTE = "it's \\"here\\" $HOME `id`"
[slurm]
partition = {json.dumps(partition)}
account = {json.dumps(account)}
[job]
scratch = "/scratch/$(id)"
log_dir = {json.dumps(str(tmp_path / "logs; rm -rf ~"))}
"""
    path = tmp_path / "evil.toml"
    path.write_text(text)
    return profile.load(str(path))


def test_profile_values_are_quoted(tmp_path: Path) -> None:
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    job = targets.render(_evil_profile(tmp_path), "imports", workdir=tmp_path)
    script = job.script
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --account=proj" in script
    assert f"module load {shlex.quote(EVIL)}" in script
    assert f"export EVIL={shlex.quote(EVIL)}" in script
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    exports = "\n".join(line for line in script.splitlines() if line.startswith("export "))
    exports = exports.replace('"$SLURM_JOB_ID"', "42")
    shown = subprocess.run(
        ["bash", "-c", exports + '\nprintf "%s\\n" "$EVIL" "$QUOTE" "$TMPDIR"'],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert shown == [EVIL, 'it\'s "here" $HOME `id`', "/scratch/$(id)/42"]


def test_the_whole_rendered_script_runs_values_literally(tmp_path: Path) -> None:
    """Execute the script (with a recording stand-in for the site's 'module' command and
    HOME in a temp dir holding a canary): nothing a profile says is executed."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _evil_profile(tmp_path)
    job = targets.render(prof, "imports", workdir=tmp_path, run=["printf", "%s", EVIL])
    job = dataclasses.replace(job, script=job.script.replace("/scratch/$(id)", str(tmp_path)))
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    (home / "canary").write_text("alive")
    module = bin_dir / "module"
    module.write_text('#!/bin/bash\nprintf "%s|" "$@" >> "$MODULE_LOG"; echo >> "$MODULE_LOG"\n')
    module.chmod(0o755)
    script = sbatch.write(job, tmp_path / "job.sh")
    env = {
        "HOME": str(home),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_ID": "42",
        "MODULE_LOG": str(tmp_path / "modules.log"),
    }
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (home / "canary").read_text() == "alive"
    assert (tmp_path / "modules.log").read_text() == f"load|{EVIL}|\nload|cuda/12.6|\n"
    assert sbatch.read_report(job, "42") == EVIL
    assert done.stdout == EVIL


@pytest.mark.parametrize("key", ["partition", "account"])
@pytest.mark.parametrize("value", [EVIL, "'gpu'", '"gpu"', "gpu#1", "a\\b", "a b"])
def test_sbatch_values_sbatch_would_misread_are_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    """sbatch reads '#SBATCH --partition=x; rm -rf ~' as partition 'x;' plus a stray
    argument, and strips quotes itself: shell quoting cannot protect these lines."""
    with pytest.raises(BadInput) as info:
        targets.render(_evil_profile(tmp_path, **{key: value}), "imports", workdir=tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and f"[slurm] {key} = {value!r}" in msg
    assert "evil.toml" in msg and "plain value" in msg


def test_gres_type_with_a_space_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text((REPO / "envs" / "supercloud.toml").read_text().replace('"volta"', '"volta 2"'))
    with pytest.raises(BadInput, match=r"g\.toml: \[slurm\] gres_type = 'volta 2'"):
        targets.render(profile.load(str(path)), "imports", workdir=tmp_path)


def test_paths_are_written_the_way_sbatch_reads_them(tmp_path: Path) -> None:
    """Log paths may hold spaces: double-quoted, with quotes, backslash and '#' escaped
    (sbatch strips both quote kinds and the escapes; '#' would end the line)."""
    job = targets.render(_evil_profile(tmp_path), "imports", workdir=tmp_path / "my proj #2 'x'")
    d = _directives(job.script)
    log = tmp_path / "logs; rm -rf ~" / "hpcenv-evil-imports-%j.out"
    assert f'--output="{log}"' in d
    assert f"--chdir=\"{tmp_path}/my proj \\#2 \\'x\\'\"" in d


def test_a_line_break_in_a_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="line break"):
        targets.render(
            _evil_profile(tmp_path, partition="p\nrm -rf ~"), "imports", workdir=tmp_path
        )


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 1800),  # MM
        ("30:15", 1815),  # MM:SS
        ("00:20:00", 1200),  # HH:MM:SS
        ("1-02", 93600),  # D-HH
        ("1-02:30", 95400),  # D-HH:MM
        ("1-02:00:00", 93600),  # D-HH:MM:SS
        ("2-0", 172800),
    ],
)
def test_walltime_reads_every_slurm_form(value: str, seconds: float) -> None:
    assert walltime.seconds(value) == seconds


def test_walltime_without_limit_and_bad_forms() -> None:
    assert walltime.seconds("UNLIMITED") == walltime.seconds("0") == math.inf
    for bad in ("soon", "1h", "1-", "-5", "1:2:3:4", "1-2:3:4:5", ""):
        with pytest.raises(BadInput, match=r"slurm\.time"):
            walltime.seconds(bad)


def test_slurm_time_is_checked_when_the_profile_loads(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[profile]\npython = "3.11"\n[slurm]\ntime = "2h"\n')
    with pytest.raises(BadInput) as info:
        profile.load(str(path))
    msg = str(info.value)
    assert msg.startswith(f"{path} (line 4): [slurm] time = '2h' is not a SLURM time")
    assert "D-HH:MM:SS" in msg and "\n" not in msg
    path.write_text('[profile]\npython = "3.11"\n[slurm]\ntime = "1-12"\n')
    assert profile.load(str(path)).slurm.time == "1-12"
    path.write_text('[profile]\npython = "3.11"\n[slurm]\ntime = ""\n')  # partition default
    assert "--time" not in targets.render(profile.load(str(path)), "imports").script


TOKEN = "hf_sbatchSECRET42"


def _secret_profile(tmp_path: Path) -> profile.Profile:
    path = tmp_path / "secret.toml"
    path.write_text(
        (REPO / "envs" / "local.toml").read_text()
        + f'\n[env.always]\nHF_TOKEN = "{TOKEN}"\nGREETING = "hi"\n'
    )
    return profile.load(str(path))


def test_secrets_are_read_from_the_job_environment_never_written(tmp_path: Path) -> None:
    """The script (printed, and kept next to the logs) never holds a secret's value:
    it takes it from the environment sbatch passes on, and stops if it is missing."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    prof = _secret_profile(tmp_path)
    script = targets.render(prof, "imports", workdir=tmp_path).script
    assert TOKEN not in script
    line = 'export HF_TOKEN="${HF_TOKEN:?set HF_TOKEN in the submitting environment}"'
    assert line in script.splitlines()
    assert "export GREETING=hi" in script  # only secret names are left out
    assert "--export=ALL" in script  # the comment says where the value comes from
    assert sbatch.secret_env(prof) == {"HF_TOKEN": TOKEN}
    exports = "\n".join(ln for ln in script.splitlines() if ln.startswith("export "))
    exports = exports.replace('"$SLURM_JOB_ID"', "42")
    base = {"PATH": "/usr/bin:/bin"}
    given = subprocess.run(
        ["bash", "-c", f"set -eu\n{exports}\nbash -c 'printf %s \"$HF_TOKEN\"'"],
        capture_output=True,
        text=True,
        check=False,
        env={**base, "HF_TOKEN": "from-env"},
    )
    assert (given.returncode, given.stdout) == (0, "from-env")
    missing = subprocess.run(
        ["bash", "-c", f"set -eu\n{exports}\necho ran"],
        capture_output=True,
        text=True,
        check=False,
        env=base,
    )
    assert missing.returncode != 0 and "ran" not in missing.stdout
    assert "set HF_TOKEN in the submitting environment" in missing.stderr


def test_sbatch_command_never_prints_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _secret_profile(tmp_path)
    assert main(["sbatch", str(tmp_path / "secret.toml"), "imports"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and "${HF_TOKEN:?" in out


@pytest.mark.slurm
@pytest.mark.slow
def test_submit_a_rendered_script_on_real_slurm(slurm: SlurmCluster, tmp_path: Path) -> None:
    """A rendered script runs under sbatch: logs dir made first, env exported, output kept.
    The log directory's name holds a space, '#' and quotes: real sbatch must read the
    #SBATCH --output line back to exactly that path."""
    logs = tmp_path / "job logs #1 'q' \"d\""
    text = (
        (REPO / "envs" / "local.toml")
        .read_text()
        .replace('log_dir = "logs"', f"log_dir = {json.dumps(str(logs))}")
    )
    (tmp_path / "local.toml").write_text(
        text + f'\n[env.always]\nGREETING = "hello; world"\nHF_TOKEN = "{TOKEN}"\n'
    )
    prof = profile.load(str(tmp_path / "local.toml"))
    job = targets.render(
        prof,
        "imports",
        workdir=tmp_path,
        run=["bash", "-c", 'echo "$GREETING on $SLURM_JOB_NODELIST with $HF_TOKEN"'],
    )
    script = sbatch.write(job)
    assert TOKEN not in script.read_text()
    assert logs.is_dir()  # before submission
    # As 'hpcenv sbatch --submit' does: the secret travels in sbatch's environment.
    job_id = sbatch.submit(script, env={**slurm.env, **sbatch.secret_env(prof)})
    state = sbatch.wait(job_id, timeout=120, env=slurm.env)
    out, err = job.log_paths(job_id)
    assert state == "COMPLETED", (
        f"{state}\n{err.read_text() if err.exists() else ''}\n{slurm.log_text()}"
    )
    expected = f"hello; world on {slurm.node} with {TOKEN}\n"
    assert sbatch.read_report(job, job_id) == expected
    assert out.read_text() == expected


def _held_job(slurm: SlurmCluster, tmp_path: Path, run: list[str]) -> str:
    """Submit a job held in the queue (PENDING, reason JobHeldUser) until released."""
    prof = profile.load(str(REPO / "envs" / "local.toml"))
    job = targets.render(prof, "imports", workdir=tmp_path, run=run)
    script = job.script.replace("#!/bin/bash\n", "#!/bin/bash\n#SBATCH --hold\n", 1)
    path = sbatch.write(dataclasses.replace(job, script=script), tmp_path / "held.sh")
    return sbatch.submit(path, env=slurm.env)


@pytest.mark.slurm
@pytest.mark.slow
def test_wait_does_not_count_time_spent_pending(slurm: SlurmCluster, tmp_path: Path) -> None:
    """A job held in the queue for longer than the bound still completes under --wait:
    the bound is its running time, as SLURM's own time limit is."""
    job_id = _held_job(slurm, tmp_path, ["true"])
    result: dict[str, object] = {}

    def waiter() -> None:
        try:
            result["state"] = sbatch.wait(job_id, timeout=15, env=slurm.env)
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        time.sleep(20)  # held longer than the 15 s bound (15 s: room for a loaded CI box)
        assert sbatch.job_state(job_id, env=slurm.env) == "PENDING"
        slurm.run("scontrol", "release", job_id)
    finally:
        thread.join(120)
        slurm.run("scancel", job_id, check=False)
    assert result == {"state": "COMPLETED"}, f"{result}\n{slurm.log_text()}"


@pytest.mark.slurm
@pytest.mark.slow
def test_wait_bounds_running_time_and_optionally_queue_time(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    held = _held_job(slurm, tmp_path, ["true"])
    try:
        with pytest.raises(CommandFailed, match=r"still PENDING after \d+ s in the queue"):
            sbatch.wait(held, timeout=60, pending_timeout=2, env=slurm.env)
    finally:
        slurm.run("scancel", held, check=False)
    prof = profile.load(str(REPO / "envs" / "local.toml"))
    job = targets.render(prof, "imports", workdir=tmp_path, run=["sleep", "60"])
    running = sbatch.submit(sbatch.write(job, tmp_path / "long.sh"), env=slurm.env)
    try:
        with pytest.raises(CommandFailed, match=r"still RUNNING after \d+ s running") as info:
            sbatch.wait(running, timeout=2, env=slurm.env)
        assert info.value.returncode == 124
    finally:
        slurm.run("scancel", running, check=False)


def test_url_credentials_in_a_plain_variable_stay_out_of_the_script(tmp_path: Path) -> None:
    """PIP_INDEX_URL is no secret name, but a token in its URL is a secret."""
    path = tmp_path / "mirror.toml"
    path.write_text(
        (REPO / "envs" / "local.toml").read_text()
        + '\n[env.always]\nPIP_INDEX_URL = "https://bob:pw999@pypi.example/simple"\n'
    )
    prof = profile.load(str(path))
    script = targets.render(prof, "imports", workdir=tmp_path).script
    assert "pw999" not in script
    assert 'export PIP_INDEX_URL="${PIP_INDEX_URL:?' in script
    assert sbatch.secret_env(prof) == {"PIP_INDEX_URL": "https://bob:pw999@pypi.example/simple"}


def test_a_finished_job_maps_to_the_error_it_stands_for(tmp_path: Path) -> None:
    """Exit codes by meaning: a failed build job is a build failure (4), a probe job whose
    report says fail is a probe failure (5), a job that ended otherwise is a failed job (9)."""
    log = tmp_path / "job.err"
    assert sbatch.outcome("7", "nccl", "COMPLETED", {"status": "pass"}, log=log) is None
    cases: list[tuple[str, str, dict[str, object] | str | None, int]] = [
        ("build", "FAILED", None, 4),
        ("nccl", "FAILED", {"status": "fail"}, 5),
        ("probe", "FAILED", {"status": "error"}, 5),
        ("nccl", "FAILED", "Traceback ...", 9),  # died before writing a report
        ("nccl", "TIMEOUT", {"status": "fail"}, 9),
        ("build", "NODE_FAIL", None, 9),
        ("nccl", "CANCELLED by 0", None, 9),
    ]
    for target, state, report, code in cases:
        err = sbatch.outcome("7", target, state, report, log=log)
        assert err is not None and err.exit_code == code, (target, state, err)
        assert f"job 7 ended {state}" in str(err) and str(log) in str(err)


def test_control_characters_never_reach_the_script_file_raw(tmp_path: Path) -> None:
    """Issue 24, case 6 (scripts): an OSC 52 clipboard write in a profile value, or an
    escape sequence in a word of CMD, was written raw into the job script, where ``cat``
    or ``less`` would act on it. Now such a value is bash's ``$'...'`` with each control
    character escaped: no raw control byte in the file, the same words when bash runs it."""
    require("bash", shutil.which("bash") is not None, "bash not on PATH")
    osc52 = "a\x1b]52;c;ZWNobw==\x07b"
    path = tmp_path / "esc.toml"
    path.write_text(
        f'[profile]\npython = "3.11"\n[env.always]\nTERMINAL = {json.dumps(osc52)}\n'
        f"[job]\nlog_dir = {json.dumps(str(tmp_path / 'logs'))}\n"
    )
    word = "q\x1b[2J\u009bq"
    job = targets.render(
        profile.load(str(path)),
        "imports",
        workdir=tmp_path,
        run=["bash", "-c", 'printf "%s|%s" "$TERMINAL" "$1"', "job", word],
    )
    script = sbatch.write(job, tmp_path / "job.sh")
    raw = script.read_bytes()
    assert not any(b in raw for b in (b"\x1b", b"\x07", "\u009b".encode())), raw
    assert "$'a\\x1b]52;c;ZWNobw==\\x07b'" in raw.decode()
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{osc52}|{word}"
