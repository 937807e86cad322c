"""Every CUDA package judged, and the swap's rule for a package built for the other CUDA
major. The names and version labels are real ones: Astral's wheel index labels
(``causal_conv1d-1.6.2.post1+cu.13.0.torch.2.11``, ``flash-attn 2.8.3+cu.13.0.torch.2.11``),
windreamer's FA3 wheels (``3.0.0+20260318.cu130torch2100cxx11abitrue.8afc61``, in
open-instruct's uv.lock), PyPI's ``nixl-cu13``, ``nvidia-cutlass-dsl-libs-cu13`` and
``cupy-cuda12x``."""

from __future__ import annotations

from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hpcenv import knowledge
from hpcenv.decide import cuda_packages
from hpcenv.decide.cuda_packages import Node, cuda_major, judge
from hpcenv.kit.coverage import covers
from hpcenv.kit.fatbin import scan
from hpcenv.project.install_set import other_major


@pytest.mark.parametrize(
    ("name", "version", "major"),
    [
        ("flash-attn", "2.8.3+cu.13.0.torch.2.11", 13),
        ("causal-conv1d", "1.6.2.post1+cu.13.0.torch.2.11", 13),
        ("flash-attn-3", "3.0.0+20260318.cu130torch2100cxx11abitrue.8afc61", 13),
        ("flash-attn", "2.8.3+cu128torch2.10", 12),
        ("vllm", "0.19.1+cu130", 13),
        ("nixl-cu13", "0.7.1", 13),
        ("nvidia-cutlass-dsl-libs-cu13", "4.2.0", 13),
        ("cupy-cuda12x", "13.6.0", 12),
        ("nvidia-cuda-runtime-cu12", "12.8.90", 12),
        ("cuda-python", "12.8.0", None),
        ("vllm", "0.19.1", None),
        ("numpy", "2.3.0", None),
    ],
)
def test_cuda_major_from_label_or_name(name: str, version: str, major: int | None) -> None:
    assert cuda_major(name, version) == major


V100 = Node(caps=("7.0", "7.0"), driver_cuda="12.9", torch_cuda="12.6")
GH200 = Node(caps=("9.0",), driver_cuda="12.7", torch_cuda="12.6")


def test_vllm_against_its_release_minimum() -> None:
    (old,) = judge({"vllm": ("0.19.1",)}, V100)
    assert old.ok and "compute capability >= 7.0" in old.why
    (new,) = judge({"vllm": ("0.20.0",)}, V100)
    assert not new.ok and new.why.startswith("needs compute capability >= 7.5")
    assert new.why.endswith("the GPUs are 7.0")


def test_flash_attn_2_needs_8_0_and_fa3_9_0() -> None:
    fa2, fa3 = judge({"flash-attn": ("2.8.3",), "flash-attn-3": ("3.0.0",)}, V100)
    assert not fa2.ok and "flash-attn 2 needs compute capability >= 8.0" in fa2.why
    assert not fa3.ok and ">= 9.0" in fa3.why
    assert all(v.ok for v in judge({"flash-attn": ("2.8.3",), "flash-attn-3": ("3.0.0",)}, GH200))


def test_a_cuda_13_package_on_a_cuda_12_driver_or_beside_a_cuda_12_torch() -> None:
    (nixl,) = judge({"nixl-cu13": ("0.7.1",)}, GH200)
    assert not nixl.ok and nixl.why == "built for CUDA 13, the driver runs CUDA <= 12.7"
    node = Node(caps=("9.0",), driver_cuda="13.0", torch_cuda="12.8")
    (conv,) = judge({"causal-conv1d": ("1.6.2.post1+cu.13.0.torch.2.11",)}, node)
    assert not conv.ok and "torch here is a CUDA 12.8 build" in conv.why
    # torch's own wheels of another major are one line, not twenty
    many = {f"nvidia-{n}-cu13": ("13.0",) for n in ("nccl", "cudnn", "cublas", "cufft", "curand")}
    (line,) = judge(many, GH200)
    assert line.name == "nvidia-*" and not line.ok and "5 wheels" in line.version
    # no GPU: nothing to judge
    assert judge({"vllm": ("0.20.0",)}, Node(caps=(), driver_cuda=None)) == ()
    assert cuda_packages.judge({"numpy": ("2.0",)}, V100) == ()


def test_swap_replaces_or_refuses_each_package_of_the_other_major() -> None:
    assert other_major("nixl-cu13", "0.7.1", 13, 12, registry=True) == (
        "nixl-cu12==0.7.1", "built for CUDA 13: its CUDA 12 twin", None,
    )  # fmt: skip
    assert other_major("nvidia-cutlass-dsl-libs-cu13", "4.2.0", 13, 12, registry=True)[0] == (
        "nvidia-cutlass-dsl-libs-cu12==4.2.0"
    )
    assert other_major("cupy-cuda13x", "13.6.0", 13, 12, registry=True)[0] == "cupy-cuda12x==13.6.0"
    assert other_major("flash-attn", "2.8.3+cu.13.0.torch.2.11", 13, 12, registry=True)[0] == (
        "flash-attn===2.8.3"
    )
    after, why, warning = other_major(
        "causal-conv1d", "1.6.2.post1+cu.13.0.torch.2.11", 13, 12, registry=False
    )
    assert after is None and why == "a URL wheel built for CUDA 13"
    assert warning is not None and warning.startswith(
        "causal-conv1d 1.6.2.post1+cu.13.0.torch.2.11"
    )


def test_a_plain_vllm_is_pypis_build_for_the_torch_it_pins() -> None:
    """vLLM 0.19.1 from PyPI pins torch 2.10.0, whose x86_64 PyPI build is cu128 (torch_pypi
    .toml): beside a cu130 torch it is the other major; beside cu126 it is fine; on aarch64
    (PyPI's 2.10.0 is CPU-only there) nothing is inferred."""
    cu13 = Node(caps=("9.0",), driver_cuda="13.0", torch_cuda="13.0",
                torch_version="2.10.0+cu130", arch="x86_64")  # fmt: skip
    (vllm,) = judge({"vllm": ("0.19.1",)}, cu13)
    assert not vllm.ok
    assert vllm.why.startswith("built for CUDA 12 (PyPI's plain vLLM is built against PyPI's "
                               "torch 2.10.0 for x86_64 (cu128))")  # fmt: skip
    cu12 = Node(caps=("9.0",), driver_cuda="12.9", torch_cuda="12.6",
                torch_version="2.10.0+cu126", arch="x86_64")  # fmt: skip
    assert judge({"vllm": ("0.19.1",)}, cu12)[0].ok
    arm = Node(caps=("9.0",), driver_cuda="13.0", torch_cuda="13.0",
               torch_version="2.10.0+cu130", arch="aarch64")  # fmt: skip
    (plain,) = judge({"vllm": ("0.19.1",)}, arm)
    assert plain.ok and "CUDA" not in plain.why


# The edges of jax[cuda13] 0.7.2 + torch 2.9.1 as uv resolves them from PyPI for x86_64
# (tests/data/projects/torch_jax: uv's "# via" lines), cut to what decides the question.
EDGES = {
    "jax": ("jax-cuda13-plugin", "jaxlib"),
    "jax-cuda13-plugin": ("jax-cuda13-pjrt", "nvidia-cuda-runtime", "nvidia-cublas"),
    "nvidia-cublas": ("nvidia-cuda-nvrtc",),
    "torch": ("nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "triton"),
    "cupy-cuda12x": ("fastrlock",),
}
SET = {
    "jax": ("0.7.2",), "jaxlib": ("0.7.2",), "jax-cuda13-plugin": ("0.7.2",),
    "jax-cuda13-pjrt": ("0.7.2",), "nvidia-cuda-runtime": ("13.5.37",),
    "nvidia-cublas": ("13.10.0.20",), "nvidia-cuda-nvrtc": ("13.5.37",),
    "nvidia-cuda-runtime-cu12": ("12.8.90",), "nvidia-cublas-cu12": ("12.8.4.1",),
    "triton": ("3.5.1",), "cupy-cuda12x": ("13.6.0",), "fastrlock": ("0.8.3",),
}  # fmt: skip
V100_575 = Node(caps=("7.0",), driver_cuda="12.9", torch_cuda="12.8", torch_version="2.9.1",
                driver="575.57.08", gpu_names=("Tesla V100-PCIE-32GB",))  # fmt: skip


def test_each_runtime_is_attributed_to_the_package_that_pulls_it() -> None:
    assert cuda_packages.bringers(EDGES, "nvidia-cuda-runtime") == ("jax-cuda13-plugin",)
    assert cuda_packages.bringers(EDGES, "nvidia-cuda-nvrtc") == ("jax-cuda13-plugin",)
    assert cuda_packages.brought(SET, EDGES) == {
        "jax-cuda13-plugin": ("nvidia-cuda-runtime", "13.5.37"),
        "torch": ("nvidia-cuda-runtime-cu12", "12.8.90"),
    }
    # without edges a runtime is its own bringer
    assert cuda_packages.brought({"nvidia-cuda-runtime-cu12": ("12.9.79",)}, None) == {
        "nvidia-cuda-runtime-cu12": ("nvidia-cuda-runtime-cu12", "12.9.79")
    }


def test_jax_cuda13_beside_torch_on_a_v100_is_jaxs_problem_not_torchs() -> None:
    verdicts = {v.name: v for v in judge({k: v for k, v in SET.items() if k != "torch"},
                                         V100_575, edges=EDGES)}  # fmt: skip
    plugin = verdicts["jax-cuda13-plugin"]
    assert not plugin.ok and "built for CUDA 13.5 (pulls nvidia-cuda-runtime 13.5.37)" in plugin.why
    assert "needs driver >= 580.65.06" in plugin.why and ">= 7.5" in plugin.why
    assert not verdicts["jax-cuda13-pjrt"].ok  # its name and JAX's docs: CUDA 13, 7.5
    # torch's own wheels and JAX's nvidia-* wheels are not judged one by one
    assert not any(n.startswith("nvidia-") for n in verdicts)
    # a library's major is not CUDA's: cupy-cuda12x is CUDA 12 (and runs), whatever 13.6.0 says
    assert verdicts["cupy-cuda12x"].ok and "CUDA 12" in verdicts["cupy-cuda12x"].why


def test_minor_version_compatibility_and_the_majors_floors() -> None:
    gh200 = Node(caps=("9.0",), driver_cuda="12.7", driver="565.57.01")
    (rt,) = judge({"nvidia-cuda-runtime-cu12": ("12.9.79",)}, gh200)
    assert rt.ok and "CUDA 12.9 under minor-version compatibility" in rt.why
    old = Node(caps=("7.0",), driver_cuda="11.4", driver="470.82.01")
    (rt,) = judge({"nvidia-cuda-runtime-cu12": ("12.9.79",)}, old)
    assert not rt.ok and "needs driver >= 525.60.13" in rt.why
    assert cuda_packages.gpu_stack({"jax-cuda12-pjrt": ("0.7.2",)})
    assert not cuda_packages.gpu_stack({"jax": ("0.7.2",), "numpy": ("2.3.0",)})


# --- real wheels' METADATA and fatbins (tests/data/wheels, ORIGIN there) ------------------

WHEELS = Path(__file__).resolve().parents[2] / "data" / "wheels"


def _meta(prefix: str) -> tuple[str, str, list[Requirement]]:
    (path,) = WHEELS.glob(f"{prefix}*.METADATA")
    headers = HeaderParser().parsestr(path.read_text(), headersonly=True)
    reqs = [Requirement(r) for r in headers.get_all("Requires-Dist") or ()]
    return canonicalize_name(headers["Name"]), headers["Version"], reqs


def test_the_jax_plugins_own_metadata_attributes_its_runtime() -> None:
    """``jax[cuda13]`` installs ``jax-cuda13-plugin[with-cuda]``: its real Requires-Dist
    under that extra are the edges; the runtime is the plugin's, judged on a V100."""
    name, version, reqs = _meta("jax_cuda13_plugin")
    env = {"extra": "with-cuda", "sys_platform": "linux"}
    deps = tuple(
        canonicalize_name(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)
    )
    assert "nvidia-cuda-runtime" in deps and "jax-cuda13-pjrt" in deps
    versions = {name: (version,), "nvidia-cuda-runtime": ("13.0.96",),
                "nvidia-cudnn-cu13": ("9.13.0.50",)}  # fmt: skip
    verdicts = {v.name: v for v in judge(versions, V100_575, edges={name: deps})}
    assert set(verdicts) == {"jax-cuda13-plugin"}  # NVIDIA's wheels judged through it
    assert "pulls nvidia-cuda-runtime 13.0.96" in verdicts[name].why
    assert "needs compute capability >= 7.5" in verdicts[name].why


def test_library_majors_are_not_cuda_majors_in_real_wheels() -> None:
    cudnn, cudnn_v, _ = _meta("nvidia_cudnn_cu12")
    cupy, cupy_v, _ = _meta("cupy_cuda12x")
    assert (cudnn, cudnn_v.split(".")[0]) == ("nvidia-cudnn-cu12", "9")
    assert (cupy, cupy_v.split(".")[0]) == ("cupy-cuda12x", "14")
    assert cuda_major(cudnn, cudnn_v) == 12 and cuda_major(cupy, cupy_v) == 12
    node = Node(caps=("7.0",), driver_cuda="12.9", driver="575.57.08")
    (verdict,) = judge({cupy: (cupy_v,)}, node)
    assert verdict.ok and "CUDA 12" in verdict.why


def test_the_jax_plugins_fatbins_say_which_gpus_they_run_on() -> None:
    code = {v: scan((WHEELS / f"jax_cuda{v}_plugin-0.7.2-_prng.so.nv_fatbin").read_bytes())
            for v in ("12", "13")}  # fmt: skip
    assert code["12"].full_sass == ["5.0", "6.0", "7.0", "8.0", "9.0", "10.0", "12.0"]
    assert code["13"].full_sass == ["7.5", "8.0", "9.0", "10.0", "12.0"]
    assert code["13"].full_ptx == ["12.0"]
    assert covers("7.0", code["13"].full_sass, code["13"].full_ptx, ptx_jit=True) is None
    assert covers("7.0", code["12"].full_sass, code["12"].full_ptx, ptx_jit=True) == "sm_70"


def test_each_installed_distribution_belongs_to_the_stack_it_pulls() -> None:
    """``stacks``: the build's proof reads each distribution's CUDA major from what is
    installed: its own runtime version, name or label, else the nearest that say one in
    its dependency closure; None where they disagree; nothing for a CPU package."""
    versions = {
        "torch": "2.9.1", "nvidia-cuda-runtime-cu12": "12.8.90", "torchext": "0.1.0",
        "jax-cuda13-plugin": "0.7.2", "nvidia-cuda-runtime": "13.0.96", "numpy": "2.3.0",
        "both": "1.0", "cupy-cuda12x": "14.2.0",
    }  # fmt: skip
    edges = {
        "torch": ["nvidia-cuda-runtime-cu12"], "torchext": ["torch", "numpy"],
        "jax-cuda13-plugin": ["nvidia-cuda-runtime"], "both": ["torchext", "jax-cuda13-plugin"],
    }  # fmt: skip
    found = cuda_packages.stacks(versions, edges)
    assert found["torchext"] == cuda_packages.Stack(
        major=12, how="pulls nvidia-cuda-runtime-cu12 12.8.90 (CUDA 12.8)"
    )
    assert found["torch"] == found["torchext"]
    assert found["nvidia-cuda-runtime"] == cuda_packages.Stack(
        major=13, how="nvidia-cuda-runtime 13.0.96 (CUDA 13.0)"
    )
    assert found["cupy-cuda12x"] is not None and found["cupy-cuda12x"].major == 12
    assert found["both"] is None and "numpy" not in found


def test_each_package_s_wheels_against_the_node_s_arch_glibc_and_python() -> None:
    """``platform_verdict``, the rule on real wheel names (decord 0.6.0's, in lerobot's
    lock; mooncake-transfer-engine 0.3.11.post1's, in prime-rl's)."""
    decord = cuda_packages.Files(wheels=(
        "decord-0.6.0-py3-none-manylinux2010_x86_64.whl", "decord-0.6.0-py3-none-win_amd64.whl",
    ))  # fmt: skip
    mooncake = cuda_packages.Files(wheels=(
        "mooncake_transfer_engine-0.3.11.post1-cp312-cp312-manylinux_2_35_x86_64.whl",
        "mooncake_transfer_engine-0.3.11.post1-cp312-cp312-manylinux_2_39_aarch64.whl",
    ))  # fmt: skip
    gh200 = Node(caps=(), driver_cuda=None, arch="aarch64", glibc="2.35", python="3.12")
    x86 = Node(caps=(), driver_cuda=None, arch="x86_64", glibc="2.31", python="3.12")
    (d,) = judge({"decord": ("0.6.0",)}, gh200, files={"decord": decord})
    assert not d.ok and d.why == (
        "no wheel installs on this node (cp312-manylinux_2_35_aarch64): none of its 2 wheels "
        "is for aarch64; its newest wheel tag is py3-none-manylinux2010_x86_64, and it has no sdist"
    )
    assert judge({"decord": ("0.6.0",)}, x86, files={"decord": decord}) == ()
    m = cuda_packages.platform_verdict("mooncake-transfer-engine", "0.3.11.post1", mooncake, x86)
    assert m is not None and not m.ok
    assert "its x86_64 wheels need glibc >= 2.35, the node has 2.31" in m.why
    assert "newest wheel tag is cp312-cp312-manylinux_2_35_x86_64" in m.why
    py311 = Node(caps=(), driver_cuda=None, arch="x86_64", glibc="2.39", python="3.11")
    m311 = cuda_packages.platform_verdict(
        "mooncake-transfer-engine", "0.3.11.post1", mooncake, py311
    )
    assert m311 is not None and "its x86_64 wheels are for another Python" in m311.why
    built = cuda_packages.platform_verdict(
        "decord", "0.6.0", cuda_packages.Files(wheels=decord.wheels, sdist=True), gh200
    )
    assert built is not None and built.ok and built.why.endswith("built from its sdist on the node")
    unknown = Node(caps=(), driver_cuda=None, arch="aarch64", glibc="2.35", python=None)
    assert cuda_packages.platform_verdict("decord", "0.6.0", decord, unknown) is None


@pytest.mark.parametrize("extra", ["and-cuda", ""])
def test_tensorflow_is_judged_from_its_own_metadata(extra: str) -> None:
    """tensorflow 2.20.0's real Requires-Dist: with ``and-cuda`` it pulls the CUDA 12
    runtime, so tensorflow itself is a CUDA 12 build (driver >= 525.60.13, refused on 470);
    without, it pulls no NVIDIA wheel and is no GPU package. No TensorFlow row anywhere."""
    name, version, reqs = _meta("tensorflow-2.20.0")
    env = {"extra": extra, "sys_platform": "linux", "python_version": "3.11"}
    deps = tuple(
        canonicalize_name(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)
    )
    versions = {name: (version,), **{d: ("12.9.79",) for d in deps if d.startswith("nvidia-")}}
    old = Node(caps=("7.0",), driver_cuda="11.4", driver="470.82.01")
    verdicts = judge(versions, old, edges={name: deps})
    assert knowledge.load().gpu_package(name) is None
    if not extra:
        assert verdicts == () and not cuda_packages.gpu_stack(versions)
        return
    (tf,) = verdicts
    assert (tf.name, tf.ok) == ("tensorflow", False)
    assert tf.why.startswith(
        "built for CUDA 12.9 (pulls nvidia-cuda-runtime-cu12 12.9.79), needs driver >= 525.60.13"
    )
