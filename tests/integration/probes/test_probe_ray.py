"""The ray probe run for real: a local Ray on 127.0.0.1 (2 CPUs), one task per node,
GPU resources equal to the allocation (none here), shut down afterwards.

Ray 2.60's gcs_server and raylet listen on every interface even when told
``--node-ip-address=127.0.0.1``, so where it can (root, ``unshare`` and ``ip``) the test
runs the probe in a new network namespace that has only the loopback interface: then
nothing Ray opens is reachable from outside this machine's loopback.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support import require
from support.netns import LOOPBACK_ONLY, can_unshare_net
from support.probe_env import has_ray, load_probe

ray_probe = load_probe("ray")


@dataclass(frozen=True)
class LoopbackOnlyLauncher:
    """LocalLauncher whose ranks run in a network namespace with only ``lo``."""

    inner: runner.LocalLauncher

    def start(self, argv: Sequence[str], env: Mapping[str, str], ranks: int) -> list[Any]:
        wrapped = ["unshare", "--net", "--", "sh", "-c", LOOPBACK_ONLY, *argv]
        return self.inner.start(wrapped, env, ranks)

    def hosts_for(self, ranks: int) -> list[str]:
        return self.inner.hosts_for(ranks)

    @property
    def nodes(self) -> int:
        return self.inner.nodes

    def default_ranks(self) -> int:
        return self.inner.default_ranks()

    def rank_exit_codes(self, env: Mapping[str, str], ranks: int, codes: Any) -> list[Any]:
        return self.inner.rank_exit_codes(env, ranks, codes)


@pytest.mark.slow
def test_local_ray_runs_tasks_on_every_node(probe_python: Path, tmp_path: Path) -> None:
    require("ray", has_ray(probe_python), "ray could not be installed from PyPI")
    spec = runner.ProbeSpec(
        name="ray", python=probe_python, timeout_s=240, env={"CUDA_VISIBLE_DEVICES": ""}
    )
    launcher: Any = runner.LocalLauncher()
    if can_unshare_net():
        launcher = LoopbackOnlyLauncher(launcher)
        interfaces = subprocess.run(
            [
                "unshare",
                "--net",
                "--",
                "sh",
                "-c",
                LOOPBACK_ONLY,
                str(probe_python),
                "-c",
                "import socket; print(sorted(n for _, n in socket.if_nameindex()))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert interfaces == "['lo']"  # what Ray can bind to in there
    result = runner.run_probe(spec, launcher=launcher, result_dir=tmp_path)
    assert result.status is Status.PASS, result.summary + result.ranks[0].stderr_tail
    assert result.metrics["nodes"] == 1
    assert result.metrics["gpus"] == 0
    assert result.metrics["cpus"] == 2
    details = result.ranks[0].details
    assert details["task_hosts"]
    assert details["address"].startswith("local")


def test_visible_gpus_from_allocation() -> None:
    assert ray_probe.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 8) == 4
    assert ray_probe.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, 4) == 0
    assert ray_probe.visible_gpus({"SLURM_GPUS_ON_NODE": "4"}, 8) == 4
    assert ray_probe.visible_gpus({}, 2) == 2
