"""The test cluster's own command line (``nox -s cluster`` runs it): ``up`` starts daemons
that outlive it and writes env.sh, ``down`` leaves no process, namespace, link or file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO, require
from support import cluster as machinery

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CLI = [sys.executable, str(REPO / "tests" / "support" / "cluster.py")]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120, check=False)


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def test_up_writes_env_sh_and_down_leaves_nothing(tmp_path: Path) -> None:
    lacking = machinery.missing()
    require("netns", not lacking, "; ".join(lacking))
    root = tmp_path / "c"
    up = _cli("up", "--nodes", "2", "--slow", "node2", "--rate", "200mbit", "--root", str(root))
    assert up.returncode == 0, up.stderr
    state = json.loads((root / "state.json").read_text())
    try:
        # the daemons outlived 'up'; a shell that sources env.sh reaches them
        ran = subprocess.run(
            ["bash", "-c", '. "$1" && srun -N2 -n2 hostname | sort', "-", str(root / "env.sh")],
            capture_output=True, text=True, timeout=60, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        )  # fmt: skip
        assert ran.stdout.split() == ["node1", "node2"], ran.stderr
        prefix = state["prefix"]
        qdisc = subprocess.run(
            ["tc", "qdisc", "show", "dev", f"{prefix}2e"], capture_output=True, text=True
        ).stdout
        assert "tbf" in qdisc and "200Mbit" in qdisc, qdisc
        assert (
            "tbf"
            not in subprocess.run(
                ["tc", "qdisc", "show", "dev", f"{prefix}1e"], capture_output=True, text=True
            ).stdout
        )
        again = _cli("up", "--root", str(root))
        assert again.returncode == 2 and "holds a cluster already" in again.stderr
    finally:
        down = _cli("down", "--root", str(root))
    assert down.returncode == 0, down.stderr
    assert not root.exists()
    for d in state["daemons"]:
        assert not machinery.running(machinery.Daemon(**d)), f"{d['name']} still runs"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert state["prefix"] not in netns and state["prefix"] not in _links()


def test_bad_input_is_one_line_and_nothing_is_made(tmp_path: Path) -> None:
    require("netns", not machinery.missing(), "; ".join(machinery.missing()))
    bad = _cli("up", "--nodes", "2", "--slow", "node7", "--root", str(tmp_path / "c"))
    assert bad.returncode == 2
    first = bad.stderr.strip().splitlines()[0]
    m = re.fullmatch(
        r"cluster: the test cluster \((hc[0-9a-f]{4})\) failed to start: --slow node7: "
        r"no such node; the cluster has node1, node2",
        first,
    )
    assert m, first
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert m.group(1) not in _links() and m.group(1) not in netns  # made, then removed
    assert not (tmp_path / "c").exists()
    rate = _cli("up", "--rate", "fast", "--root", str(tmp_path / "c"))
    assert rate.returncode == 2 and rate.stderr.startswith("cluster: --rate 'fast': write it")
    nothing = _cli("down", "--root", str(tmp_path / "none"))
    assert nothing.returncode == 2 and "no cluster recorded" in nothing.stderr


def test_without_root_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(machinery.ClusterError, match=r"^the test cluster needs root \("):
        machinery.up(tmp_path / "u")
    assert not (tmp_path / "u").exists()


OWNER = """\
import sys, time
sys.path.insert(0, sys.argv[2])
from support import cluster
c = cluster.up(__import__("pathlib").Path(sys.argv[1]), nodes=1)
print(c.state.prefix, flush=True)
time.sleep(600)
"""


def test_a_killed_session_s_cluster_dies_with_it_and_is_reaped(tmp_path: Path) -> None:
    """A pytest killed before its cleanup (SIGKILL, a broken pipe): its daemons die with
    it (PDEATHSIG), and the next 'up' (here: reap) removes its namespaces and links."""
    require("netns", not machinery.missing(), "; ".join(machinery.missing()))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "c"), str(REPO / "tests")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None
        prefix = owner.stdout.readline().strip()
    finally:
        owner.kill()
        owner.wait()
    assert prefix.startswith("hc"), prefix
    state = machinery.State.load_file(machinery.REGISTRY / f"{prefix}.json")
    daemons = state.daemons
    deadline = time.monotonic() + 20
    while any(machinery.running(d) for d in daemons) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(machinery.running(d) for d in daemons), "daemons outlived their owner"
    assert prefix in _links()  # what the kernel keeps until someone removes it
    assert prefix in machinery.reap()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in _links() and prefix not in netns
    assert not (machinery.REGISTRY / f"{prefix}.json").exists()
