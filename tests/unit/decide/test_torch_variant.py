"""The resolver's rules on recorded and stand-in GPU nodes (tests/data/facts, fakenodes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcenv import knowledge
from hpcenv.decide.torch_variant import (
    DEFAULT_INDEX_URL,
    assess,
    decide,
    index_base,
    resolve_torch,
    try_resolve_torch,
)
from hpcenv.decide.torch_variant_words import explain
from hpcenv.facts import collect
from hpcenv.knowledge import cap_key, cuda_key, driver_key, variant_cuda
from hpcenv.knowledge.lookup import Lookup
from hpcenv.utils.errors import BadInput, NoCompatibleBuild
from support import FACTS
from support.fakenodes import node
from support.torch_standin import StandIn, torch_wheel

GH200 = collect.load(FACTS / "gh200-isambard.json")  # aarch64, 565.57.01
V100 = collect.load(FACTS / "v100-supercloud.json")  # 575.57.08
RTX = collect.load(FACTS / "rtx6000-brtx.json")  # 7.5, 535.104.05
A100 = collect.load(FACTS / "a100-standin.json")  # 550.54.15
H100 = collect.load(FACTS / "h100-standin.json")  # 570.124.06
CPU = node("x86_64", None)
NODES = {"GH200": GH200, "V100": V100, "RTX": RTX, "A100": A100, "H100": H100, "CPU": CPU}
KNOW = knowledge.load()

# The variant each node gets for every torch release on PyPI (None: no build runs there,
# exit 3 with fixes). Reviewed row by row against the data: PyPI's x86_64 builds up to 2.5
# (cu121, cu124) run everywhere; a 535 driver (RTX) runs cu118/cu121 outright; GH200 has no
# aarch64 CUDA build before 2.4, and none before 2.6 whose GPU code hpcenv knows; 2.7's
# aarch64 builds are cu128 only (minor-version compatible on 565); 2.15 has no CUDA 12
# build, which none of these drivers (<= 575) runs beyond, and no cu13 build has sm_70.
EXPECTED = {
    # 1.8-2.0 (issue 22): only the variants each release published (its previous-versions
    # section): cu111 (1.8-1.10, index only; its GPU code from pytorch/builder's script,
    # for 1.8 only the codes both of that month's lists carry: 5.0;7.0;8.0;8.6) is the
    # newest that runs on the V100, the RTX 6000 (7.5 by 7.0 SASS) and the A100; cu113
    # (1.11), cu116 (1.12), cu117 (1.13, read) stop at 8.6 with no PTX: nothing for an H100
    # before 2.0's cu118; aarch64 had only CPU wheels.
    "1.8": ("cu111", "cu111", "cu111", None, None),
    "1.9": ("cu111", "cu111", "cu111", None, None),
    "1.10": ("cu111", "cu111", "cu111", None, None),
    "1.11": ("cu113", "cu113", "cu113", None, None),
    "1.12": ("cu116", "cu116", "cu116", None, None),
    "1.13": ("cu117", "cu117", "cu117", None, None),
    "2.0": ("cu118", "cu118", "cu118", "cu118", None),
    "2.1": ("cu121", "cu121", "cu121", "cu121", None),
    "2.2": ("cu121", "cu121", "cu121", "cu121", None),
    "2.3": ("cu121", "cu121", "cu121", "cu121", None),
    "2.4": ("cu124", "cu121", "cu124", "cu124", None),
    "2.5": ("cu124", "cu121", "cu124", "cu124", None),
    "2.6": ("cu126", "cu118", "cu124", "cu126", "cu126"),
    "2.7": ("cu126", "cu118", "cu118", "cu128", "cu128"),
    "2.8": ("cu129", "cu126", "cu126", "cu128", "cu129"),
    "2.9": ("cu128", "cu126", "cu126", "cu128", "cu126"),
    "2.10": ("cu128", "cu126", "cu126", "cu128", "cu126"),
    "2.11": ("cu126", "cu126", "cu126", "cu128", "cu126"),
    "2.12": ("cu126", "cu126", "cu126", "cu126", "cu126"),
    "2.13": ("cu126", "cu126", "cu126", "cu126", "cu126"),
    "2.14": ("cu126", "cu126", "cu126", "cu126", "cu126"),
    "2.15": (None, None, None, None, None),
}  # V100, RTX, A100, H100, GH200
#: releases whose published variants differ from their minor's: 1.10.2 has no
#: previous-versions section, so only PyPI's cu102 build is known (no sm_80)
EXPECTED_RELEASE = {"1.10.2": ("cu102", "cu102", None, None, None)}


@pytest.mark.parametrize("version", KNOW.known_versions())
def test_every_release_on_every_node(version: str) -> None:
    minor = ".".join(version.split(".")[:2])
    v100, rtx, a100, h100, gh200 = EXPECTED_RELEASE.get(version, EXPECTED[minor])
    wanted = {"V100": v100, "RTX": rtx, "A100": a100, "H100": h100, "GH200": gh200}
    for name, want in wanted.items():
        if name == "GH200" and KNOW.release_of(version).platforms.get("aarch64") is None:  # type: ignore[union-attr]
            with pytest.raises(NoCompatibleBuild, match="has no wheels for aarch64"):
                try_resolve_torch(NODES[name], f"=={version}")  # 1.9.1: use 1.10.0
            continue
        choice = try_resolve_torch(NODES[name], f"=={version}")
        assert choice.version == version
        assert choice.backend == want, (name, version, choice.error or choice.reasons)
        if want is None:
            assert choice.error and "\n" not in choice.error and "fixes:" in choice.error
        else:
            a = assess(NODES[name], version, want)
            assert a.runs, (name, version)
    assert try_resolve_torch(CPU, f"=={version}").backend == "cpu"


@pytest.mark.parametrize("spec", ["==2.9.1", "==2.13.0"])
def test_gh200_on_565_gets_cu126(spec: str) -> None:
    choice = resolve_torch(GH200, spec)
    assert choice.backend == "cu126"
    assert choice.index_url == f"{DEFAULT_INDEX_URL}/cu126"
    text = "\n".join(choice.reasons)
    assert "driver 565.57.01 runs CUDA <= 12.6 builds outright (12.8 needs >= 570.26)" in text
    assert "cu126 carries sm_90 for the 4 x NVIDIA GH200 120GB" in text
    # the aarch64 cu126 code comes from a build script, not a wheel: said once
    assert len(choice.warnings) == 1 and "unconfirmed" in choice.warnings[0]


def test_gh200_reasons_explain_pypi() -> None:
    old = resolve_torch(GH200, "==2.9.1")
    assert "PyPI's aarch64 torch 2.9.1 is a CPU build; using the cu126 index" in old.reasons
    new = resolve_torch(GH200, "==2.13.0")
    assert any("PyPI's aarch64 torch 2.13.0 is the cu130 build" in r for r in new.reasons)


@pytest.mark.parametrize("spec", ["==2.11.0", "==2.13.0"])
def test_v100_gets_cu126(spec: str) -> None:
    choice = resolve_torch(V100, spec)
    assert choice.backend == "cu126"
    assert any("no sm_70" in r and "cu130" in r for r in choice.reasons)


def test_v100_on_torch_2_10_keeps_cu128_which_still_has_sm70() -> None:
    choice = resolve_torch(V100, "==2.10.0")
    assert choice.backend == "cu128"
    assert not any("inferred" in w for w in choice.warnings)  # PyPI's own cu128 wheel


@pytest.mark.parametrize("spec", ["==2.9.1", "==2.10.0", "==2.11.0"])
def test_a100_on_580_gets_cu130(spec: str) -> None:
    assert resolve_torch(node("x86_64", "580.95.05", ("8.0",)), spec).backend == "cu130"


def test_a100_on_580_never_gets_cu132_which_needs_595() -> None:
    choice = resolve_torch(node("x86_64", "580.95.05", ("8.0",) * 8), "==2.13.0")
    assert choice.backend == "cu130"


def test_cpu_only_node_gets_cpu() -> None:
    choice = resolve_torch(CPU, "==2.13.0")
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
    assert "cuda-compat-12-6" in message  # a V100 is a data center part


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
    compat = [w for w in choice.warnings if "minor-version compatibility" in w]
    assert len(compat) == 1
    assert "PTX cannot be JIT-compiled" in compat[0]
    assert "cudaErrorCallRequiresNewerDriver" in compat[0]
    assert ">= 560.28.03" in compat[0]


def test_minor_compat_fallback_on_555_picks_the_nearest_not_the_newest() -> None:
    choice = resolve_torch(node("x86_64", "555.42.06", ("8.0",)), "==2.9.1")
    assert choice.backend == "cu126"  # cu128 also runs under compat; cu126 is nearer
    assert choice.warnings


def test_outright_beats_minor_compat() -> None:
    """torch 2.6 on a 535 driver: cu118 runs outright, so no compat gamble with cu124."""
    choice = resolve_torch(node("x86_64", "535.104.05", ("8.0",)), "==2.6.0")
    assert choice.backend == "cu118"
    assert not any("minor-version" in w for w in choice.warnings)


def test_newer_minor_gpu_runs_older_minor_sass() -> None:
    """An L40S (8.9) runs sm_86 code: compute capabilities are binary compatible upward
    within a major (the one 8.9 kernel in the wheel is not coverage)."""
    choice = resolve_torch(node("x86_64", "580.95.05", ("8.9",)), "==2.13.0")
    assert choice.backend == "cu130"
    assert any("sm_86 for the 1 x NVIDIA L40S" in r for r in choice.reasons)


def test_no_ptx_in_the_wheels_so_a_newer_major_gpu_has_no_code() -> None:
    """The first table claimed PTX 12.0 for cu130/cu132; the wheels carry none, so a
    compute capability 13.0 GPU has no code in torch 2.13 at all."""
    future = node("x86_64", "595.45.04", ("12.1",))
    assert resolve_torch(future, "==2.13.0").backend == "cu132"  # SASS 12.0 covers 12.1
    choice = try_resolve_torch(node("x86_64", "595.45.04", ("13.0",)), "==2.13.0")
    assert choice.backend is None and "no sm_130" in (choice.error or "")


def test_pin_is_kept_but_warned_when_it_cannot_run() -> None:
    choice = resolve_torch(GH200, "==2.13.0", pin="cu130")
    assert choice.backend == "cu130"
    assert any("pinned cu130 cannot run" in w and "cu126" in w for w in choice.warnings)


def test_pin_that_runs_has_no_runtime_warning() -> None:
    choice = resolve_torch(H100, "==2.9.1", pin="cu128")
    assert not [w for w in choice.warnings if "cannot run" in w or "minor-version" in w]


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


def test_choice_carries_pin_and_index_base_as_fields() -> None:
    auto = resolve_torch(GH200, "==2.9.1", index_base="https://site/torch/")
    assert (auto.pin, auto.index_base) == ("auto", "https://site/torch")
    assert auto.index_url == f"{auto.index_base}/{auto.backend}"
    pinned = resolve_torch(GH200, "==2.9.1", pin="cu128")
    assert (pinned.pin, pinned.index_base) == ("cu128", DEFAULT_INDEX_URL)
    nothing = try_resolve_torch(node("x86_64", "450.51.06", ("7.0",)), "==2.9.1")
    assert nothing.error and (nothing.pin, nothing.index_base) == ("auto", DEFAULT_INDEX_URL)


@pytest.mark.parametrize("spec", ["=>2.9", "two", "", "==2.9.1 junk"])
def test_only_a_malformed_spec_is_bad_input(spec: str) -> None:
    with pytest.raises(BadInput):
        try_resolve_torch(V100, spec)


def test_bad_driver_string_is_bad_input() -> None:
    with pytest.raises(BadInput, match="driver_version 'banana'"):
        resolve_torch(node("x86_64", "banana", ("8.0",)), "==2.9.1")


# --- decisions are data ---------------------------------------------------------------------


def test_decision_is_data_and_explain_words_it() -> None:
    d = decide(V100, "==2.13.0")
    assert d.mode == "auto" and d.backend == "cu126" and d.fixes is None
    assert [a.variant for a in d.assessed] == ["cu132", "cu130", "cu126"]
    assert [a.runs for a in d.assessed] == [False, False, True]
    assert d.assessed[0].missing == ("7.0",)
    assert explain(d, V100) == try_resolve_torch(V100, "==2.13.0")


# --- ranges ----------------------------------------------------------------------------------


def test_range_picks_the_newest_release_that_runs_and_says_why_not_newer() -> None:
    choice = resolve_torch(V100, ">=2.9")
    assert (choice.version, choice.backend) == ("2.14.1", "cu126")
    blocked = [r for r in choice.reasons if r.startswith("torch 2.15.0 also matches")]
    assert len(blocked) == 1 and "no sm_70" in blocked[0]
    assert resolve_torch(A100, ">=2.9").version == "2.14.1"  # 550: no 13.x driver
    assert resolve_torch(node("x86_64", "595.45.04", ("8.0",)), ">=2.9").version == "2.15.0"


# --- the CUDA 12 cutoff ----------------------------------------------------------------------


def test_torch_2_15_on_a_v100_names_the_newest_release_that_runs() -> None:
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(V100, "==2.15.0")
    message = str(info.value)
    assert "use torch 2.14.1 (its cu126 runs here)" in message
    assert "no x86_64 variant of torch 2.15.0 carries code for 7.0" in message
    assert "cuda-compat" not in message and "update the driver" not in message


def test_torch_2_15_on_gh200_565_offers_driver_and_forward_compat() -> None:
    d = decide(GH200, "==2.15.0")
    assert d.chosen is None and d.fixes is not None
    assert d.fixes.older == ("2.14.1", "cu126")
    assert d.fixes.driver == ("580.65.06", "cu130")
    assert d.fixes.cuda_compat == ("cuda-compat-13-0", "cu130")
    error = explain(d, GH200).error or ""
    assert "update the driver to >= 580.65.06 (runs cu130)" in error
    assert "cuda-compat-13-0" in error


def test_forward_compat_is_not_offered_for_a_workstation_gpu() -> None:
    quadro = node("x86_64", "565.57.01", ("7.5",))  # fakenodes: "Quadro RTX 6000"
    d = decide(quadro, "==2.15.0")
    assert d.fixes is not None and d.fixes.cuda_compat is None
    assert d.fixes.compat_refused == "Quadro RTX 6000 is not a data center GPU"
    assert "is not a data center GPU" in (explain(d, quadro).error or "")


def test_unknown_gpu_code_is_said_not_mistaken_for_no_code() -> None:
    choice = try_resolve_torch(GH200, "==2.4.1")
    assert choice.backend is None
    assert "hpcenv has no data on the GPU code of cu124" in (choice.error or "")
    assert "carries code for" not in (choice.error or "")


# --- old releases: only what each published (issue 22) ------------------------------------------


@pytest.mark.parametrize(
    ("version", "published"),
    [
        ("1.8.1", ("cpu", "cu101", "cu102", "cu111")),
        ("1.10.2", ("cpu", "cu102")),  # no previous-versions section: PyPI's build alone
        ("1.11.0", ("cpu", "cu102", "cu113")),
        ("1.12.1", ("cpu", "cu102", "cu113", "cu116")),
        ("1.13.1", ("cpu", "cu116", "cu117")),
        ("2.0.1", ("cpu", "cu117", "cu118")),
    ],
)
def test_old_releases_have_their_own_variants(version: str, published: tuple[str, ...]) -> None:
    release = KNOW.release_of(version)
    assert release is not None
    x86 = release.platforms["x86_64"]
    assert x86.variants == published and not x86.confirmed and x86.inferred_from is None
    if version != "1.10.2":
        assert "previous-versions.md" in x86.source and f"section v{version}" in x86.source
    assert release.platforms["aarch64"].variants == ("cpu",)  # PyPI's CPU wheel only


def test_torch_2_0_1_on_a_v100_is_cu118_never_cu121() -> None:
    """Was: cu121, 'inferred from torch 2.1.0'; 2.0.1 was published as cpu, cu117, cu118."""
    choice = resolve_torch(V100, "==2.0.1")
    assert (choice.version, choice.backend) == ("2.0.1", "cu118")
    assert "torch 2.0.1 publishes cpu, cu117, cu118 for x86_64" in choice.reasons
    text = " ".join(choice.warnings)
    assert "inferred from torch" not in text and "unconfirmed" in text


def test_old_cuda_10_build_runs_only_outright() -> None:
    """cu102 needs driver >= 440.33; CUDA 10 has no minor-version compatibility."""
    assert resolve_torch(node("x86_64", "450.51.06", ("7.0",)), "==1.8.1").backend == "cu102"
    choice = try_resolve_torch(node("x86_64", "418.39", ("7.0",)), "==1.10.2")
    assert choice.backend is None and "fixes:" in (choice.error or "")


def test_old_release_whose_variants_code_nobody_read_is_said() -> None:
    """2.4.1 on a GH200: aarch64 cu124 is published, but hpcenv read no wheel or script of
    its GPU code: exit 3 saying so, not a guess."""
    choice = try_resolve_torch(GH200, "==2.4.1")
    assert choice.backend is None
    assert "hpcenv has no data on the GPU code of cu124 for torch 2.4.1" in (choice.error or "")


def test_an_a100_on_torch_1_8_gets_cu111_from_the_build_script_and_says_so() -> None:
    """cu102 has no sm_80; cu111's list comes from pytorch/builder's script (no wheel read):
    chosen, with the script named in a warning."""
    choice = resolve_torch(A100, "==1.8.1")
    assert choice.backend == "cu111"
    assert "cu111 carries sm_80" in " ".join(choice.reasons)
    warned = " ".join(choice.warnings)
    assert "GPU-arch list of cu111 for torch 1.8.1 on x86_64 is unconfirmed" in warned
    assert "pytorch/builder manywheel/build.sh" in warned


@pytest.mark.parametrize("version", ["1.8.1", "1.10.2", "1.12.1", "1.13.1", "2.0.1"])
def test_old_releases_on_the_gh200_are_exit_3_with_the_cpu_fix(version: str) -> None:
    choice = try_resolve_torch(GH200, f"=={version}")
    assert choice.backend is None and "--backend cpu" in (choice.error or "")
    assert resolve_torch(GH200, f"=={version}", pin="cpu").backend == "cpu"
    assert resolve_torch(node("aarch64", None), f"=={version}").backend == "cpu"


def test_a_release_with_no_wheel_for_the_arch_names_the_nearest() -> None:
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(GH200, "==1.9.1")
    assert "torch 1.9.1 has no wheels for aarch64" in str(info.value)
    assert "use torch 1.10.0" in str(info.value)


# --- releases the data lacks -------------------------------------------------------------------


def test_an_unknown_release_offline_is_exit_3_never_a_guess() -> None:
    """Offline, a release the data lacks is not inferred from a neighbour: which variants
    it published cannot be known without a listing of it."""
    h100_580 = node("x86_64", "580.95.05", ("9.0",))
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(h100_580, "==2.16.0")
    message = str(info.value)
    assert "torch 2.16.0 is not in hpcenv's data and nothing was consulted" in message
    assert "hpcenv knowledge update" in message and "without --offline" in message
    assert "inferred" not in message and "cu130" not in message


def test_an_unknown_release_nothing_runs_is_exit_3_not_bad_input() -> None:
    with pytest.raises(NoCompatibleBuild, match="not in hpcenv's data"):
        resolve_torch(GH200, "==2.16.0")


def test_a_range_matching_nothing_offline_is_exit_3_with_the_refresh() -> None:
    with pytest.raises(NoCompatibleBuild, match="hpcenv knowledge update"):
        resolve_torch(V100, ">=3")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    """A stand-in PyTorch index and PyPI listing a release the data does not have."""
    s = StandIn(tmp_path_factory.mktemp("future"))
    for label in ("cpu", "cu130", "cu132"):
        cuda = None if label == "cpu" else f"13.{label[-1]}"
        s.add_index(label, torch_wheel(s.files, "2.16.0", label=label, cuda=cuda, padding=0))
    s.add_pypi(torch_wheel(s.files, "2.16.0", cuda="13.2", padding=0))
    yield s.start()
    s.stop()


def test_an_unknown_release_uses_what_the_index_lists(index: StandIn) -> None:
    lookup = Lookup(index_base=f"{index.url}/whl", pypi=index.url)
    a100_580 = node("x86_64", "580.95.05", ("8.0",))
    choice = resolve_torch(a100_580, "==2.16.0", lookup=lookup)
    assert choice.backend == "cu130"
    assert "torch 2.16.0 publishes cpu, cu130, cu132 for x86_64" in choice.reasons
    text = " ".join(choice.warnings)
    assert f"the PyTorch index {index.url}/whl" in text and "hpcenv knowledge update" in text
    assert "variant list" not in text  # read from the index: confirmed
    # a range beyond the data finds it too
    assert resolve_torch(a100_580, ">=2.16", lookup=lookup).version == "2.16.0"


def test_a_release_no_index_lists_is_exit_3(index: StandIn) -> None:
    lookup = Lookup(index_base=f"{index.url}/whl", pypi=index.url)
    with pytest.raises(NoCompatibleBuild, match="lists none"):
        resolve_torch(V100, "==9.9.9", lookup=lookup)


def test_an_unreachable_index_is_exit_3_naming_it() -> None:
    lookup = Lookup(index_base="http://127.0.0.1:9/whl", pypi="http://127.0.0.1:9", timeout=2)
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(node("x86_64", "580.95.05", ("8.0",)), "==2.16.0", lookup=lookup)
    message = str(info.value)
    assert "not in hpcenv's data and looking it up failed" in message
    assert "127.0.0.1:9" in message


def test_a_release_only_pypi_lists_has_unknown_variants_exit_3(index: StandIn) -> None:
    """PyPI lists 2.16.0 but the PyTorch index is unreachable: hpcenv does not copy 2.15's
    variant list onto it."""
    lookup = Lookup(index_base="http://127.0.0.1:9/whl", pypi=index.url, timeout=2)
    with pytest.raises(NoCompatibleBuild) as info:
        resolve_torch(node("x86_64", "580.95.05", ("8.0",)), "==2.16.0", lookup=lookup)
    message = str(info.value)
    assert "torch 2.16.0 is listed by PyPI but not in hpcenv's data" in message
    assert "which CUDA builds it publishes is unknown" in message
    assert "hpcenv knowledge update --index URL" in message


# --- the rules as a property ---------------------------------------------------------------------

DRIVERS = sorted(
    {t.min_driver for t in KNOW.toolkits if t.min_driver}
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
    release = KNOW.release_of(version)
    assert release is not None
    if arch not in release.platforms:  # 1.9.1 has no aarch64 wheel: exit 3, never a guess
        with pytest.raises(NoCompatibleBuild, match=f"has no wheels for {arch}"):
            try_resolve_torch(facts, f"=={version}")
        return
    choice = try_resolve_torch(facts, f"=={version}")
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
    assert tk is not None
    outright = tk.min_driver is not None and driver_key(tk.min_driver) <= driver_key(driver)
    # CUDA 10 has no minor-version compatibility: cu101/cu102 run only outright
    assert outright or (mm is not None and driver_key(mm.min_driver) <= driver_key(driver))
    assert outright or choice.warnings  # compat is never silent
    archs = KNOW.arch_set(choice.backend, arch, version)
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
    assert any("aarch64 variant list of torch 2.11.0 is unconfirmed" in w for w in choice.warnings)


def test_recorded_stand_ins_say_they_are_stand_ins() -> None:
    for name in ("a100-standin.json", "h100-standin.json"):
        assert "STAND-IN" in (FACTS / name).read_text()
    assert Path(FACTS / "a100-standin.json").is_file()
