"""hpcenv across nodes, on a real three-node SLURM (``cluster`` fixture, tests/support/cluster.py).

Every node is a network namespace with its own hostname (node1..node3), a node network
(eth0, where the names resolve) and a second one (hsn0), one slurmd each; node3's links
are throttled. What runs here is what a user runs: ``hpcenv sbatch ... --submit --wait``
and ``hpcenv probe`` inside ``salloc``, real srun across the nodes, real gloo ranks on
CPU torch, real Ray. A failing test prints the daemon logs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import require
from support.probe_env import has_ray
from support.slurm_cluster import SlurmCluster, local_profile

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("daemon_logs")]

#: What one node reports about itself (run with the system's python3 on every node).
WHOAMI = """\
import json, socket, subprocess
names = ["node1", "node2", "node3", "node1-hsn", "node3-hsn"]
addrs = json.loads(subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True,
                                  text=True, check=True).stdout)
print(json.dumps({
    "hostname": socket.gethostname(),
    "resolves": {n: socket.gethostbyname(n) for n in names},
    "interfaces": {a["ifname"]: a["addr_info"][0]["local"] for a in addrs if a["addr_info"]},
}))
"""


def _hpcenv(
    cluster: SlurmCluster, tmp_path: Path, *argv: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", *argv],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=timeout, check=False,
    )  # fmt: skip


def _sbatch_wait(
    cluster: SlurmCluster, tmp_path: Path, prof: Path, target: str, venv: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    """``hpcenv sbatch PROFILE TARGET ... --submit --wait --json``: (exit code, report, stderr)."""
    done = _hpcenv(cluster, tmp_path, "sbatch", str(prof), target, "--env", str(venv),
                   *extra, "--submit", "--wait", "--json")  # fmt: skip
    try:
        report = json.loads(done.stdout)
    except ValueError:
        pytest.fail(
            f"no JSON report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}\n"
            f"{cluster.log_text()}"
        )
    return done.returncode, report, done.stderr


def test_each_node_has_its_name_two_networks_and_resolves_the_others(
    cluster: SlurmCluster,
) -> None:
    out = cluster.run("srun", "-N3", "-n3", "--", "python3", "-c", WHOAMI, timeout=60).stdout
    seen = {r["hostname"]: r for r in map(json.loads, out.splitlines())}
    assert sorted(seen) == ["node1", "node2", "node3"], out
    info = {n: cluster.node_info(n) for n in seen}
    for name, r in seen.items():
        assert r["interfaces"] == {"lo": "127.0.0.1", "eth0": info[name].eth0,
                                   "hsn0": info[name].hsn0}  # fmt: skip
        assert r["resolves"] == {
            "node1": info["node1"].eth0, "node2": info["node2"].eth0,
            "node3": info["node3"].eth0, "node1-hsn": info["node1"].hsn0,
            "node3-hsn": info["node3"].hsn0,
        }  # fmt: skip
    assert cluster.state.slow == ["node3"]


def test_sbatch_nccl_on_two_nodes_checks_every_element_over_the_profiles_interface(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """The user's command across two hosts; the profile sends gloo over hsn0 (a second
    network, not the one the host names resolve to), and the links' byte counters show
    the allreduce went there."""
    prof = local_profile(tmp_path, '\n[env.multi_node]\nGLOO_SOCKET_IFNAME = "hsn0"\n')
    before = cluster.link_bytes()
    code, report, err = _sbatch_wait(
        cluster, tmp_path, prof, "nccl", torch_python.parent.parent, "--nodes", "2"
    )
    after = cluster.link_bytes()
    assert code == 0, f"{err}\n{json.dumps(report)[:3000]}"
    (nccl,) = report["results"]
    assert nccl["status"] == "pass", nccl["summary"]
    hosts = sorted(nccl["hosts"])
    assert len(hosts) == 2 and set(hosts) <= {"node1", "node2", "node3"}
    assert [r["host"] for r in nccl["ranks"]] == [hosts[0]] * 2 + [hosts[1]] * 2
    assert "4 ranks on 2 hosts" in nccl["summary"]
    rows = nccl["ranks"][0]["details"]["sizes"]
    assert nccl["metrics"]["world_size"] == 4 and nccl["metrics"]["wrong"] == 0
    assert rows[-1]["bytes"] == 64 * 2**20 and all(r["wrong"] == 0 for r in rows)
    for host in hosts:  # the sweep moves > 64 MiB through every rank's links
        hsn = after[host]["hsn0"] - before[host]["hsn0"]
        eth = after[host]["eth0"] - before[host]["eth0"]
        assert hsn > 64 * 2**20, (host, hsn, eth)
        assert eth < hsn / 10, (host, hsn, eth)  # only SLURM, the store, the logs


def test_ray_probe_on_two_nodes_workers_on_the_node_network(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """Head on the first host, a worker on the second, both alive, one task each; the
    nodes' addresses are those of the network the host names resolve to (what SLURM
    uses), never loopback or the second network; nothing of Ray is left afterwards."""
    require("ray", has_ray(torch_python), "ray could not be installed from PyPI")
    code, report, err = _sbatch_wait(
        cluster,
        tmp_path,
        local_profile(tmp_path),
        "ray",
        torch_python.parent.parent,
        "--nodes",
        "2",
    )
    assert code == 0, f"{err}\n{json.dumps(report)[:3000]}"
    (ray,) = report["results"]
    details = ray["ranks"][0]["details"]
    assert ray["status"] == "pass" and details["nodes"] == 2, ray["summary"]
    hosts = details["task_hosts"]
    assert len(hosts) == 2
    ips = sorted(k.split(":", 1)[1] for k in details["resources"] if k.startswith("node:1"))
    assert ips == sorted(cluster.node_info(h).eth0 for h in hosts)
    assert details["address"].split(":")[0] == cluster.node_info(hosts[0]).eth0
    deadline = time.monotonic() + 30
    while (left := _ray_processes(cluster, hosts)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"Ray processes left on the nodes: {left}"


def _ray_processes(cluster: SlurmCluster, hosts: list[str]) -> list[str]:
    out = []
    for host in hosts:
        ns = cluster.node_info(host).netns
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              check=False).stdout.split()  # fmt: skip
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "ray" in cmd and "slurmd" not in cmd:
                out.append(f"{host}: {pid} {cmd[:120]}")
    return out


def test_a_rank_killed_mid_probe_is_named_with_its_host(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """``hpcenv probe nccl`` inside an allocation of node1 and node3 (slow, so the sweep
    lasts); the rank on node3 is SIGKILLed once it runs: the report names rank 1 on node3
    as the one that died, and the probe ends long before its timeout."""
    results = tmp_path / "ranks"
    proc = subprocess.Popen(
        ["salloc", "-N2", "--ntasks-per-node=1", "-w", "node1,node3", "--",
         sys.executable, "-m", "hpcenv", "probe", "nccl", "--env", str(torch_python),
         "--profile", str(local_profile(tmp_path)), "--nccl-sizes", "32M:32M", "--timeout", "240",
         "--results-dir", str(results), "--json"],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        started = results / "nccl.rank1.started"
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert started.exists(), f"rank 1 never started\n{cluster.log_text()}"
        info = json.loads(started.read_text())
        assert info["host"] == "node3"
        time.sleep(3.0)  # into the sweep: 32 MiB at 100 Mbit/s is ~3 s per allreduce
        killed_at = time.monotonic()
        os.kill(int(info["pid"]), signal.SIGKILL)
        out, err = proc.communicate(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    ended_after = time.monotonic() - killed_at
    assert proc.returncode == 5, f"{out}\n{err}"
    (nccl,) = json.loads(out)["results"]
    by_rank = {r["rank"]: r for r in nccl["ranks"]}
    assert nccl["status"] in ("error", "fail")
    assert by_rank[1]["host"] == "node3" and by_rank[1]["status"] == "error", by_rank[1]
    assert "rank 1 on host node3" in by_rank[1]["summary"]
    assert "killed" in by_rank[1]["summary"].lower(), by_rank[1]["summary"]
    assert nccl["summary"].startswith("rank 1 on host node3"), nccl["summary"]
    assert ended_after < 120, f"the probe ran on for {ended_after:.0f} s after the kill"


def test_a_node_with_other_modules_is_named_in_the_odd_node_report(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """node3's tasks get another module list (its own environment, through the TaskProlog,
    as a node's profile scripts would): the nccl report fails and names node3."""
    common, odd = "gcc/12.2:cuda/12.6:nccl/2.21", "gcc/12.2:cuda/12.4:nccl/2.21"
    for node in cluster.nodes:
        cluster.set_node_env(node, {"LOADEDMODULES": odd if node == "node3" else common})
    try:
        prof = (
            local_profile(tmp_path)
            .read_text()
            .replace("nccl_max_bytes = 67108864", "nccl_max_bytes = 65536")
        )
        (tmp_path / "small.toml").write_text(prof)
        code, report, err = _sbatch_wait(
            cluster, tmp_path, tmp_path / "small.toml", "nccl", torch_python.parent.parent,
            "--nodes", "3",
        )  # fmt: skip
    finally:
        for node in cluster.nodes:
            cluster.set_node_env(node, None)
    assert code == 5, err
    (nccl,) = report["results"]
    assert nccl["status"] == "fail"
    (odd_one,) = nccl["inconsistent"]
    assert odd_one["key"] == "modules" and odd_one["hosts"] == ["node3"]
    assert odd_one["value"] == odd.split(":") and odd_one["majority"] == common.split(":")
    assert odd_one["ranks"] == [4, 5]
    assert "node3" in nccl["remedy"] and "node1" not in nccl["remedy"]
    assert nccl["metrics"]["wrong"] == 0  # the values were right: the stack differs


def _small_profile(tmp_path: Path, max_bytes: int, extra: str = "") -> Path:
    """The test profile with another nccl_max_bytes (the size a pair times)."""
    text = local_profile(tmp_path, extra).read_text()
    path = tmp_path / f"max{max_bytes}.toml"
    path.write_text(text.replace("nccl_max_bytes = 67108864", f"nccl_max_bytes = {max_bytes}"))
    return path


def test_bad_node_finder_excludes_the_slow_node_and_only_it(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """``hpcenv sbatch PROFILE nccl --nodes 3 --pairs --submit --wait --json`` on the cluster
    whose node3 is capped at 100 Mbit/s: every node's check passes, three rounds of one
    pair each, node3's pairs ~50x slower (8 MiB allreduces), exclude == ["node3"]."""
    page = tmp_path / "pairs.html"
    code, report, err = _sbatch_wait(
        cluster, tmp_path, _small_profile(tmp_path, 8 << 20), "nccl",
        torch_python.parent.parent, "--nodes", "3", "--pairs", "--html", str(page),
    )  # fmt: skip
    assert code == 5, err  # a node to exclude fails the run
    _the_page_shows_each_node_and_the_matrix(page, tmp_path)
    assert report["exclude"] == ["node3"], json.dumps(report["pairs"], indent=1)
    assert "exclude these nodes: --exclude=node3" in err
    found = report["pairs"]
    assert found["exclude_option"] == "--exclude=node3"
    by_pair = {tuple(sorted(p["hosts"])): p for p in found["pairs"]}
    assert set(by_pair) == {("node1", "node2"), ("node1", "node3"), ("node2", "node3")}
    assert all(p["status"] == "pass" and p["wrong"] == 0 for p in by_pair.values())
    assert all(p["bytes"] == 8 << 20 for p in by_pair.values())
    fast = by_pair["node1", "node2"]["busbw_gbps"]
    slow = max(by_pair["node1", "node3"]["busbw_gbps"], by_pair["node2", "node3"]["busbw_gbps"])
    assert fast > 10 * slow, (fast, slow)
    assert slow < 0.0125  # 100 Mbit/s is 0.0125 GB/s: tbf holds
    nodes = {v["host"]: v for v in found["nodes"]}
    assert all(v["check"] == "pass" for v in nodes.values())
    assert [h for h, v in nodes.items() if v["exclude"]] == ["node3"]
    checks = [r for r in report["results"] if r["name"].startswith("nccl node")]
    assert [r["name"] for r in checks[:3]] == ["nccl node1", "nccl node2", "nccl node3"]
    assert all(list(r["hosts"]) == [r["name"].split()[1]] for r in checks[:3])
    print(f"bad-node finder: {found['seconds']:.1f} s; pairs " + ", ".join(
        f"{'+'.join(k)} {p['busbw_gbps']:.3g} GB/s" for k, p in by_pair.items()
    ))  # fmt: skip


def _the_page_shows_each_node_and_the_matrix(page: Path, tmp_path: Path) -> None:
    """``sbatch --wait --html``'s page in headless Chromium (screenshot beside it): each
    node's busbw curve, each pair's point, the matrix with node3 marked."""
    import re

    from support.browser import open_page

    dom, console = open_page(page, tmp_path)
    assert console == []
    series = re.findall(r'<g class="series" data-series="([^"]+)">', dom)
    for node in ("node1", "node2", "node3"):
        assert series.count(f"nccl {node}") == 2  # busbw and algbw
    assert {s for s in series if "+" in s} == {"nccl node1+node2", "nccl node1+node3",
                                               "nccl node2+node3"}  # fmt: skip
    matrix = dom.split('<table class="pairs">', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<th class="excluded">([^<]+)</th>', matrix) == ["node3", "node3"]
    assert matrix.count('class="pair excluded"') == 4


def test_bad_node_finder_names_a_node_whose_pairs_fail(
    cluster: SlurmCluster, torch_python: Path, tmp_path: Path
) -> None:
    """The profile sends gloo over hsn0; node2's hsn0 link is cut (SLURM, on eth0, still
    reaches it). node2's own check passes (its ranks talk locally); its pairs fail (gloo
    gives up on the unreachable peer after ~10 s; a pair that hung would end at its own
    30 s timeout) and the rounds go on: node2 is excluded, its partners are not."""
    prof = _small_profile(tmp_path, 1 << 20, '\n[env.multi_node]\nGLOO_SOCKET_IFNAME = "hsn0"\n')
    veth = cluster.node_info("node2").veths[1]
    subprocess.run(["ip", "link", "set", veth, "down"], check=True)
    try:
        start = time.monotonic()
        done = subprocess.run(
            ["salloc", "-N3", "--ntasks-per-node=2", "--", sys.executable, "-m", "hpcenv",
             "probe", "nccl", "--pairs", "--env", str(torch_python), "--profile", str(prof),
             "--timeout", "30", "--results-dir", str(tmp_path / "ranks"), "--json"],
            env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
            capture_output=True, text=True, cwd=tmp_path, timeout=400, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - start
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
    assert done.returncode == 5, done.stderr
    report = json.loads(done.stdout)
    assert report["exclude"] == ["node2"], json.dumps(report["pairs"], indent=1)
    by_pair = {tuple(sorted(p["hosts"])): p for p in report["pairs"]["pairs"]}
    assert by_pair["node1", "node3"]["status"] == "pass"
    for pair in (("node1", "node2"), ("node2", "node3")):
        assert by_pair[pair]["status"] in ("fail", "error"), by_pair[pair]
        assert by_pair[pair]["busbw_gbps"] == 0.0
    assert {v["host"]: v["check"] for v in report["pairs"]["nodes"]}["node2"] == "pass"
    assert seconds < 3 * 30 + 90, f"the rounds took {seconds:.0f} s"
