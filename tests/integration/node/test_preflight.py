"""Preflight checks on recorded facts (stand-ins for GPU nodes), temp dirs and
recorded /proc/mounts text; the last tests run the command on this host."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.facts import collect
from hpcenv.job import preflight
from hpcenv.models.facts import Facts
from hpcenv.profile import schema as profile
from hpcenv.slurm.allocation import from_env as slurm_from_env
from support import FACTS, REPO

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
/dev/nvme0n1 /srv/local1 xfs rw 0 0
10.0.0.1:/home /home nfs4 rw 0 0
lustre@o2ib:/fs /lustre lustre rw 0 0
/dev/gpfs0 /gpfs gpfs rw 0 0
"""


def _profile(tmp_path: Path, extra: str = "") -> profile.Profile:
    text = (REPO / "envs" / "brtx.toml").read_text()
    text = text.replace('scratch = "/srv/local1"', f'scratch = "{tmp_path / "scratch"}"')
    text = text.replace('log_dir = "logs"', f'log_dir = "{tmp_path / "logs"}"')
    path = tmp_path / "brtx.toml"
    path.write_text(text + extra)
    return profile.load(str(path))


def _brtx_facts(env: dict[str, str] | None = None) -> Facts:
    f = collect.load(FACTS / "rtx6000-brtx.json")
    return dataclasses.replace(f, slurm=slurm_from_env(env) if env else None)


def _ctx(
    tmp_path: Path, f: Facts, env: dict[str, str] | None = None, mounts: str = MOUNTS, **kw: str
) -> preflight.Context:
    return preflight.Context(
        profile=_profile(tmp_path, kw.get("extra", "")),
        facts=f,
        environ=env or {},
        mounts=mounts,
        cwd=tmp_path,
    )


def _by_name(checks: list[preflight.Check]) -> dict[str, preflight.Check]:
    return {c.name: c for c in checks}


JOB = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "brtx601", "SLURM_GPUS_ON_NODE": "8"}


def test_cuda_visible_devices_against_the_allocation(tmp_path: Path) -> None:
    f = _brtx_facts(JOB)
    ids = "0,1,2,3,4,5,6,7"
    ok = {**JOB, "SLURM_JOB_GPUS": ids, "CUDA_VISIBLE_DEVICES": ids}
    assert preflight.check_cuda_visible_devices(_ctx(tmp_path, f, ok)).status == "pass"
    renum = {**JOB, "SLURM_JOB_GPUS": "4-5", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert preflight.check_cuda_visible_devices(_ctx(tmp_path, f, renum)).status == "pass"
    bashrc = {**JOB, "SLURM_JOB_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "0"}
    c = preflight.check_cuda_visible_devices(_ctx(tmp_path, f, bashrc))
    assert c.status == "fail" and "overrides the allocation" in c.reason and "bashrc" in c.fix
    hidden = {**JOB, "SLURM_STEP_GPUS": "0", "CUDA_VISIBLE_DEVICES": ""}
    assert preflight.check_cuda_visible_devices(_ctx(tmp_path, f, hidden)).status == "fail"
    unset = {**JOB, "SLURM_JOB_GPUS": "0,1"}
    assert preflight.check_cuda_visible_devices(_ctx(tmp_path, f, unset)).status == "fail"
    outside = preflight.check_cuda_visible_devices(_ctx(tmp_path, _brtx_facts()))
    assert outside.status == "skip" and outside.fix


def test_gpus_visible_equal_allocated(tmp_path: Path) -> None:
    f = _brtx_facts(JOB)
    n = len(f.gpus)
    env = {**JOB, "SLURM_GPUS_ON_NODE": str(n)}
    assert preflight.check_gpu_count(_ctx(tmp_path, _brtx_facts(env), env)).status == "pass"
    fewer = {**env, "CUDA_VISIBLE_DEVICES": "0"}
    c = preflight.check_gpu_count(_ctx(tmp_path, _brtx_facts(fewer), fewer))
    assert c.status == "fail" and f"1 GPUs visible but {n} allocated" in c.reason
    no_driver = dataclasses.replace(_brtx_facts(env), nvidia=None)
    assert preflight.check_gpu_count(_ctx(tmp_path, no_driver, env)).status == "fail"


def test_scratch_local_network_missing_and_full(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    local = MOUNTS + f"/dev/nvme1 {tmp_path / 'scratch'} ext4 rw 0 0\n"
    f = _brtx_facts()
    ok = preflight.check_scratch(_ctx(tmp_path, f, mounts=local))
    prof_need = _profile(tmp_path).job.scratch_min_gib
    free_enough = ok.status == "pass"
    assert ok.status in ("pass", "fail") and "scratch" in ok.reason
    if not free_enough:  # this disk has less than brtx's 50 GiB free: the fail says so
        assert f"needs {prof_need:g} GiB" in ok.reason
    nfs = MOUNTS + f"server:/export {tmp_path / 'scratch'} nfs4 rw 0 0\n"
    c = preflight.check_scratch(_ctx(tmp_path, f, mounts=nfs))
    assert c.status == "fail" and "network filesystem" in c.reason and "nfs4" in c.reason
    lustre = MOUNTS + f"fs@o2ib:/x {tmp_path} lustre rw 0 0\n"
    c = preflight.check_scratch(_ctx(tmp_path, f, mounts=lustre))
    assert c.status == "fail" and "lustre" in c.reason
    (tmp_path / "scratch").rmdir()
    c = preflight.check_scratch(_ctx(tmp_path, f, mounts=local))
    assert c.status == "fail" and "does not exist" in c.reason


def test_scratch_free_space_threshold(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    mounts = MOUNTS + f"/dev/nvme1 {tmp_path / 'scratch'} ext4 rw 0 0\n"
    base = _ctx(tmp_path, _brtx_facts(), mounts=mounts)
    job = base.profile.job
    tiny = dataclasses.replace(
        base,
        profile=dataclasses.replace(
            base.profile, job=dataclasses.replace(job, scratch_min_gib=0.001)
        ),
    )
    huge = dataclasses.replace(
        base,
        profile=dataclasses.replace(
            base.profile, job=dataclasses.replace(job, scratch_min_gib=1e9)
        ),
    )
    assert preflight.check_scratch(tiny).status == "pass"
    c = preflight.check_scratch(huge)
    assert c.status == "fail" and "GiB free" in c.reason and "scratch_min_gib" in c.fix


def test_mount_of_picks_the_longest_prefix() -> None:
    assert preflight.mount_of(Path("/home/u/x"), MOUNTS) == ("/home", "nfs4")
    assert preflight.mount_of(Path("/homework"), MOUNTS) == ("/", "ext4")
    assert preflight.mount_of(Path("/srv/local1"), MOUNTS) == ("/srv/local1", "xfs")


def test_log_dir(tmp_path: Path) -> None:
    f = _brtx_facts()
    c = preflight.check_log_dir(_ctx(tmp_path, f))
    assert c.status == "pass" and "can be created" in c.reason
    (tmp_path / "logs").mkdir()
    assert "exists" in preflight.check_log_dir(_ctx(tmp_path, f)).reason
    (tmp_path / "logs").rmdir()
    (tmp_path / "logs").write_text("a file")
    assert preflight.check_log_dir(_ctx(tmp_path, f)).status == "fail"


def test_modules(tmp_path: Path) -> None:
    extra = '\n[modules]\nload = ["cuda/12.6", "nccl"]\n'
    f = _brtx_facts()
    env = {"LOADEDMODULES": "cuda/12.6:nccl/2.21.5"}
    assert preflight.check_modules(_ctx(tmp_path, f, env, extra=extra)).status == "pass"
    env = {"LOADEDMODULES": "cuda/12.4"}
    c = preflight.check_modules(_ctx(tmp_path, f, env, extra=extra))
    assert c.status == "fail" and "cuda/12.6, nccl" in c.reason
    assert c.fix.startswith("module load cuda/12.6 nccl")
    assert preflight.check_modules(_ctx(tmp_path, f)).status == "skip"  # brtx loads none


def test_gpu_memory_and_ecc_on_recorded_facts(tmp_path: Path) -> None:
    f = _brtx_facts()
    assert preflight.check_gpu_memory(_ctx(tmp_path, f)).status == "pass"  # 24 GB >= 20
    small = dataclasses.replace(
        f,
        nvidia=dataclasses.replace(
            f.nvidia,  # type: ignore[arg-type]
            gpus=(dataclasses.replace(f.gpus[0], memory_mib=16384), *f.gpus[1:]),
        ),
    )
    c = preflight.check_gpu_memory(_ctx(tmp_path, small))
    assert c.status == "fail" and "GPU 0 (16.0 GiB)" in c.reason
    assert preflight.check_ecc(_ctx(tmp_path, f)).status == "skip"  # RTX 6000: ECC off
    v100 = collect.load(FACTS / "v100-supercloud.json")
    assert preflight.check_ecc(_ctx(tmp_path, v100)).status == "pass"
    bad = dataclasses.replace(
        f,
        nvidia=dataclasses.replace(
            f.nvidia,  # type: ignore[arg-type]
            gpus=(*f.gpus[:-1], dataclasses.replace(f.gpus[-1], ecc_uncorrected=2)),
        ),
    )
    c = preflight.check_ecc(_ctx(tmp_path, bad))
    assert c.status == "fail" and f"GPU {f.gpus[-1].index} (2 errors)" in c.reason
    cpu = dataclasses.replace(f, nvidia=None)
    assert preflight.check_ecc(_ctx(tmp_path, cpu)).status == "skip"
    assert preflight.check_gpu_memory(_ctx(tmp_path, cpu)).status == "skip"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "preflight", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def test_command_exit_codes_and_json(tmp_path: Path) -> None:
    done = _cli(
        "supercloud", "--facts", str(FACTS / "v100-supercloud.json"), "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "pass" and len(data["checks"]) == 7
    # brtx's scratch /srv/local1 does not exist here: exit 8 (not a probe failure, 5)
    done = _cli("brtx", "--facts", str(FACTS / "rtx6000-brtx.json"), cwd=tmp_path)
    assert done.returncode == 8
    assert done.stderr.strip().splitlines() == [
        "hpcenv: error: preflight failed: scratch (see the fix column)"
    ]
    assert "preflight: brtx" in done.stdout
    done = _cli("brtx", "--facts", str(FACTS / "rtx6000-brtx.json"), "--json", cwd=tmp_path)
    scratch = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "scratch")
    assert scratch["status"] == "fail" and "/srv/local1 does not exist" in scratch["reason"]


@pytest.mark.parametrize("name", ["isambard", "brtx", "supercloud", "local"])
def test_every_shipped_profile_runs(name: str, tmp_path: Path) -> None:
    done = _cli(name, "--json", cwd=tmp_path)
    assert done.returncode in (0, 8), done.stderr
    assert {c["status"] for c in json.loads(done.stdout)["checks"]} <= {"pass", "fail", "skip"}
