"""``hpcenv explain``: the first real failure of a job's log, its cause, evidence and fix.

The logs under tests/data/failures/ are real output quoted from public issue threads
(SOURCES.md names each); the interleaved logs below are built from such lines, in the
order ranks print them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.decide import explain as ex
from hpcenv.knowledge import failures
from hpcenv.models import facts as facts_model
from hpcenv.models.explanation import Explanation
from support import REPO

DATA = REPO / "tests" / "data" / "failures"
CATALOG = failures.load()


def _explain(text: str, nodes: tuple[str, ...] = (), tasks_per_node: int = 0) -> Explanation:
    lines = ex.lines_of(text, CATALOG, file="job.out")
    return ex.explain(lines, CATALOG, nodes=nodes, tasks_per_node=tasks_per_node)


def _file(name: str) -> Explanation:
    path = DATA / name
    return ex.explain(ex.lines_of(path.read_text(), CATALOG, file=name), CATALOG)


def test_every_cause_matches_its_quoted_example_and_passes_the_prefilter() -> None:
    for cause in CATALOG.causes:
        assert cause.match(cause.example), cause.id
        assert any(k.decode() in cause.example for k in CATALOG.keys), cause.id
        # a public thread, the docs or the source; hpcenv's own messages: its module
        assert cause.source.startswith(("https://", "hpcenv/")), cause.id


def test_every_log_in_sources_md_is_there_and_named() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for log in DATA.glob("*.log"):
        assert f"| {log.name} | https://" in sources, log.name


@pytest.mark.parametrize(
    ("name", "cause_id", "line", "rank", "node"),
    [
        ("driver_too_old.log", "driver_too_old", 1, None, None),
        ("libcudart13.log", "cuda_runtime_missing", 4, None, None),
        ("no_kernel_image.log", "no_kernel_image", 1, None, None),
        ("torchvision_nms.log", "torchvision_mismatch", 12, None, None),
        ("bf16_v100.log", "gpu_below_ampere", 1, None, None),
        ("cuda_oom.log", "cuda_oom", 1, None, None),
        ("slurm_oom_kill.log", "host_oom", 2, 4, "Orion-01-01"),
        ("nccl_watchdog.log", "nccl_timeout", 1, 0, None),
        ("torchrun_sigkill.log", "rank_died", 14, 0,
         "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"),
        ("walltime.log", "walltime", 2, None, "..."),
        ("preempted.log", "preempted", 1, None, "cn119"),
        ("port_in_use.log", "port_in_use", 1, None, None),
        ("ecc.log", "ecc_xid", 1, None, None),
        ("xid79.log", "ecc_xid", 2, None, None),
        ("disk_full.log", "disk_full", 3, None, None),
        ("nccl_socket.log", "nccl_socket", 4, None, "ds-ml-01-0"),
        ("torch_cpu.log", "torch_cpu_build", 2, None, None),
        ("torchvision_undefined_symbol.log", "torchvision_mismatch", 3, None, None),
        ("insufficient_driver.log", "driver_too_old", 3, None, None),
    ],
)  # fmt: skip
def test_real_error_output_gets_its_cause_evidence_and_fix(
    name: str, cause_id: str, line: int, rank: int | None, node: str | None
) -> None:
    got = _file(name)
    assert isinstance(got, Explanation)
    assert got.known and got.cause_id == cause_id
    assert got.evidence is not None
    assert (got.evidence.file, got.evidence.line) == (name, line)
    assert (got.evidence.rank, got.evidence.node) == (rank, node)
    assert got.fix and got.source.startswith("https://")


def test_hpcenvs_own_hang_watchdog_is_a_hang_naming_where_it_is_stuck() -> None:
    log = (
        "step 3\nhpcenv watchdog: the command printed nothing for 31 s (--hang-timeout 30 s): "
        "the Python stacks of the command's processes on 2 node(s) follow\n"
        "hpcenv watchdog: --- node1 pid 77: python train.py\n"
        "hpcenv watchdog: not in a collective: node1 pid 77 (train.py:12 load)\n"
    )
    got = _explain(log)
    assert got.cause_id == "hang" and "31 s" in got.cause
    assert "node1 pid 77 (train.py:12 load)" in got.fix


def test_torchrun_summary_names_the_signal_and_the_rank() -> None:
    got = _file("torchrun_sigkill.log")
    assert isinstance(got, Explanation)
    assert "rank 0 died first (exit code -9, signal SIGKILL)" in got.cause
    assert dict(got.details)["exitcode"] == "-9"


#: Four ranks (srun --label), rank 2 runs out of GPU memory first; the others then time
#: out in the next all-reduce and are taken down: the cascade that ends the log.
INTERLEAVED = (DATA / "interleaved_oom.log").read_text()


def test_the_first_failure_wins_over_the_cascade_and_the_last_line() -> None:
    got = _explain(INTERLEAVED)
    assert got.cause_id == "cuda_oom"
    assert got.evidence is not None and (got.evidence.line, got.evidence.rank) == (7, 2)


def test_a_rank_node_comes_from_the_jobs_node_list() -> None:
    got = _explain(INTERLEAVED, nodes=("node1", "node2"), tasks_per_node=2)
    assert got.evidence is not None and got.evidence.node == "node2"


#: NCCL_DEBUG=INFO says the world (4 ranks); rank 2 hangs and never reaches SeqNum 51.
HANG = (DATA / "nccl_hang.log").read_text()


def test_a_collective_timeout_names_the_collective_and_the_ranks_that_never_arrived() -> None:
    got = _explain(HANG)
    assert got.cause_id == "nccl_timeout"
    assert "ALLGATHER (SeqNum 51)" in got.cause
    assert "ranks 2 never arrived" in got.cause
    assert dict(got.details)["timed_out"] == "0, 1, 3"
    assert got.evidence is not None and got.evidence.rank == 3


CASCADE_ONLY = (DATA / "cascade_unknown.log").read_text()


def test_an_unknown_failure_says_so_and_shows_the_first_failing_line_not_the_cascade() -> None:
    got = _explain(CASCADE_ONLY)
    assert not got.known and got.cause_id is None
    assert "not a failure hpcenv knows" in got.cause
    # the exception line, not the traceback's header (line 4), with its innermost frame
    assert got.evidence is not None and (got.evidence.line, got.evidence.rank) == (6, 3)
    assert got.evidence.context == 'File "train.py", line 12, in <module>'


def test_a_log_with_no_failure_says_nothing_failed() -> None:
    got = _explain("0: step 1 loss 2.0\n0: step 2 loss 1.9\n")
    assert not got.known and got.evidence is None


def test_blocks_split_anywhere_give_the_same_lines_and_numbers() -> None:
    data = (DATA / "torchrun_sigkill.log").read_bytes() * 3
    after = CATALOG.after()
    whole = list(ex.scan([data], CATALOG.keys, file="f", after=after))
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert list(ex.scan(pieces, CATALOG.keys, file="f", after=after)) == whole
    assert len(whole[2].after) == 8  # the summary's own lines (Root Cause ... traceback)
    assert [line.number for line in whole][:2] == [6, 7]


def _gpu_facts(driver: str, cuda: str) -> facts_model.Facts:
    return facts_model.from_json(
        {"schema": 1, "hostname": "gpu01", "arch": "x86_64", "glibc": "2.35",
         "python": "3.11.9",
         "nvidia": {"driver_version": driver, "cuda_driver_version": cuda,
                    "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB",
                              "compute_capability": "8.0"}]}}
    )  # fmt: skip


def test_the_fix_names_the_variant_hpcenv_chooses_for_the_nodes_driver() -> None:
    facts = _gpu_facts("550.54.15", "12.4")
    got = ex.with_node(_file("driver_too_old.log"), facts, "2.9.1+cu130")
    assert "driver 550.54.15 runs CUDA <= 12.4" in " ".join(got.notes)
    assert "cu12" in got.fix and "cu130" not in got.fix.split(":")[0]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hpcenv", "explain", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=60, check=False)


def test_the_command_exits_0_for_a_known_cause_1_for_an_unknown_one_2_for_bad_input(
    tmp_path: Path,
) -> None:
    known = _cli(str(DATA / "slurm_oom_kill.log"), "--json")
    assert known.returncode == 0, known.stderr
    found = json.loads(known.stdout)
    assert found["cause_id"] == "host_oom" and found["evidence"]["node"] == "Orion-01-01"
    unknown = _cli(str(DATA / "cascade_unknown.log"))
    assert unknown.returncode == 1
    assert "not a failure hpcenv knows" in unknown.stdout and "(rank 3)" in unknown.stdout
    missing = _cli("4242", "--log-dir", str(tmp_path))
    assert missing.returncode == 2 and "no log of job 4242" in missing.stderr
    assert "Traceback" not in missing.stderr
    (tmp_path / "fifo").mkdir()
    not_a_file = _cli(str(tmp_path / "fifo"))
    assert not_a_file.returncode == 2 and "Traceback" not in not_a_file.stderr


def test_a_job_id_finds_the_logs_sbatch_writes_and_the_torch_its_report_records(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    (logs / "77").mkdir(parents=True)
    (logs / "hpcenv-local-torch-77.out").write_text("probe torch starting\n")
    (logs / "hpcenv-local-torch-77.err").write_text((DATA / "driver_too_old.log").read_text())
    (logs / "77" / "report.json").write_text(
        json.dumps({"status": "error", "ranks": [{"facts": {"torch": "2.9.1+cu130"}}]})
    )
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({
        "schema": 1, "hostname": "gpu01", "arch": "x86_64", "glibc": "2.35", "python": "3.11.9",
        "nvidia": {"driver_version": "550.54.15", "cuda_driver_version": "12.4",
                   "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB",
                             "compute_capability": "8.0"}]}}))  # fmt: skip
    done = _cli("77", "--facts", str(facts), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["cause_id"] == "driver_too_old"
    assert found["evidence"]["file"].endswith("hpcenv-local-torch-77.err")
    assert "the job's torch is 2.9.1+cu130" in " ".join(found["notes"])
    assert "of variant cu12" in found["fix"]


def test_nccl_on_sockets_leads_a_timeout_where_the_profile_expects_ofi() -> None:
    log = (DATA / "nccl_socket.log").read_text() + (DATA / "nccl_watchdog.log").read_text()
    expected = _explain_net(log, "ofi")
    assert expected.cause_id == "nccl_socket"
    assert expected.cause.endswith("where the profile expects nccl_net = ofi")
    anywhere = _explain_net(log, "any")
    assert anywhere.cause_id == "nccl_timeout"
    assert any("NCCL used TCP sockets" in note for note in anywhere.notes)


def _explain_net(text: str, net: str) -> Explanation:
    return ex.explain(ex.lines_of(text, CATALOG), CATALOG, expect_net=net)


def test_the_explanation_is_kept_in_the_jobs_report_or_a_new_one(tmp_path: Path) -> None:
    from hpcenv.slurm import failure

    found = _file("cuda_oom.log")
    probe_report = tmp_path / "1" / "report.json"
    probe_report.parent.mkdir()
    probe_report.write_text(json.dumps({"status": "error", "probes": []}))
    kept = failure.record(probe_report, found, job_id="1", state="FAILED")
    assert kept["status"] == "error" and "job_id" not in kept  # the job's own keys kept
    assert json.loads(probe_report.read_text())["explanation"]["cause_id"] == "cuda_oom"
    own = tmp_path / "2" / "report.json"
    made = failure.record(own, found, job_id="2", state="FAILED")
    assert made["job_id"] == "2" and made["explanation"] == found.to_json()
    assert json.loads(own.read_text()) == made
