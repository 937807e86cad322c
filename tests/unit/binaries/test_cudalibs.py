"""The build's one-CUDA-stack proof per distribution (issue 41): each installed object is
checked against the CUDA major of the stack its own distribution belongs to, read from what
is installed (RECORD owners, each distribution's runtime wheel, name or label, and the
``Requires-Dist`` edges, an extra's included: the JAX plugin pulls its runtime through
``with-cuda``), never from the profile. Real ELF objects (gcc) in a hand-written
site-packages (``support.standin_site``: PyPI's CUDA wheels are gigabytes); the JAX
plugin's METADATA is the real one (tests/data/wheels, ORIGIN there).

Before: ``build/swap.py`` checked every object against the profile torch's major
(``cudalibs.check(site, 12)`` under a cu126 profile), so a ``jax[cuda13]`` set beside a
CUDA 12 torch failed the build ("_prng.so needs libcudart.so.13 ... belongs to CUDA 13
..., not CUDA 12"), and a set without torch under a CPU profile was not checked at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.binaries import cudalibs
from hpcenv.build import swap
from support import DATA
from support.standin_site import install, library, linking, site_of

PLUGIN_METADATA = (
    DATA / "wheels" / "jax_cuda13_plugin-0.7.2-cp311-cp311-manylinux_2_27_x86_64.whl.METADATA"
)
CUDART12 = "nvidia/cuda_runtime/lib"
CUDART13 = "nvidia/cu13/lib"


def _jax_cuda13(
    site: Path, work: Path, *, runtime: bool = True, needs: tuple[Path, ...] = ()
) -> None:
    """jax-cuda13-plugin 0.7.2 (its real METADATA) whose ``_prng.so`` needs libcudart.so.13
    (and ``needs``), with its pjrt and, if ``runtime``, nvidia-cuda-runtime 13.0.96."""
    cudart13, data13 = library(work, "libcudart.so.13")
    if runtime:
        install(
            site, "nvidia-cuda-runtime", "13.0.96", files={f"{CUDART13}/libcudart.so.13": data13}
        )
    prng = linking(
        work, "jax_cuda13_plugin/_prng.so", (cudart13, *needs),
        ("$ORIGIN/../nvidia/cu13/lib", "$ORIGIN/../nvidia/cublas/lib"),
    )  # fmt: skip
    install(
        site, "jax-cuda13-plugin", "0.7.2",
        files={"jax_cuda13_plugin/_prng.so": prng}, metadata=PLUGIN_METADATA.read_text(),
    )  # fmt: skip
    install(site, "jax-cuda13-pjrt", "0.7.2")


def _torch_cuda12(site: Path, work: Path) -> None:
    """PyPI-like torch 2.9.1 (no label: its CUDA is the runtime it pulls, 12.6) and a CUDA
    extension that depends on torch alone, both needing libcudart.so.12."""
    cudart12, data12 = library(work, "libcudart.so.12")
    install(
        site, "nvidia-cuda-runtime-cu12", "12.6.77", files={f"{CUDART12}/libcudart.so.12": data12}
    )
    torch_cuda = linking(
        work, "torch/lib/libtorch_cuda.so", (cudart12,), ("$ORIGIN/../../nvidia/cuda_runtime/lib",)
    )
    install(site, "torch", "2.9.1", files={"torch/lib/libtorch_cuda.so": torch_cuda},
            requires=["nvidia-cuda-runtime-cu12==12.6.77; platform_system == 'Linux'"])  # fmt: skip
    ext = linking(work, "torchext/_C.so", (cudart12,), ("$ORIGIN/../nvidia/cuda_runtime/lib",))
    install(site, "torchext", "0.1.0", files={"torchext/_C.so": ext}, requires=["torch==2.9.1"])


def test_jax_cuda13_beside_a_cuda_12_torch_is_two_stacks_each_proven(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = site_of(venv)
    _torch_cuda12(site, tmp_path / "build")
    _jax_cuda13(site, tmp_path / "build")
    after = swap.installed(venv)
    assert "nvidia-cuda-runtime" in after["jax-cuda13-plugin"].optional  # its with-cuda extra
    check = swap.proof(venv, after)
    assert check is not None and check.ok, check and check.problems
    assert check.major is None and set(check.objects) == {  # two majors
        "torch/lib/libtorch_cuda.so", "torchext/_C.so", "jax_cuda13_plugin/_prng.so",
    }  # fmt: skip
    assert check.stacks == {
        "torch 2.9.1": "CUDA 12, pulls nvidia-cuda-runtime-cu12 12.6.77 (CUDA 12.6)",
        "torchext 0.1.0": "CUDA 12, pulls nvidia-cuda-runtime-cu12 12.6.77 (CUDA 12.6)",
        "jax-cuda13-plugin 0.7.2": "CUDA 13, jax-cuda13-plugin 0.7.2 (CUDA 13)",
    }
    assert check.to_json()["stacks"] == check.stacks
    # what the build did before: every object against the profile's CUDA 12
    (before,) = cudalibs.check(site, 12).problems
    assert "_prng.so needs libcudart.so.13" in before and "not CUDA 12" in before


def test_an_object_linking_the_other_stacks_library_is_named(tmp_path: Path) -> None:
    """The JAX plugin's object resolves libcublas.so.12 from torch's CUDA 12 wheel: mixed
    majors in one object, named with the distribution and the stack it belongs to."""
    venv = tmp_path / "venv"
    site = site_of(venv)
    _torch_cuda12(site, tmp_path / "build")
    cublas12, data = library(tmp_path / "build", "libcublas.so.12")
    install(
        site, "nvidia-cublas-cu12", "12.6.4.1", files={"nvidia/cublas/lib/libcublas.so.12": data}
    )
    _jax_cuda13(site, tmp_path / "build", needs=(cublas12,))
    check = swap.proof(venv, swap.installed(venv))
    assert check is not None
    assert check.problems == (
        "jax_cuda13_plugin/_prng.so (jax-cuda13-plugin 0.7.2) needs libcublas.so.12: "
        "nvidia/cublas/lib/libcublas.so.12 belongs to CUDA 12 (nvidia-cublas-cu12 12.6.4.1), "
        "not CUDA 13 (its stack: jax-cuda13-plugin 0.7.2 (CUDA 13))",
    )


def test_a_set_without_torch_is_proven_too(tmp_path: Path) -> None:
    """No torch, no profile backend: the JAX plugin's missing runtime is still caught."""
    venv = tmp_path / "venv"
    _jax_cuda13(site_of(venv), tmp_path / "build", runtime=False)
    check = swap.proof(venv, swap.installed(venv))
    assert check is not None and not check.ok
    assert (
        "_prng.so (jax-cuda13-plugin 0.7.2) needs libcudart.so.13, which is missing"
        in (check.problems[0])
    )


def test_an_object_of_no_known_stack_must_link_one_major(tmp_path: Path) -> None:
    site = site_of(tmp_path / "venv")
    work = tmp_path / "build"
    (c12, d12), (c13, d13) = library(work, "libcudart.so.12"), library(work, "libcudart.so.13")
    install(site, "nvidia-cuda-runtime-cu12", "12.6.77", files={f"{CUDART12}/libcudart.so.12": d12})
    install(site, "nvidia-cuda-runtime", "13.0.96", files={f"{CUDART13}/libcudart.so.13": d13})
    both = linking(work, "mixed/_ext.so", (c12, c13), ())
    install(site, "mixed", "1.0", files={"mixed/_ext.so": both})
    (problem,) = cudalibs.check(site, stacks={"mixed": None}).problems
    assert problem == (
        "mixed/_ext.so (mixed 1.0) links libraries of two CUDA majors: "
        "libcudart.so.12 (CUDA 12), libcudart.so.13 (CUDA 13)"
    )


def test_no_cuda_object_no_proof(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    install(site_of(venv), "numpy", "2.3.0", files={"numpy/__init__.py": b""})
    assert swap.proof(venv, swap.installed(venv)) is None


@pytest.mark.parametrize("given", [12, 13])
def test_one_major_given_checks_every_object_against_it(tmp_path: Path, given: int) -> None:
    venv = tmp_path / "venv"
    _jax_cuda13(site_of(venv), tmp_path / "build")
    check = cudalibs.check(site_of(venv), given)
    assert check.ok == (given == 13) and check.major == given


def test_the_installed_torch_must_be_the_plans_major(tmp_path: Path) -> None:
    """The stacks are read from what is installed; the plan's torch major is still held
    against the installed torch (the swap installed the node's torch)."""
    venv = tmp_path / "venv"
    _torch_cuda12(site_of(venv), tmp_path / "build")
    after = swap.installed(venv)
    ok = swap.proof(venv, after, torch_major=12)
    assert ok is not None and ok.ok
    wrong = swap.proof(venv, after, torch_major=13)
    assert wrong is not None and wrong.problems[0] == (
        "torch 2.9.1 is a CUDA 12 build (pulls nvidia-cuda-runtime-cu12 12.6.77 (CUDA 12.6)), "
        "the plan's torch is CUDA 13"
    )
