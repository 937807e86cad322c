"""flash-attn decisions on stand-in GPU nodes: skip, official wheel, or a sized build."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcenv.decide.flashattn import build_archs, build_jobs, decide
from hpcenv.decide.torch_variant import resolve_torch
from hpcenv.facts import collect
from hpcenv.models import facts as facts_model
from hpcenv.models.plan import FlashAttnChoice
from hpcenv.utils.errors import BadInput
from support import FACTS
from support.fakenodes import node

GH200 = collect.load(FACTS / "gh200-isambard.json")
V100 = collect.load(FACTS / "v100-supercloud.json")


def _decide(
    facts: facts_model.Facts, spec: str, mode: str = "auto", python: str = "3.11"
) -> FlashAttnChoice:
    return decide(facts, resolve_torch(facts, spec), mode=mode, version="2.8.3", python=python)


@pytest.mark.parametrize("spec", ["==2.11.0", "==2.13.0"])
def test_v100_skips_with_sdpa_fallback(spec: str) -> None:
    fa = _decide(V100, spec)
    assert fa.action == "skip"
    assert "8.0" in fa.reason and "SDPA" in fa.reason and "V100" in fa.reason


def test_one_old_gpu_among_new_ones_skips() -> None:
    fa = _decide(node("x86_64", "580.95.05", ("8.0", "7.5")), "==2.13.0")
    assert fa.action == "skip"


def test_cpu_node_skips() -> None:
    fa = _decide(node("x86_64", None), "==2.13.0")
    assert fa.action == "skip" and "cpu" in fa.reason


def test_gh200_builds_for_90_with_safe_jobs() -> None:
    fa = _decide(GH200, "==2.9.1", python="3.12")
    assert fa.action == "build"
    assert fa.cuda_archs == ("90",)
    assert "aarch64" in fa.reason
    assert fa.max_jobs is not None and fa.nvcc_threads is not None
    assert fa.max_jobs * 9 <= 854 * 0.75  # flash-attn's released rule: 9 GB per 4-thread job
    assert fa.max_jobs <= 288 // 2 and fa.nvcc_threads == 4


def test_x86_a100_gets_the_official_wheel_where_one_exists() -> None:
    a100 = node("x86_64", "580.95.05", ("8.0",))
    fa = _decide(a100, "==2.8.0", python="3.11")
    assert fa.action == "wheel"
    assert fa.wheel_url is not None
    assert fa.wheel_url.endswith(
        "/v2.8.3/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    )


def test_no_wheel_for_a_cuda13_torch_so_build() -> None:
    fa = _decide(node("x86_64", "580.95.05", ("8.0",)), "==2.13.0")
    assert fa.action == "build" and "CUDA 13" in fa.reason


def test_86_and_89_build_the_sm80_code_flash_attn_knows() -> None:
    assert build_archs(("8.6", "8.9")) == ("80",)
    assert build_archs(("8.0", "9.0")) == ("80", "90")
    assert build_archs(("12.0",)) == ("120",)


def test_small_login_node_gets_one_job() -> None:
    jobs = build_jobs(8, 16.0)
    assert (jobs.max_jobs, jobs.nvcc_threads) == (1, 4)  # 12 GB planned: one 9 GB job
    assert "MAX_JOBS=1" in jobs.why and "setup.py" in jobs.why


def test_too_little_memory_for_one_job_lowers_nvcc_threads() -> None:
    """The released rule would still run one 9 GB job; hpcenv lowers NVCC_THREADS instead."""
    jobs = build_jobs(8, 8.0)  # 6 GB planned
    assert (jobs.max_jobs, jobs.nvcc_threads) == (1, 2)
    assert "NVCC_THREADS lowered to 2" in jobs.why


def test_unknown_memory_is_conservative() -> None:
    jobs = build_jobs(None, None)
    assert (jobs.max_jobs, jobs.nvcc_threads) == (1, 2)


@given(cpus=st.integers(1, 1024), mem=st.floats(0.5, 4096))
def test_build_jobs_fit_cores_and_memory(cpus: int, mem: float) -> None:
    jobs = build_jobs(cpus, mem)
    assert jobs.max_jobs >= 1 and jobs.nvcc_threads >= 1
    assert jobs.max_jobs <= max(1, cpus // 2)
    if jobs.max_jobs > 1:
        assert jobs.max_jobs * 9 <= mem * 0.75 + 1e-9
    if jobs.nvcc_threads > 1:
        assert jobs.max_jobs * jobs.nvcc_threads * 9 / 4 <= mem * 0.75 + 1e-9


def test_forced_wheel_where_none_exists_is_refused() -> None:
    with pytest.raises(BadInput, match=re.escape("no official flash-attn 2.8.3 wheel for aarch64")):
        _decide(GH200, "==2.9.1", mode="wheel", python="3.12")


def test_forced_build_on_volta_is_refused() -> None:
    with pytest.raises(BadInput, match=re.escape("compute capability >= 8.0")):
        _decide(V100, "==2.11.0", mode="build")


def test_forced_build_where_a_wheel_exists_builds() -> None:
    fa = _decide(node("x86_64", "580.95.05", ("8.0",)), "==2.8.0", mode="build")
    assert fa.action == "build" and "forces" in fa.reason


def test_skip_mode() -> None:
    fa = _decide(GH200, "==2.9.1", mode="skip")
    assert fa.action == "skip" and "mode = 'skip'" in fa.reason
