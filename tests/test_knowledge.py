"""The knowledge files: every entry sourced, leads marked, tables consistent."""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

import pytest

from hpcenv import knowledge
from hpcenv.knowledge import cap_key, cuda_key, driver_key, variant_cuda

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILES = ("cuda.toml", "torch.toml", "packages.toml")


def _raw(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("hpcenv.knowledge").joinpath(name).read_text())


def _entries(data: Any) -> list[dict[str, Any]]:
    """Every table inside an array of tables, at any depth."""
    out: list[dict[str, Any]] = []
    if isinstance(data, dict):
        for value in data.values():
            out += _entries(value)
    elif isinstance(data, list):
        for item in data:
            if isinstance(item, dict):
                out.append(item)
                out += _entries(item)
    return out


@pytest.mark.parametrize("name", FILES)
def test_every_entry_names_its_source(name: str) -> None:
    entries = _entries(_raw(name))
    assert entries
    for entry in entries:
        assert entry.get("source"), f"{name}: entry without source: {entry}"
    for release in _raw("torch.toml")["release"]:
        for arch in ("x86_64", "aarch64"):
            assert release[arch]["source"]


def test_flash_attn_scalars_are_sourced() -> None:
    fa = _raw("packages.toml")["flash_attn"]
    for key, value in fa.items():
        if isinstance(value, (str, int, float)) and not key.endswith("_source"):
            if key in ("wheel_url",):
                continue
            assert f"{key}_source" in fa, key


def test_what_knowledge_calls_unconfirmed_is_marked() -> None:
    know = knowledge.load()
    assert not know.release_of("2.11.0").platforms["aarch64"].confirmed  # "probable"
    assert not know.release_of("2.8.0").platforms["aarch64"].confirmed  # cu129 unconfirmed
    assert not know.arch_set("cu129", "aarch64", "2.8").confirmed
    assert not know.vllm_min_cc("0.21.0").confirmed
    assert know.vllm_min_cc("0.14.0").confirmed


def test_driver_strings_compare_numerically() -> None:
    assert driver_key("565.57.01") > driver_key("560.28.03")
    assert driver_key("570.26") < driver_key("570.124.06")
    assert driver_key("580.95.05") > driver_key("580.65.06")


def test_toolkit_minimum_drivers_rise_with_the_toolkit() -> None:
    know = knowledge.load()
    drivers = [driver_key(t.min_driver) for t in know.toolkits]
    assert drivers == sorted(drivers)
    for t in know.toolkits:
        assert all(driver_key(u) > driver_key(t.min_driver) for u in t.updates)
        assert t.major in know.majors
        assert driver_key(know.majors[t.major].min_driver) <= driver_key(t.min_driver)


def test_major_minimums() -> None:
    know = knowledge.load()
    assert know.major_minimum(12).min_driver == "525.60.13"
    assert know.major_minimum(13).min_driver == "580.65.06"


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [("565.57.01", "12.6"), ("575.57.08", "12.9"), ("580.95.05", "13.0"), ("535.104.05", "12.2")],
)
def test_max_cuda_outright(driver: str, cuda: str) -> None:
    best = knowledge.load().max_cuda_outright(driver)
    assert best is not None and best.version == cuda


def test_no_toolkit_for_an_ancient_driver() -> None:
    assert knowledge.load().max_cuda_outright("450.51.06") is None


def test_every_published_variant_is_fully_described() -> None:
    """A variant hpcenv might pick has a CUDA toolkit row and a GPU-arch list."""
    know = knowledge.load()
    for release in know.releases:
        assert release.versions
        for arch, plat in release.platforms.items():
            assert "cpu" in plat.variants
            assert plat.pypi in plat.variants
            for variant in plat.variants:
                if variant == "cpu":
                    continue
                cuda = variant_cuda(variant)
                assert cuda is not None and know.toolkit(cuda) is not None, variant
                assert know.arch_set(variant, arch, release.minor), (variant, arch, release.minor)


def test_arch_lists_match_knowledge_section_2() -> None:
    know = knowledge.load()
    assert "7.0" not in know.arch_set("cu128", "x86_64", "2.11").sass
    assert "7.0" in know.arch_set("cu128", "x86_64", "2.10").sass
    assert "7.0" in know.arch_set("cu126", "x86_64", "2.13").sass
    assert know.arch_set("cu126", "aarch64", "2.9").sass == ("8.0", "9.0")
    assert know.arch_set("cu130", "x86_64", "2.13").ptx == ("12.0",)
    assert "9.0a" in know.arch_set("cu130", "aarch64", "2.13").extra
    for a in know.archs:
        assert list(a.sass) == sorted(a.sass, key=cap_key)


def test_variant_cuda() -> None:
    assert variant_cuda("cu126") == "12.6"
    assert variant_cuda("cu130") == "13.0"
    assert variant_cuda("cu118") == "11.8"
    assert variant_cuda("cpu") is None
    assert cuda_key("13.2") == (13, 2)


def test_pypi_variants() -> None:
    know = knowledge.load()
    assert know.release_of("2.9.1").platforms["aarch64"].pypi == "cpu"
    assert know.release_of("2.13.0").platforms["aarch64"].pypi == "cu130"
    assert know.release_of("2.6.0").platforms["x86_64"].pypi == "cu124"


def test_flash_attn_limits() -> None:
    fa = knowledge.load().flash_attn
    assert fa.min_compute_capability == "8.0"
    assert fa.gb_per_nvcc_thread == 5.0
    assert all(w.machines == ("x86_64",) for w in fa.wheels)
