"""The jax probe run for real in the shared probe venv (CPU jax 0.7.2 from PyPI): two local
ranks form one JAX job (``jax.distributed`` with gloo collectives) and a psum over both
processes' devices returns the sum of what each put in; a rank alone reports its devices.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.models.results import Status
from hpcenv.runner import probes as runner
from support import require
from support.probe_env import has_jax, load_probe

jax_probe = load_probe("jax")


def test_expected_sum() -> None:
    assert jax_probe.expected_sum(2, 1) == 3.0
    assert jax_probe.expected_sum(4, 2) == 20.0


@pytest.mark.slow
def test_two_processes_psum_on_cpu(probe_python: Path, tmp_path: Path) -> None:
    require("jax", has_jax(probe_python), "jax could not be installed from PyPI")
    spec = runner.ProbeSpec(
        name="jax", python=probe_python, ranks=2, timeout_s=180,
        env={"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    result = runner.run_probe(spec, launcher=runner.LocalLauncher(), result_dir=tmp_path)
    assert result.status is Status.PASS, result.summary + result.ranks[0].stderr_tail
    assert len(result.ranks) == 2
    assert "psum over 2 device(s) of 2 processes = 3.0" in result.summary
    assert result.metrics["processes"] == 2
