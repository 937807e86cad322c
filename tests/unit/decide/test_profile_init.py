"""``hpcenv profile init`` / ``profile check`` without a cluster (issue 26): recorded facts
stand in for a compute node this machine cannot be (a GH200 with Slingshot's cxi
provider, tests/data/facts/gh200-isambard.json). SLURM is made unreachable by a PATH
without its clients; Lmod is Debian's real ``lmod`` with a modulefile tree made here.
The cluster-backed runs are in tests/integration/slurm/test_profile_init_cluster.py."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.decide import profile_drift
from hpcenv.facts import lmod, scratch
from hpcenv.facts.collect import load
from hpcenv.models.facts import from_json, to_json
from hpcenv.models.survey_model import Gres, Partition, SlurmSurvey, Survey
from hpcenv.profile import schema
from hpcenv.slurm import survey
from support import FACTS

GH200 = FACTS / "gh200-isambard.json"


def _values_have_sources(text: str) -> None:
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            assert re.search(r"\S  # \S", line), f"a value without its source: {line!r}"


def test_init_from_facts_without_slurm_writes_a_profile_that_validates_and_plans_cu126(
    no_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", "init", "newcl", "--facts", str(GH200)]) == 0
    out = capsys.readouterr().out
    path = no_slurm / "envs" / "newcl.toml"
    text = path.read_text()
    _values_have_sources(text)
    p = schema.load_path(path)
    assert (p.platform.arch, p.platform.compute_capability) == ("aarch64", "9.0")
    assert (p.platform.gpus_per_node, p.platform.driver) == (4, "565.57.01")
    assert (p.platform.libfabric_provider, p.platform.nccl_net, p.env.recipe) == (
        "cxi",
        "ofi",
        "cxi",
    )
    assert p.env_for(nodes=2)["NCCL_PROTO"] == "^LL128"
    assert p.profile.python == "3.12"
    # what it could not read is said, in the file and on the terminal
    assert "could not read: no scontrol on PATH" in text
    assert "NOT DETERMINED: set load = ..." in text
    assert "NOT DETERMINED: set gpu_request = ..." in text
    assert "not determined: [modules] load" in out
    assert "next: hpcenv show envs/newcl.toml" in out
    assert main(["show", str(path)]) == 0
    capsys.readouterr()
    assert main(["plan", str(path), "--declared", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["torch"]["backend"] == "cu126"
    assert plan["arch"] == "aarch64"


def test_init_refuses_to_replace_a_file_unless_forced(
    no_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = no_slurm / "site.toml"
    out.write_text("# mine\n")
    assert main(["profile", "init", "site", "--facts", str(GH200), "--output", str(out)]) == 2
    assert "site.toml exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == "# mine\n"
    args = ["profile", "init", "site", "--facts", str(GH200), "--output", str(out), "--force"]
    assert main(args) == 0
    assert schema.load_path(out).name == "site"


def test_init_without_facts_or_slurm_says_how_to_record_them(
    no_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", "init", "newcl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "hpcenv facts --json --scratch > node.json" in err
    assert not (no_slurm / "envs").exists()


def test_init_rejects_a_name_that_cannot_be_a_profile(
    no_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", "init", "../evil", "--facts", str(GH200), "--output", "x.toml"]) == 2
    assert "must start with a letter or digit" in capsys.readouterr().err
    assert not (no_slurm / "x.toml").exists()


def test_init_on_a_cpu_node_with_tcp_only(
    no_slurm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = {"schema": 1, "arch": "x86_64", "python": "3.11.7", "nvidia": None,
             "network": {"libfabric_providers": ["tcp", "udp", "shm"]}}  # fmt: skip
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(facts))
    assert main(["profile", "init", "cpu", "--facts", str(path)]) == 0
    p = schema.load_path(no_slurm / "envs" / "cpu.toml")
    assert p.env.recipe == "tcp" and p.platform.nccl_net == "socket"
    assert p.env_for(nodes=2)["NCCL_NET"] == "Socket"
    assert "gpu-health" not in p.probes.run
    text = (no_slurm / "envs" / "cpu.toml").read_text()
    assert "NOT DETERMINED: set NCCL_SOCKET_IFNAME = ..." in text  # the recipe's to_set
    assert "NOT DETERMINED: set driver = ..." in text


# --- the readers --------------------------------------------------------------------


MOUNTS = """\
/dev/nvme0n1p1 / ext4 rw 0 0
nfs1:/home /home nfs4 rw 0 0
fs1@o2ib:/lus /scratch lustre rw 0 0
/dev/nvme1n1 /local xfs rw 0 0
tmpfs /tmp tmpfs rw 0 0
"""


def test_scratch_candidates_keep_network_filesystems_out(tmp_path: Path) -> None:
    job_tmp = tmp_path / "job"
    job_tmp.mkdir()
    mounts = MOUNTS + f"/dev/sdb {tmp_path} ext4 rw 0 0\n"
    found = scratch.candidates({"TMPDIR": str(job_tmp)}, mounts)
    first = found[0]
    assert (first.path, first.found_as, first.fstype, first.local) == (
        str(job_tmp),
        "$TMPDIR",
        "ext4",
        True,
    )
    assert first.free_gib is not None and first.free_gib > 0
    for fs in ("nfs4", "lustre", "gpfs"):
        assert fs in scratch.NETWORK_FS
    assert scratch.mount_of(Path("/scratch/u"), MOUNTS) == ("/scratch", "lustre")


def test_facts_scratch_round_trips_through_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "--json", "--scratch"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(c["path"] == "/tmp" for c in data["scratch"])
    back = from_json(data, "x")
    assert back.scratch is not None and to_json(back)["scratch"] == data["scratch"]
    assert main(["facts", "--json"]) == 0
    assert "scratch" not in json.loads(capsys.readouterr().out)  # only when asked


def test_partitions_and_gres_from_scontrol_and_sinfo() -> None:
    scontrol = (
        "PartitionName=gpu AllowGroups=ALL Default=YES MaxTime=1-00:00:00 Nodes=n[1-2] "
        "State=UP TotalCPUs=8 TotalNodes=2\n"
        "PartitionName=cpu Default=NO MaxTime=00:10:00 Nodes=c1 State=DOWN TotalNodes=1\n"
    )
    sinfo = "n1|gpu*|gpu:h100:4(S:0-1),nvme:1\nn2|gpu*|gpu:h100:4\nc1|cpu|(null)\n"
    parts = survey.parse_partitions(scontrol, sinfo)
    gpu, cpu = parts
    assert (gpu.name, gpu.default, gpu.max_time, gpu.nodes) == ("gpu", True, "1-00:00:00", 2)
    assert gpu.gpus == (Gres(name="gpu", type="h100", count=4),)
    assert [str(g) for g in gpu.gres] == ["gpu:h100:4", "nvme:1"]
    assert (cpu.default, cpu.state, cpu.gres) == (False, "DOWN", ())
    assert Gres.parse("gpu:2") == Gres(name="gpu", type="", count=2)


def test_lmod_terse_listing() -> None:
    text = "/apps/modules:\ncuda/\ncuda/12.4\ncuda/12.6(default)\nnccl/2.21.5(D)\n\n"
    assert lmod.parse_terse(text) == ("cuda/12.4", "cuda/12.6", "nccl/2.21.5")
    assert lmod.matching(("cuda/12.6", "brics/aws-ofi-nccl/1.8.1"), "aws-ofi-nccl") == (
        "brics/aws-ofi-nccl/1.8.1",
    )



# --- drift ----------------------------------------------------------------------------


def _survey(modules: tuple[str, ...] | None, gres: str = "gpu:gh200:4") -> Survey:
    part = Partition(name="workq", default=True, max_time="1-00:00:00", nodes=2, state="UP",
                     gres=survey.split_gres(gres))  # fmt: skip
    return Survey(slurm=SlurmSurvey(partitions=(part,)), modules=modules)


def test_check_names_a_changed_driver_and_a_missing_module_with_their_lines() -> None:
    path = schema.available()["isambard"]
    text = path.read_text()
    p = schema.load_path(path)
    facts = load(GH200)
    node = json.loads(GH200.read_text())
    node["nvidia"]["driver_version"] = "570.86.10"
    newer = from_json(node, "node.json")
    mods = ("PrgEnv-cray", "cuda/12.4", "cuda/12.8", "brics/aws-ofi-nccl/1.8.1")
    ok = profile_drift.check(p, text, _survey((*mods, "cuda/12.6")), facts)
    assert ok.drifts == ()
    result = profile_drift.check(p, text, _survey(mods), newer)
    lines = [d.render(str(path)) for d in result.drifts]
    driver_line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("driver"))
    load_line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("load"))
    assert lines == [
        f"{path}:{driver_line}: [platform] driver: = '565.57.01' but the node runs 570.86.10: "
        "set driver = '570.86.10'",
        f"{path}:{load_line}: [modules] load: names 'cuda/12.6', which 'module -t avail' no "
        "longer lists; available now: cuda/12.4, cuda/12.8",
    ]


def test_check_names_a_renamed_partition_and_changed_gres(tmp_path: Path) -> None:
    path = tmp_path / "sc.toml"
    path.write_text(
        '[platform]\ngpus_per_node = 2\n[slurm]\npartition = "workq"\ngpu_request = "gres"\n'
        'gres_type = "volta"\n'
    )
    p = schema.load_path(path)
    text = path.read_text()
    changed = profile_drift.check(p, text, _survey(None, "gpu:v100:4"), None)
    assert [(d.section, d.key, d.line) for d in changed.drifts] == [
        ("slurm", "gres_type", 6),
        ("platform", "gpus_per_node", 2),
    ]
    assert "set gres_type = 'v100'" in changed.drifts[0].message
    assert "not checked: modules" not in changed.not_checked  # no modules in the profile
    old = dataclasses.replace(p, slurm=dataclasses.replace(p.slurm, partition="old"))
    renamed = profile_drift.check(old, text, _survey(None), None)
    assert renamed.drifts[0].line == 4
    assert "= 'old' but SLURM has no such partition now; it has workq" in renamed.drifts[0].message



def test_module_choice_follows_torchs_cuda_and_says_what_is_missing() -> None:
    from hpcenv.decide import profile_init

    facts = load(GH200)  # cu126 on driver 565; the cxi recipe wants aws-ofi-nccl
    mods = ("cuda/12.9", "cuda/12.10", "nccl/2.9.1", "nccl/2.21.5", "gcc/12")
    result = profile_init.draft("m", facts, Survey(slurm=None, modules=mods))
    p = schema.parse(result.text, "m.toml")
    assert p.modules.load == ("cuda/12.10", "nccl/2.21.5")  # 12.10 after 12.9, 2.21 after 2.9
    assert "no CUDA 12.6 module: the newest of CUDA 12.x" in result.text
    assert "NOT DETERMINED: no aws-ofi-nccl or libfabric module" in result.text
    more = (*mods, "cuda/12.6", "x/aws-ofi-nccl/1.9")
    exact = profile_init.draft("m", facts, Survey(slurm=None, modules=more))
    assert schema.parse(exact.text, "m.toml").modules.load == (
        "cuda/12.6", "nccl/2.21.5", "x/aws-ofi-nccl/1.9",
    )  # fmt: skip
