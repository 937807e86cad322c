"""pytest fixtures for the real SLURM clusters the tests start (all made by ``cluster.py``).

- ``slurm``: one node (``node1``), for the tests of one allocation;
- ``cluster``: three nodes, ``node3`` throttled (``--slow node3``), for the multi-node
  tests and the bad-node finder;
- ``gres_cluster``: one node with four stand-in GPUs as GRES (``--gres gpu:tstgpu:4``),
  for ``hpcenv profile init``/``check`` (no GPUs here: a fake nvidia-smi stands in).
- ``cluster4``: four nodes, ``node3`` throttled, for a three-node job that must requeue
  itself without the slow node (``test_survive_slurm.py``).

A test asks for the fixture by name (``tests/conftest.py`` registers them). Each is started
once per test session, by the first test that asks, and stopped at the session's end,
exactly what it made (see ``cluster.py``); startup failures carry the daemon logs.
Without root, iproute2 or the SLURM binaries the tests skip (fail under
``HPCENV_REQUIRE_ALL=1``: components "slurm" and "netns").

With ``cluster``: ``pytest.mark.usefixtures("daemon_logs")`` prints the daemons' logs
after each test; ``local_profile`` writes the ``local`` profile with its logs under the
test's directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import REPO, require
from support import cluster as machinery

SlurmCluster = machinery.Cluster

#: Clusters of this session by name, started by the first test that asks for them.
_STARTED: dict[str, Any] = {}


def missing_binaries() -> list[str]:
    return machinery.missing()


def start_cluster(root: Path, *, nodes: int = 1, slow: tuple[str, ...] = ()) -> SlurmCluster:
    """A cluster under ``root`` (the bench's and the fixtures' one way to start one)."""
    return machinery.up(root, nodes=nodes, slow=slow)


def stop_cluster(cluster: SlurmCluster) -> None:
    left = machinery.down(cluster.root, cluster=cluster)
    assert not left, f"the test cluster left {left} behind"


def _session_cluster(
    name: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, **kw: Any
) -> Iterator[SlurmCluster]:
    lacking = machinery.missing()
    component = "netns" if any("root" in x or "iproute2" in x for x in lacking) else "slurm"
    require(component, not lacking, f"the test cluster needs {'; '.join(lacking)}")
    if name not in _STARTED:
        root = tmp_path_factory.mktemp(name)
        try:
            _STARTED[name] = machinery.up(root / "c", **kw)
        except machinery.ClusterError as exc:
            pytest.fail(str(exc), pytrace=False)
        request.session.config.add_cleanup(lambda: stop_cluster(_STARTED.pop(name)))
    started: SlurmCluster = _STARTED[name]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(started.conf))
        for key in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if key != "SLURM_CONF":
                mp.delenv(key)
        yield started


@pytest.fixture(scope="session", name="slurm")
def slurm_cluster_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmCluster]:
    """One node (node1) in its own network namespace."""
    yield from _session_cluster("slurm", request, tmp_path_factory, nodes=1)


@pytest.fixture(scope="session", name="cluster")
def multinode_cluster_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmCluster]:
    """Three nodes, node3's links throttled to 100 Mbit/s both ways."""
    yield from _session_cluster("cluster", request, tmp_path_factory, nodes=3, slow=("node3",))


@pytest.fixture(scope="session", name="gres_cluster")
def gres_cluster_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmCluster]:
    """One node (node1) whose SLURM schedules 4 GPUs of type tstgpu (stand-in devices)."""
    yield from _session_cluster(
        "gres_cluster", request, tmp_path_factory, nodes=1, gres="gpu:tstgpu:4"
    )


@pytest.fixture(scope="session", name="cluster4")
def four_node_cluster_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmCluster]:
    """Four nodes, node3's links throttled to 100 Mbit/s both ways: a three-node job
    lands on node1-3 first and has a fourth node to go to without node3."""
    yield from _session_cluster("cluster4", request, tmp_path_factory, nodes=4, slow=("node3",))


@pytest.fixture(name="daemon_logs")
def daemon_logs_fixture(cluster: SlurmCluster) -> Iterator[None]:
    """The daemons' logs, printed after each test: pytest shows them when it failed
    (a module asks for it with ``pytest.mark.usefixtures("daemon_logs")``)."""
    yield
    print(cluster.log_text())


def local_profile(tmp_path: Path, extra: str = "", *, scratch: bool = False) -> Path:
    """envs/local.toml with its logs (and with ``scratch``, its scratch) under tmp_path,
    plus ``extra`` TOML."""
    where = f'log_dir = "{tmp_path / "logs"}"'
    if scratch:
        where += f'\nscratch = "{tmp_path / "scratch"}"'
    text = (REPO / "envs" / "local.toml").read_text().replace('log_dir = "logs"', where)
    path = tmp_path / "local.toml"
    path.write_text(text + extra)
    return path


def submit_job(
    cluster: SlurmCluster, tmp_path: Path, venv: Path, *args: str, wait: bool = True
) -> subprocess.CompletedProcess[str]:
    """``hpcenv sbatch PROFILE --env VENV ARGS`` with --submit (and --wait): the local
    profile with its logs and scratch under ``tmp_path``, on ``cluster``."""
    opts, cmd = list(args), []
    if "--" in args:
        i = args.index("--")
        opts, cmd = list(args[:i]), list(args[i:])
    profile = local_profile(tmp_path, scratch=True)
    return subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", str(profile), "--env", str(venv),
         *opts, "--submit", *(["--wait"] if wait else []), *cmd],
        env={**cluster.env, "HPCENV_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip


def submitted_id(done: subprocess.CompletedProcess[str]) -> str:
    """The id ``hpcenv sbatch --submit`` printed."""
    m = re.search(r"submitted job (\d+)", done.stdout + done.stderr)
    assert m, done.stdout + done.stderr
    return m.group(1)
