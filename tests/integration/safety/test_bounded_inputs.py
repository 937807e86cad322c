"""Everything hpcenv takes in or starts is bounded: captured output, a rank's stderr,
expanded host and GPU lists, local ranks, timeouts, and helpers that hang.

Before: a rank's stderr was read whole (2 GB -> 5.4 GB RSS); ``SLURM_JOB_GPUS=0-99999999``
or a huge node list made ``preflight``/``facts`` hang; ``--ranks 1000`` started 1000 CPU
ranks; a hung ``nvidia-smi``/``fi_info`` took 15 s and was then reported as absent.
Memory is measured as the peak RSS of a child process doing the one thing (never a
timing).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hpcenv.models import hostlist
from hpcenv.runner import probes as runner
from hpcenv.utils.errors import BadInput
from support import REPO
from support.buildkit import hpcenv as _cli

MiB = 1 << 20


#: The peak RSS of this process's own memory (``VmHWM``). Not ``getrusage``'s ru_maxrss:
#: Linux carries that across exec from the process that forked, so a child of a 300 MiB
#: pytest reported 313 MiB (a CI run) whatever it did itself.
PEAK = (
    "print(next(line.split()[1] for line in open('/proc/self/status')"
    " if line.startswith('VmHWM:')))"
)


def _peak_rss_mib(code: str) -> tuple[float, str]:
    """(peak RSS in MiB, stdout) of a fresh Python running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{PEAK}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        cwd=REPO,
    )
    *out, rss_kib = done.stdout.strip().splitlines()
    return int(rss_kib) / 1024, "\n".join(out)


def test_captured_output_keeps_a_bounded_tail() -> None:
    """A command that prints 512 MiB: hpcenv keeps the last 8 MiB and says so."""
    rss, out = _peak_rss_mib(
        "from hpcenv.tools import command\n"
        "done = command.run([__import__('sys').executable, '-c', "
        '\'import sys\\nfor _ in range(512): sys.stdout.write("x" * (1 << 20))\\n'
        'print("the end")\'])\n'
        "print(len(done.stdout), done.stdout.splitlines()[0][:60],"
        " done.stdout.endswith('the end\\n'))"
    )
    kept, note, ends = out.split(" ", 2)[0], out.split(" ", 1)[1], out.endswith("True")
    assert int(kept) <= 8 * MiB + 100 and "bytes of output not kept" in note and ends
    assert rss < 200, f"peak RSS {rss:.0f} MiB for 512 MiB of output"


def test_a_ranks_stderr_is_read_by_its_tail(tmp_path: Path) -> None:
    """2 GiB of stderr (a sparse file): the tail costs kilobytes, not gigabytes."""
    err = tmp_path / "nccl.rank0.stderr"
    with err.open("wb") as fh:
        fh.truncate(2 << 30)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\nRuntimeError: the last line\n")
    rss, out = _peak_rss_mib(
        "from pathlib import Path\nfrom hpcenv.runner import probes as runner\n"
        f"print(runner.stderr_tail(Path({str(err)!r})).splitlines()[-1])"
    )
    assert out == "RuntimeError: the last line"
    assert rss < 200, f"peak RSS {rss:.0f} MiB for a 2 GiB stderr"


@pytest.mark.parametrize(
    "nodelist", ["nid[0-99999999999]", "a[0-9999]-b[0-9999]", ",".join(["x[0-99999]"] * 3)]
)
def test_huge_host_lists_are_bad_input_before_expanding(nodelist: str) -> None:
    assert (hostlist.count(nodelist) or 0) > hostlist.MAX_HOSTS
    with pytest.raises(BadInput, match="more than"):
        hostlist.expand(nodelist)
    with pytest.raises(BadInput, match="more than"):
        hostlist.check_size(nodelist)


def test_huge_gpu_and_node_lists_in_the_environment_do_not_hang() -> None:
    job = {"SLURM_JOB_ID": "1", "SLURM_JOB_GPUS": "0-99999999"}
    done = _cli("preflight", "local", env=job)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "GPU ids" in done.stderr and "more than the 4096" in done.stderr
    job = {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "nid[0-99999999999]"}
    done = _cli("facts", "--json", env=job)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["slurm"]["hosts"] == []  # unknown, not 10^11 names


def test_local_ranks_are_capped_and_the_cap_can_be_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HPCENV_MAX_RANKS", raising=False)
    cap, why = runner.rank_cap()
    assert cap >= 2 and "CPUs" in why
    with pytest.raises(BadInput, match=f"more than {cap} .*HPCENV_MAX_RANKS=1000"):
        runner.check_ranks(1000)
    assert runner.check_ranks(cap) == cap
    monkeypatch.setenv("HPCENV_MAX_RANKS", "1000")
    assert runner.check_ranks(1000) == 1000
    monkeypatch.setenv("HPCENV_MAX_RANKS", "lots")
    with pytest.raises(BadInput, match="HPCENV_MAX_RANKS"):
        runner.check_ranks(2)


@pytest.mark.slow
@pytest.mark.slow
def test_hung_nvidia_smi_and_fi_info_are_reported_as_hung(tmp_path: Path) -> None:
    """Stand-ins for an nvidia-smi and an fi_info that never answer (a stuck GPU, a
    provider probing stuck hardware): facts says they hang, after the facts timeout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("nvidia-smi", "fi_info"):
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\nexec sleep 600\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HPCENV_NO_NVML": "1",
        "HPCENV_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    # the JSON and the table side by side: each waits out the same timeouts, on no CPU
    with ThreadPoolExecutor(2) as pool:
        as_json = pool.submit(_cli, "facts", "--json", env=env)
        as_table = pool.submit(_cli, "facts", env={**env, "COLUMNS": "400"})
        done, table = as_json.result(), as_table.result()
    assert done.returncode == 0, done.stderr
    warnings = json.loads(done.stdout)["warnings"]
    assert any(w.startswith("nvidia-smi did not answer within 5 s") for w in warnings), warnings
    assert any(w.startswith("fi_info -l did not answer within 5 s") for w in warnings), warnings
    assert "nvidia-smi did not answer within 5 s and was stopped: it hangs" in table.stdout
