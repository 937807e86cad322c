"""Stand-ins for torch's CUDA wheels of both majors, as real (small) ELF shared objects.

They stand in for PyPI's and download.pytorch.org's wheels (gigabytes, and the latter
unreachable from here) with the layout that matters, measured on torch 2.13.0's
``libtorch_cuda.so`` (DT_RUNPATH ``$ORIGIN/../../nvidia/nccl/lib``, ``.../nvidia/cu13/lib``):

- ``nvidia-nccl-cu12`` 2.27.5 and ``nvidia-nccl-cu13`` 2.27.7 both install
  ``nvidia/nccl/lib/libnccl.so.2`` (the shared path of issue 12); each library reports
  its own version through ``ncclGetVersion``;
- ``nvidia-cuda-runtime-cu12`` 12.6.77 installs ``nvidia/cuda_runtime/lib/libcudart.so.12``,
  ``nvidia-cuda-runtime`` 13.0.96 (unsuffixed, as CUDA 13's wheels are)
  ``nvidia/cu13/lib/libcudart.so.13``;
- ``torch`` 2.9.1+cu126 and +cu130: ``torch/lib/libtorch_cuda.so`` with DT_NEEDED on
  ``libnccl.so.2`` and ``libcudart.so.1X`` and the RUNPATHs above; ``import torch`` loads
  it (``ctypes``), so a missing library fails the import as it would on a node;
- ``torchext`` 0.1.0+cu130 (on the cu130 index) and 0.1.0 (PyPI, a CUDA 12 build): a CUDA
  extension built against torch 2.9.1 (stands in for vLLM / flash-attn wheels), whose
  ``_C.so`` needs the runtime of its major;
- ``jax-cuda13-plugin`` 0.7.2 (PyPI): JAX's CUDA 13 plugin, whose ``_prng.so`` needs
  ``libcudart.so.13`` (RUNPATH ``$ORIGIN/../nvidia/cu13/lib``) from the runtime it pulls;
- ``standin-numpy`` 2.1.0 (a profile package) on the PyPI stand-in, and PyPI's real
  ``setuptools`` wheel (downloaded once, ``cuda_artifacts``), which builds the projects.

The indexes: ``/cu126/`` and ``/cu130/`` (download.pytorch.org) and ``/simple/`` (PyPI),
served on 127.0.0.1 by ``buildkit.StandInIndex``, which records every request.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.tools import uv
from support import cuda_artifacts, require
from support.buildkit import StandInIndex, make_wheel, require_uv

SETUPTOOLS = "80.9.0"

TAG = "cp311-cp311-manylinux_2_28_x86_64"
NCCL = {12: ("nvidia-nccl-cu12", "2.27.5", 22705), 13: ("nvidia-nccl-cu13", "2.27.7", 22707)}
CUDART = {
    12: ("nvidia-cuda-runtime-cu12", "12.6.77", "nvidia/cuda_runtime/lib", 12060),
    13: ("nvidia-cuda-runtime", "13.0.96", "nvidia/cu13/lib", 13000),
}
VARIANT = {12: "cu126", 13: "cu130"}


def require_gcc() -> str:
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "gcc builds the stand-in ELF libraries")
    assert gcc is not None
    return gcc


def compile_so(
    work: Path,
    name: str,
    source: str,
    *,
    soname: str,
    needs: tuple[Path, ...] = (),
    runpath: tuple[str, ...] = (),
) -> bytes:
    """A shared object from C ``source`` (DT_NEEDED on ``needs``, DT_RUNPATH ``runpath``)."""
    gcc = require_gcc()
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"{name}.c"
    src.write_text(source)
    out = work / name
    args = [gcc, "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}"]
    for lib in needs:
        args += [f"-L{lib.parent}", f"-l:{lib.name}"]
    if runpath:
        args += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{':'.join(runpath)}"]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    return out.read_bytes()


TORCH_INIT = """\
import ctypes, os
__version__ = "{version}"
_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libtorch_cuda.so"))
_lib.torch_cuda_versions.restype = ctypes.c_char_p


def cuda_versions():
    return _lib.torch_cuda_versions().decode()
"""

EXT_INIT = """\
import ctypes, os
import torch
_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_C.so"))
TORCH = torch.__version__
"""


def build_wheels(root: Path) -> dict[str, Path]:
    """Every stand-in wheel, by ``name-version``."""
    work, files = root / "build", root / "files"
    wheels: dict[str, Path] = {}
    for major in (12, 13):
        n_name, n_ver, n_code = NCCL[major]
        nccl = compile_so(
            work / f"cu{major}",
            "libnccl.so.2",
            f"int ncclGetVersion(int *v) {{ *v = {n_code}; return 0; }}\n",
            soname="libnccl.so.2",
        )
        wheels[f"{n_name}-{n_ver}"] = make_wheel(
            files, n_name, n_ver, tag=TAG, files={"nvidia/nccl/lib/libnccl.so.2": nccl}
        )
        c_name, c_ver, c_dir, c_code = CUDART[major]
        cudart = compile_so(
            work / f"cu{major}",
            f"libcudart.so.{major}",
            f"int cudaRuntimeGetVersion(int *v) {{ *v = {c_code}; return 0; }}\n",
            soname=f"libcudart.so.{major}",
        )
        wheels[f"{c_name}-{c_ver}"] = make_wheel(
            files, c_name, c_ver, tag=TAG, files={f"{c_dir}/libcudart.so.{major}": cudart}
        )
        libs = (work / f"cu{major}" / "libnccl.so.2", work / f"cu{major}" / f"libcudart.so.{major}")
        torch_cuda = compile_so(
            work / f"torch-cu{major}",
            "libtorch_cuda.so",
            "#include <stdio.h>\n"
            "int ncclGetVersion(int *); int cudaRuntimeGetVersion(int *);\n"
            "static char buf[64];\n"
            "const char *torch_cuda_versions(void) { int n = 0, c = 0;\n"
            "  ncclGetVersion(&n); cudaRuntimeGetVersion(&c);\n"
            '  snprintf(buf, sizeof buf, "nccl %d cudart %d", n, c); return buf; }\n',
            soname="libtorch_cuda.so",
            needs=libs,
            runpath=("$ORIGIN/../../nvidia/nccl/lib", f"$ORIGIN/../../{c_dir}", "$ORIGIN"),
        )
        version = f"2.9.1+{VARIANT[major]}"
        wheels[f"torch-{version}"] = make_wheel(
            files,
            "torch",
            version,
            tag=TAG,
            requires=[f"{n_name}=={n_ver}", f"{c_name}=={c_ver}"],
            files={
                "torch/__init__.py": TORCH_INIT.format(version=version),
                "torch/lib/libtorch_cuda.so": torch_cuda,
            },
        )
        ext = compile_so(
            work / f"ext-cu{major}",
            "_C.so",
            "int cudaRuntimeGetVersion(int *);\n"
            "int ext_runtime(void) { int c = 0; cudaRuntimeGetVersion(&c); return c; }\n",
            soname="_C.so",
            needs=(libs[1],),
            runpath=(f"$ORIGIN/../{c_dir}",),
        )
        ext_version = "0.1.0+cu130" if major == 13 else "0.1.0"
        wheels[f"torchext-{ext_version}"] = make_wheel(
            files,
            "torchext",
            ext_version,
            tag=TAG,
            requires=["torch==2.9.1", c_name],
            files={"torchext/__init__.py": EXT_INIT, "torchext/_C.so": ext},
        )
    wheels["standin-numpy-2.1.0"] = make_wheel(files, "standin-numpy", "2.1.0")
    cudart13 = work / "cu13" / "libcudart.so.13"
    prng = compile_so(
        work / "jax-cu13",
        "_prng.so",
        "int cudaRuntimeGetVersion(int *);\n"
        "int prng_runtime(void) { int c = 0; cudaRuntimeGetVersion(&c); return c; }\n",
        soname="_prng.so",
        needs=(cudart13,),
        runpath=("$ORIGIN/../nvidia/cu13/lib",),
    )
    wheels["jax-cuda13-plugin-0.7.2"] = make_wheel(
        files,
        "jax-cuda13-plugin",
        "0.7.2",
        tag=TAG,
        requires=[f"{CUDART[13][0]}=={CUDART[13][1]}"],
        files={"jax_cuda13_plugin/__init__.py": "", "jax_cuda13_plugin/_prng.so": prng},
    )
    return wheels


def setuptools_wheel() -> Path:
    try:
        return cuda_artifacts.wheel("setuptools", SETUPTOOLS, "py3-none-any")
    except cuda_artifacts.Unavailable as exc:
        require("pypi", False, f"setuptools {SETUPTOOLS} builds the stand-in projects: {exc}")
        raise


def build_index(root: Path) -> StandInIndex:
    idx = StandInIndex(root)
    w = build_wheels(root)
    setuptools = root / "files" / setuptools_wheel().name
    shutil.copy(setuptools_wheel(), setuptools)
    idx.add("simple", setuptools)
    runtimes12 = [w["nvidia-nccl-cu12-2.27.5"], w["nvidia-cuda-runtime-cu12-12.6.77"]]
    runtimes13 = [w["nvidia-nccl-cu13-2.27.7"], w["nvidia-cuda-runtime-13.0.96"]]
    for wheel in [w["torch-2.9.1+cu126"], *runtimes12]:
        idx.add("cu126", wheel)
    for wheel in [w["torch-2.9.1+cu130"], w["torchext-0.1.0+cu130"], *runtimes13]:
        idx.add("cu130", wheel)
    for wheel in [*runtimes12, *runtimes13, w["torchext-0.1.0"], w["standin-numpy-2.1.0"],
                  w["jax-cuda13-plugin-0.7.2"]]:  # fmt: skip
        idx.add("simple", wheel)
    return idx.start()


@pytest.fixture(scope="module", name="cuda_index")
def cuda_index_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInIndex]:
    """The stand-in CUDA indexes for one test module (import ``cuda_index_fixture`` to get
    the ``cuda_index`` fixture); stopped when the module is done."""
    require_uv()
    require_gcc()
    idx = build_index(tmp_path_factory.mktemp("cuda-index"))
    try:
        yield idx
    finally:
        idx.stop()


#: A setuptools project whose lock takes torch and its CUDA extension from the cu130 index
#: (the shape of open-instruct's aarch64 fork), with a module of its own.
PYPROJECT = """\
[project]
name = "trainer"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["torch==2.9.1", "torchext==0.1.0"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
packages = ["trainer"]

[tool.uv]
environments = ["sys_platform == 'linux' and platform_machine == 'x86_64'"]

[tool.uv.sources]
torch = {{ index = "pytorch-cu130" }}
torchext = {{ index = "pytorch-cu130" }}

[[tool.uv.index]]
name = "pytorch-cu130"
url = "{url}/cu130"
explicit = true
"""


def make_project(index: StandInIndex, where: Path, env: dict[str, str]) -> Path:
    """The project above, locked by real uv against the stand-in indexes."""
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text(PYPROJECT.format(url=index.url))
    (where / "trainer").mkdir()
    (where / "trainer" / "__init__.py").write_text("import torchext\nNAME = 'trainer'\n")
    (where / "train.py").write_text("import trainer\n")
    subprocess.run(
        [*uv.uv_argv(), "lock", "--project", str(where), "--python", "3.11"],
        check=True, capture_output=True, env=env, timeout=300,
    )  # fmt: skip
    assert "2.9.1+cu130" in (where / "uv.lock").read_text()
    return where


def snapshot(root: Path) -> dict[str, str]:
    """Every file's sha256 and every directory under ``root``."""
    import hashlib

    out = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    return out | {str(p.relative_to(root)) + "/": "dir" for p in root.rglob("*") if p.is_dir()}
