"""The ray probe run for real: a local Ray on 127.0.0.1 (2 CPUs), one task per node,
GPU resources equal to the allocation (none here), shut down afterwards."""

from __future__ import annotations

from pathlib import Path

from conftest import require
from hpcenv import runner
from hpcenv.results import Status
from probe_env import has_ray, load_probe, probe_python  # noqa: F401 - fixture

ray_probe = load_probe("ray")


def test_local_ray_runs_tasks_on_every_node(probe_python: Path, tmp_path: Path) -> None:  # noqa: F811
    require("ray", has_ray(probe_python), "ray could not be installed from PyPI")
    spec = runner.ProbeSpec(
        name="ray", python=probe_python, timeout_s=240, env={"CUDA_VISIBLE_DEVICES": ""}
    )
    result = runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)
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
