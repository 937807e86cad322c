"""The resolver's rules on stand-in GPU nodes (fakenodes) and recorded facts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FACTS
from fakenodes import node
from hpcenv import facts_model, knowledge
from hpcenv.errors import BadInput, NoCompatibleBuild
from hpcenv.knowledge import cap_key, cuda_key, driver_key, variant_cuda
from hpcenv.resolve import (
    DEFAULT_INDEX_URL,
    assess,
    index_base,
    pick_version,
    resolve_torch,
    try_resolve_torch,
)

GH200 = facts_model.load(FACTS / "gh200-isambard.json")
V100 = facts_model.load(FACTS / "v100-supercloud.json")
RTX = facts_model.load(FACTS / "rtx6000-brtx.json")


@pytest.mark.parametrize("spec", ["==2.9.1", "==2.13.0"])
def test_gh200_on_565_gets_cu126(spec: str) -> None:
    choice = resolve_torch(GH200, spec)
    assert choice.backend == "cu126"
    assert choice.index_url == f"{DEFAULT_INDEX_URL}/cu126"
    text = "\n".join(choice.reasons)
    assert "driver 565.57.01 runs CUDA <= 12.6 builds outright (12.8 needs >= 570.26)" in text
    assert "cu126 carries sm_90 for the 4 x NVIDIA GH200 120GB" in text
    assert choice.warnings == ()


def test_gh200_reasons_explain_pypi() -> None:
    old = resolve_torch(GH200, "==2.9.1")
    assert "PyPI's aarch64 torch 2.9.1 is a CPU build; using the cu126 index" in old.reasons
    new = resolve_torch(GH200, "==2.13.0")
    assert any("PyPI's aarch64 torch 2.13.0 is the cu130 build" in r for r in new.reasons)


@pytest.mark.parametrize("spec", ["==2.11.0", "==2.13.0", ">=2.11"])
def test_v100_gets_cu126(spec: str) -> None:
    choice = resolve_torch(V100, spec)
    assert choice.backend == "cu126"
    assert any("no sm_70" in r and "cu130" in r for r in choice.reasons)


def test_v100_on_torch_2_10_keeps_cu128_which_still_has_sm70() -> None:
    assert resolve_torch(V100, "==2.10.0").backend == "cu128"


@pytest.mark.parametrize("spec", ["==2.9.1", "==2.10.0", "==2.11.0"])
def test_a100_on_580_gets_cu130(spec: str) -> None:
    assert resolve_torch(node("x86_64", "580.95.05", ("8.0",)), spec).backend == "cu130"


def test_a100_on_580_never_gets_cu132_which_needs_595() -> None:
    choice = resolve_torch(node("x86_64", "580.95.05", ("8.0",) * 8), "==2.13.0")
    assert choice.backend == "cu130"


def test_cpu_only_node_gets_cpu() -> None:
    choice = resolve_torch(node("x86_64", None), "==2.13.0")
    assert choice.backend == "cpu"
    assert choice.index_url == f"{DEFAULT_INDEX_URL}/cpu"


def test_driver_loaded_but_no_gpu_gets_cpu() -> None:
    assert resolve_torch(node("x86_64", "565.57.01", ()), "==2.9.1").backend == "cpu"


def test_driver_too_old_for_any_variant_is_one_clear_line() -> None:
    facts = node("x86_64", "450.51.06", ("7.0", "7.0"))
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(facts, "==2.9.1")
    message = str(info.value)
    assert "\n" not in message
    assert "driver 450.51.06" in message
    assert "2 x Tesla V100-SXM2-32GB (7.0)" in message
    assert "update the driver to >= 560.28.03" in message
    assert "cuda-compat" in message


def test_no_build_names_another_torch_that_runs() -> None:
    """A 470 driver runs no 12.x build outright, and not torch 2.9's; 2.7's cu118 runs."""
    facts = node("x86_64", "470.82.01", ("7.0",))
    choice = try_resolve_torch(facts, "==2.9.1")
    assert choice.backend is None and choice.error
    assert "use torch 2.7.1 (its cu118 runs here)" in choice.error


def test_mixed_gpus_need_a_variant_for_all_of_them() -> None:
    facts = node("x86_64", "580.95.05", ("7.0", "8.0"))
    assert resolve_torch(facts, "==2.13.0").backend == "cu126"
    assert resolve_torch(node("x86_64", "580.95.05", ("8.0",)), "==2.13.0").backend == "cu130"


def test_rtx6000_on_535_uses_minor_version_compatibility_with_a_warning() -> None:
    choice = resolve_torch(RTX, "==2.9.1")
    assert choice.backend == "cu126"  # 12.2 driver: nearest 12.x above it
    assert len(choice.warnings) == 1
    warning = choice.warnings[0]
    assert "minor-version compatibility" in warning
    assert "PTX cannot be JIT-compiled" in warning
    assert "cudaErrorCallRequiresNewerDriver" in warning
    assert ">= 560.28.03" in warning


def test_minor_compat_fallback_on_555_picks_the_nearest_not_the_newest() -> None:
    choice = resolve_torch(node("x86_64", "555.42.06", ("8.0",)), "==2.9.1")
    assert choice.backend == "cu126"  # cu128 also runs under compat; cu126 is nearer
    assert choice.warnings


def test_outright_beats_minor_compat() -> None:
    """torch 2.6 on a 535 driver: cu118 runs outright, so no compat gamble with cu124."""
    choice = resolve_torch(node("x86_64", "535.104.05", ("8.0",)), "==2.6.0")
    assert choice.backend == "cu118"
    assert choice.warnings == ()


def test_newer_minor_gpu_runs_older_minor_sass() -> None:
    """An L40S (8.9) runs sm_86 code: compute capabilities are binary compatible upward
    within a major."""
    choice = resolve_torch(node("x86_64", "580.95.05", ("8.9",)), "==2.13.0")
    assert choice.backend == "cu130"
    assert any("sm_86 for the 1 x NVIDIA L40S" in r for r in choice.reasons)


def test_ptx_counts_only_when_the_driver_runs_the_toolkit_outright() -> None:
    future = node("x86_64", "595.45.04", ("12.1",))
    assert resolve_torch(future, "==2.13.0").backend == "cu132"  # SASS 12.0 covers 12.1
    newer_major = node("x86_64", "595.45.04", ("13.0",))
    choice = resolve_torch(newer_major, "==2.13.0")
    assert choice.backend == "cu132"
    assert any("PTX 12.0" in r for r in choice.reasons)
    stale = node("x86_64", "580.95.05", ("13.0",))  # cu132 only via compat: no PTX JIT
    assert resolve_torch(stale, "==2.13.0").backend == "cu130"


def test_pin_is_kept_but_warned_when_it_cannot_run() -> None:
    choice = resolve_torch(GH200, "==2.13.0", pin="cu130")
    assert choice.backend == "cu130"
    assert any("pinned cu130 cannot run" in w and "cu126" in w for w in choice.warnings)


def test_pin_that_runs_has_no_warning() -> None:
    assert resolve_torch(GH200, "==2.9.1", pin="cu126").warnings == ()


def test_pin_not_published_is_bad_input() -> None:
    with pytest.raises(BadInput, match="publishes no cu118 build for aarch64"):
        resolve_torch(GH200, "==2.13.0", pin="cu118")


def test_cpu_pin_on_gpu_node_warns() -> None:
    choice = resolve_torch(GH200, "==2.13.0", pin="cpu")
    assert choice.backend == "cpu" and choice.warnings


def test_index_base_precedence() -> None:
    assert index_base("https://mirror/whl/", {}) == "https://mirror/whl"
    env = {"HPCENV_TORCH_INDEX_URL": "https://site/torch"}
    assert index_base("https://mirror/whl", env) == "https://site/torch"
    assert index_base(None, {}) == DEFAULT_INDEX_URL
    choice = resolve_torch(GH200, "==2.9.1", index_base="https://site/torch")
    assert choice.index_url == "https://site/torch/cu126"


def test_version_picking() -> None:
    assert pick_version(">=2.9,<2.11") == "2.10.0"
    assert pick_version("==2.9.*") == "2.9.1"
    assert pick_version("2.12") == "2.12.0"
    assert pick_version("torch==2.9.1") == "2.9.1"
    latest = knowledge.load().known_versions()[-1]
    assert pick_version(">=2.6") == latest


@pytest.mark.parametrize("spec", ["==9.9", ">=3", "<2.0"])
def test_unknown_version_is_bad_input_naming_known_ones(spec: str) -> None:
    with pytest.raises(BadInput) as info:
        pick_version(spec)
    assert spec in str(info.value) and "2.9.1" in str(info.value)


@pytest.mark.parametrize("spec", ["=>2.9", "two", "", "==2.9.1 junk"])
def test_spec_not_a_specifier_is_bad_input(spec: str) -> None:
    with pytest.raises(BadInput):
        pick_version(spec)


def test_bad_driver_string_is_bad_input() -> None:
    with pytest.raises(BadInput, match="driver_version 'banana'"):
        resolve_torch(node("x86_64", "banana", ("8.0",)), "==2.9.1")


# --- the rules as a property ----------------------------------------------------------

KNOW = knowledge.load()
DRIVERS = sorted(
    {t.min_driver for t in KNOW.toolkits}
    | {u for t in KNOW.toolkits for u in t.updates}
    | {m.min_driver for m in KNOW.majors.values()}
    | {"450.51.06", "470.82.01", "565.57.01", "599.99.99"},
    key=driver_key,
)
CAPS = ["3.5", "3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]


def _runs(arch_sass: tuple[str, ...], ptx: tuple[str, ...], cap: str, outright: bool) -> bool:
    major, minor = cap_key(cap)
    if any(cap_key(s)[0] == major and cap_key(s)[1] <= minor for s in arch_sass):
        return True
    return outright and any(cap_key(p) <= (major, minor) for p in ptx)


@settings(max_examples=300, deadline=None)
@given(
    arch=st.sampled_from(["x86_64", "aarch64"]),
    driver=st.sampled_from(DRIVERS),
    caps=st.lists(st.sampled_from(CAPS), min_size=1, max_size=4),
    version=st.sampled_from(KNOW.known_versions()),
)
def test_chosen_variant_always_runs_on_the_node(
    arch: str, driver: str, caps: list[str], version: str
) -> None:
    facts = node(arch, driver, tuple(caps))
    choice = try_resolve_torch(facts, f"=={version}")
    release = KNOW.release_of(version)
    assert release is not None
    if choice.backend is None:
        assert choice.error and "\n" not in choice.error
        # nothing was missed: no published variant passes both checks
        for variant in release.platforms[arch].variants:
            if variant != "cpu":
                assert not assess(facts, version, variant).runs
        return
    assert choice.backend in release.platforms[arch].variants
    cuda = variant_cuda(choice.backend)
    assert cuda is not None
    tk = KNOW.toolkit(cuda)
    mm = KNOW.major_minimum(int(cuda.split(".")[0]))
    assert tk is not None and mm is not None
    outright = driver_key(tk.min_driver) <= driver_key(driver)
    assert outright or driver_key(mm.min_driver) <= driver_key(driver)
    assert outright or choice.warnings  # compat is never silent
    archs = KNOW.arch_set(choice.backend, arch, release.minor)
    assert archs is not None
    for cap in caps:
        assert _runs(archs.sass, archs.ptx, cap, outright), (choice.backend, cap)
    # and no newer variant that also runs outright was passed over
    if outright:
        for variant in release.platforms[arch].variants:
            a = assess(facts, version, variant)
            if variant != "cpu" and a.runs and a.outright:
                assert cuda_key(variant_cuda(variant) or "0.0") <= cuda_key(cuda)


def test_unconfirmed_data_is_said_in_a_warning() -> None:
    choice = resolve_torch(GH200, "==2.11.0")
    assert choice.backend == "cu126"
    assert any("aarch64 variant list of torch 2.11 is unconfirmed" in w for w in choice.warnings)


def test_choice_carries_pin_and_index_base_as_fields() -> None:
    auto = resolve_torch(GH200, "==2.9.1", index_base="https://site/torch/")
    assert (auto.pin, auto.index_base) == ("auto", "https://site/torch")
    assert auto.index_url == f"{auto.index_base}/{auto.backend}"
    pinned = resolve_torch(GH200, "==2.9.1", pin="cu128")
    assert (pinned.pin, pinned.index_base) == ("cu128", DEFAULT_INDEX_URL)
    nothing = try_resolve_torch(node("x86_64", "450.51.06", ("7.0",)), "==2.9.1")
    assert nothing.error and (nothing.pin, nothing.index_base) == ("auto", DEFAULT_INDEX_URL)
