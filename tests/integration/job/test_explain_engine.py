"""``hpcenv explain``'s engine on failures its catalogue need not know (issue 43): the
first failing line is the error, not its frame; error lines without a prefilter key;
the rank and node from every form a log gives them, never "rank ?"; a summary line
after a cascade never wins over the cascade's cause.

The lines are the messages as the public threads the issue quotes print them
(pytorch/pytorch#13246 and huggingface/transformers#1134 KeyError tracebacks, the
c10d watchdog of hiyouga/LlamaFactory#7396, torch's device-side assert, SLURM's srun,
torchrun's failure summary); the interleaving is how srun --label and torchrun print
several ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.decide import explain as ex
from hpcenv.knowledge import failures
from hpcenv.models.explanation import Explanation
from support import REPO

CATALOG = failures.load()


def _explain(text: str) -> Explanation:
    return ex.explain(ex.lines_of(text, CATALOG, file="job.out"), CATALOG)


#: Two ranks interleaved; rank 1's traceback ends in a KeyError between rank 0's lines.
TRACEBACK = """\
0: step 10 loss 2.31
1: Traceback (most recent call last):
0: step 11 loss 2.30
1:   File "/work/train.py", line 88, in <module>
1:     main()
1:   File "/work/train.py", line 61, in collate
1:     ids = batch["input_ids"]
0: step 12 loss 2.29
1: KeyError: 'input_ids'
"""


def test_a_traceback_is_explained_by_its_exception_line_with_the_innermost_frame() -> None:
    got = _explain(TRACEBACK)
    assert not got.known and got.evidence is not None
    assert (got.evidence.line, got.evidence.rank) == (9, 1)
    assert got.evidence.text == "1: KeyError: 'input_ids'"
    assert got.evidence.context == 'File "/work/train.py", line 61, in collate'


def test_an_exception_whose_line_holds_no_key_is_still_the_evidence() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "    raise SystemExit(3)\n"
        "SystemExit: 3\n"
    )
    got = _explain(log)
    assert got.evidence is not None and got.evidence.text == "SystemExit: 3"


def test_error_lines_without_a_prefilter_key_of_a_cause_are_found() -> None:
    assert_line = (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    srun = (
        "srun: error: Unable to allocate resources: Requested node configuration is not available\n"
    )
    segv = "worker 3 died with <Signals.SIGSEGV: 11>\n"
    for text in (assert_line, srun, segv):
        got = _explain("step 1\n" + text)
        assert got.evidence is not None and got.evidence.line == 2, text
        assert got.evidence.text == text.rstrip("\n")


def test_the_evidence_is_whole_in_json_however_long() -> None:
    long = "RuntimeError: " + "x" * 5000 + " died with <Signals.SIGSEGV: 11>"
    got = _explain(long + "\n")
    assert got.evidence is not None
    assert got.to_json()["evidence"]["text"] == long  # type: ignore[index]
    wrapped = got.text(width=80).splitlines()
    assert all(len(line) <= 80 for line in wrapped)
    assert "--json has all hpcenv read" in got.text()


#: Every rank's watchdog times out in SeqNum 1580, then takes its process down; torchrun
#: reports the first such death (exitcode -6, SIGABRT) last.
_TIMEOUT = (
    "[rank{r}]:[E1016 03:21:38.929241154 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
    "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
)
WATCHDOG_THEN_SUMMARY = (
    _TIMEOUT.format(r=0)
    + _TIMEOUT.format(r=1)
    + "[rank0]:[E1016 03:21:38.929246900 ProcessGroupNCCL.cpp:627] [Rank 0] To avoid data "
    "inconsistency, we are taking the entire process down.\n"
    "E1016 03:21:40.123000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: -6) local_rank: 0 (pid: 1322) of binary: /usr/bin/python\n"
)


def test_a_summary_line_after_the_cascade_never_wins_over_its_cause() -> None:
    got = _explain(WATCHDOG_THEN_SUMMARY)
    assert got.cause_id == "nccl_timeout", got.cause
    assert "rank ?" not in got.cause + got.fix


def test_a_rank_killed_from_outside_before_the_timeouts_still_leads() -> None:
    killed = WATCHDOG_THEN_SUMMARY.replace("exitcode: -6", "exitcode: -9")
    assert _explain(killed).cause_id == "rank_died"


def test_ranks_come_from_every_form_and_never_read_rank_question_mark() -> None:
    forms = {
        "3: RuntimeError: boom": (3, None),
        "[rank5]:RuntimeError: boom": (5, None),
        "[default2]:RuntimeError: boom": (None, 2),
        "RuntimeError: boom in worker local_rank: 1": (None, 1),
        "subprocess.CalledProcessError: Command '['python', '-u', 'train.py', "
        "'--local_rank=7']' returned non-zero exit status 1.": (None, 7),
        "[Rank 4] RuntimeError: boom": (4, None),
    }
    for line, (rank, local) in forms.items():
        got = _explain(line + "\n")
        assert got.evidence is not None, line
        assert (got.evidence.rank, got.evidence.local_rank) == (rank, local), line
    summary = "failed (exitcode: -9) local_rank: 1 (pid: 77) of binary: /usr/bin/python\n"
    died = _explain(summary)
    assert died.cause_id == "rank_died"
    assert "local rank 1 died first" in died.cause and "rank ?" not in died.cause + died.fix
    assert died.evidence is not None and "local rank 1" in died.evidence.where()


def test_the_command_prints_the_exception_line_and_its_frame(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(TRACEBACK)
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "explain", str(log), "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    evidence = json.loads(done.stdout)["evidence"]
    assert evidence["text"] == "1: KeyError: 'input_ids'" and evidence["rank"] == 1
    assert evidence["context"] == 'File "/work/train.py", line 61, in collate'


def test_an_error_a_cascade_line_carries_is_not_dropped_with_the_cascade() -> None:
    log = (
        "[rank1]:[E1016 03:31:38.929 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 1] Process group "
        "watchdog thread terminated with exception: CUDA error: an illegal memory access was "
        "encountered\n"
        "[rank0]:[E1016 03:31:39.1 ProcessGroupNCCL.cpp:627] [Rank 0] To avoid data "
        "inconsistency, we are taking the entire process down.\n"
    )
    got = _explain(log)
    assert got.evidence is not None and (got.evidence.line, got.evidence.rank) == (1, 1)
    assert "illegal memory access" in got.evidence.text


def test_a_flattened_torchrun_summary_still_names_the_rank_and_an_upper_case_error_is_read() -> (
    None
):
    flattened = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "Root Cause (first observed failure) :\n[0]:\ntime\nhost\n2023-09-14 01:45:50\n"
        "ding-X10DRG\nrank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>\n"
    )
    got = _explain(flattened)
    assert got.cause_id == "rank_died" and got.cause.startswith("rank 2 died first"), got.cause
    upper = _explain("Checking devices...\nERROR: cudaGetDeviceCount returned 3\n")
    assert upper.evidence is not None and upper.evidence.line == 2


DATA = REPO / "tests" / "data" / "failures"


def test_a_patterns_anchor_is_in_every_line_it_matches_and_the_gate_changes_no_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each pattern's anchor (the literal every match holds) lets a line without it skip
    the regex; the gate (all anchors in one search) lets a line with none skip them all.
    Neither may change an answer: checked on every real log of tests/data/failures."""
    patterns = [*CATALOG.in_line, *CATALOG.world, *CATALOG.cascade, *CATALOG.unknown]
    patterns += [p for cause in CATALOG.causes for p in (*cause.patterns, *cause.fields)]
    logs = sorted(DATA.glob("*.log"))
    for log in logs:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            for pattern in patterns:
                if pattern.search(line):
                    assert failures.anchor(pattern) in line, (pattern.pattern, line)
    gated = [_explain(log.read_text(encoding="utf-8", errors="replace")) for log in logs]
    monkeypatch.setattr(failures, "gate", lambda catalog: None)
    assert gated == [_explain(log.read_text(encoding="utf-8", errors="replace")) for log in logs]
