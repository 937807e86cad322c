"""The fatbin reader against NVIDIA's own tools: fixtures compiled here with PyPI's nvcc
for chosen ``-gencode`` targets, and real CUDA libraries from PyPI wheels, each entry
compared with ``cuobjdump -all`` (arch with its a/f suffix, code version, compressed) and
the archs with ``cuobjdump -all --list-elf`` / ``--list-ptx``. Artifacts come from
``cuda_artifacts`` (downloaded once, sha256-checked; see its docstring for versions)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from hpcenv.binaries import archs
from hpcenv.kit import fatbin
from hpcenv.models.facts import from_json
from support import FACTS, cuda_artifacts, require
from support.cuobjdump_oracle import (
    as_listed,
    cuobjdump_lists,
    cuobjdump_rows,
    our_rows,
    real,
    seen_by_cuobjdump,
    tool,
)

KERNELS = """
__global__ void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
__global__ void mul(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= b[i]; }
extern "C" void launch(float *a, const float *b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }
"""

# --- fixtures compiled with nvcc -----------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = tool("nvcc")
    require("gcc", shutil.which("gcc") is not None, "gcc (nvcc's host compiler) not on PATH")
    tmp = tmp_path_factory.mktemp("nvcc")
    src = tmp / "k.cu"
    src.write_text(KERNELS)
    targets = {
        # a shared library: SASS 7.5 and 9.0a, SASS+PTX 10.0f, SASS 12.1f, PTX 8.0
        "lib.so": ["-shared", "-Xcompiler", "-fPIC",
                   "-gencode", "arch=compute_75,code=sm_75",
                   "-gencode", "arch=compute_80,code=compute_80",
                   "-gencode", "arch=compute_90a,code=sm_90a",
                   "-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]",
                   "-gencode", "arch=compute_120f,code=sm_121"],
        "lz4.o": ["-c", "--compress-mode=speed", "-Xfatbin", "-compress-all",
                  "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
        "stored.o": ["-c", "--no-compress", "-gencode", "arch=compute_86,code=[sm_86,compute_86]"],
        "concat.o": ["-c", "--concat", "-gencode", "arch=compute_80,code=[sm_80,compute_80]",
                     "-gencode", "arch=compute_90,code=sm_90",
                     "-gencode", "arch=compute_90a,code=sm_90a"],
        "rdc.o": ["-c", "-rdc=true", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
        "lto.o": ["-c", "-dc", "-gencode", "arch=compute_80,code=lto_80"],
        "raw.fatbin": ["-fatbin", "-gencode", "arch=compute_75,code=[sm_75,compute_75]"],
    }  # fmt: skip
    out = {}
    for name, args in targets.items():
        dest = tmp / name
        done = subprocess.run(
            [str(nvcc), *args, "-o", str(dest), str(src)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"nvcc {' '.join(args)}: {done.stderr[-2000:]}"
        out[name] = dest
    return out


@pytest.mark.slow
@pytest.mark.slow
def test_compiled_targets_keep_their_suffixes(built: dict[str, Path]) -> None:
    code = fatbin.scan(built["lib.so"])
    assert {"7.5", "9.0a", "10.0f", "12.1f"} == set(code.sass)
    assert {"8.0", "10.0f"} == set(code.ptx)
    assert code.ptx_isa == {"8.0": "9.5", "10.0f": "9.5"}  # nvcc 13.5 writes PTX ISA 9.5
    assert code.sections == (".nv_fatbin",)


def test_compression_modes(built: dict[str, Path]) -> None:
    lz4 = fatbin.scan(built["lz4.o"])
    assert {e.compression for e in lz4.entries} == {"lz4"}
    stored = fatbin.scan(built["stored.o"])
    assert stored.compressed == 0 and stored.sass == {"8.6": 1} and stored.ptx == {"8.6": 1}
    default = fatbin.scan(built["lib.so"])
    assert "zstd" in {e.compression for e in default.entries}  # nvcc 13's default


def test_concatenated_relocatable_lto_and_raw(built: dict[str, Path]) -> None:
    assert fatbin.scan(built["concat.o"]).sass == {"8.0": 1, "9.0": 1, "9.0a": 1}
    rdc = fatbin.scan(built["rdc.o"])
    assert rdc.sections == ("__nv_relfatbin",) and rdc.ptx == {"8.0": 1}
    lto = fatbin.scan(built["lto.o"])
    assert lto.lto == {"8.0": 1} and lto.sass == {} and lto.ptx == {}
    raw = fatbin.scan(built["raw.fatbin"])
    assert raw.sections == (fatbin.RAW,) and raw.sass == {"7.5": 1} and raw.ptx == {"7.5": 1}


@pytest.mark.parametrize(
    "name", ["lib.so", "lz4.o", "stored.o", "concat.o", "rdc.o", "lto.o", "raw.fatbin"]
)
def test_fixture_entries_equal_cuobjdump(built: dict[str, Path], name: str) -> None:
    rows, rc, err = cuobjdump_rows(built[name])
    assert rc == 0, err
    assert Counter(our_rows(fatbin.scan(built[name]))) == Counter(rows)


# --- real libraries from PyPI wheels -------------------------------------------------


@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.parametrize("key", ["bnb-cuda118", "bnb-cuda128", "bnb-cuda130", "curand", "nccl"])
def test_real_library_equals_cuobjdump(key: str) -> None:
    lib = real(key)
    code = fatbin.scan(lib)
    rows, rc, err = cuobjdump_rows(lib)
    assert rc == 0, err
    assert rows, "cuobjdump listed nothing: the comparison would prove nothing"
    assert Counter(our_rows(code)) == Counter(rows)
    elf, ptx = cuobjdump_lists(lib)
    assert as_listed(seen_by_cuobjdump(code).sass, "sass") == elf
    assert as_listed(seen_by_cuobjdump(code).ptx, "ptx") == ptx


def test_ptx_only_in_relocatable_fatbin_is_found() -> None:
    """bitsandbytes' CUDA 12.8 library: its PTX (for sm_120, ISA 8.7) sits only in
    ``__nv_relfatbin``; plain ``cuobjdump --list-ptx`` (without ``-all``) finds none."""
    lib = real("bnb-cuda128")
    code = fatbin.scan(lib)
    assert code.ptx == {"12.0": 6} and code.ptx_isa == {"12.0": "8.7"}
    assert code.by_section()[".nv_fatbin"]["ptx"] == {}
    plain = subprocess.run(
        [str(tool("cuobjdump")), "--list-ptx", str(lib)], capture_output=True, text=True
    )
    assert ".ptx" not in plain.stdout


def test_family_cubins_in_nccl() -> None:
    code = fatbin.scan(real("nccl"))
    assert code.sass["10.0f"] == 20
    assert "10.0f" in code.partial_sass and "10.0" in code.full_sass


def test_library_cuobjdump_rejects_is_read_past_its_stop() -> None:
    """xformers 0.0.28.post3's ``_C.so``: cuobjdump prints the first fatbin container's 7
    entries, then stops with "Invalid ELF". Its headers are readable: hpcenv reads all 19
    containers, and agrees with cuobjdump on everything cuobjdump printed."""
    lib = real("xformers")
    rows, rc, err = cuobjdump_rows(lib)
    assert rc != 0 and "Invalid ELF" in err
    code = fatbin.scan(lib)
    ours = Counter(our_rows(code))
    assert not Counter(rows) - ours  # every entry cuobjdump printed, we report too
    assert sum(ours.values()) > len(rows)
    assert code.containers == 19
    assert code.sass == {"6.0": 19, "7.0": 19, "7.5": 19, "8.0": 19, "9.0a": 19}
    assert code.ptx == {"6.0": 19, "8.0": 19}


# --- code outside the fatbin sections, and stub cubins ----------------------------------

EMBED = """
    .section .ldata,"aw"
    .balign 64
    .quad 0x1122334455667788
    .long 0xBA55ED50          /* a stray magic number in data: not a container */
    .short 1, 16
    .quad 0xFFFFFFFF
    .balign 8
    .incbin "{fatbin}"
    .balign 8
    .quad 0
"""


def test_fatbins_embedded_in_data_sections_are_read(built: dict[str, Path], tmp_path: Path) -> None:
    """cuFFT's layout, made here: a real fatbin (nvcc -fatbin: SASS and PTX 7.5) placed
    in a library's ``.ldata`` beside a stray magic number. cuobjdump lists nothing;
    hpcenv finds the one container, in its section, and not the stray magic."""
    asm = tmp_path / "embed.s"
    asm.write_text(EMBED.format(fatbin=built["raw.fatbin"]))
    lib = tmp_path / "libembed.so"
    done = subprocess.run(
        ["gcc", "-shared", "-o", str(lib), str(asm)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    code = fatbin.scan(lib)
    assert code.sections == (".ldata",) and code.containers == 1
    assert code.sass == {"7.5": 1} and code.ptx == {"7.5": 1}
    assert code.full_sass == ["7.5"]
    rows, _rc, _err = cuobjdump_rows(lib)
    assert rows == [] and our_rows(code) == []  # cuobjdump sees none of it, nor do we there


def test_a_cubin_without_kernels_is_not_code(built: dict[str, Path], tmp_path: Path) -> None:
    """A translation unit with a ``__device__`` variable and no kernel: nvcc still writes an
    sm_75 cubin, without a ``.text`` section (what cuFFT's and cuFFTW's ``.nv_fatbin`` hold).
    It cannot fail with "no kernel image"; a stored cubin with kernels is still code."""
    src = tmp_path / "var.cu"
    src.write_text("__device__ int counter;\n")
    lib = tmp_path / "libvar.so"
    done = subprocess.run(
        [str(tool("nvcc")), "-shared", "-Xcompiler", "-fPIC", "--no-compress",
         "-gencode", "arch=compute_75,code=sm_75", "-o", str(lib), str(src)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stub = fatbin.scan(lib)
    rows, rc, err = cuobjdump_rows(lib)
    assert rc == 0, err
    assert Counter(our_rows(stub)) == Counter(rows)  # the entries are as cuobjdump lists them
    assert {r[:2] for r in rows} == {("sass", "sm_75")}
    assert {e.kernels for e in stub.entries} == {False}
    assert not stub.launchable and stub.full_sass == []
    kernels = fatbin.scan(built["stored.o"])  # --no-compress, kernels add and mul
    assert {e.kernels for e in kernels.entries if e.kind == "sass"} == {True}
    assert kernels.launchable and kernels.full_sass == ["8.6"]


@pytest.mark.slow
@pytest.mark.slow
def test_cufft_keeps_its_kernels_in_ldata() -> None:
    """The real case: ``nvidia-cufft`` 12.0.0.61 (torch 2.13.0's CUDA 13 wheels from PyPI).
    Its ``.nv_fatbin`` is one compressed sm_75 cubin (kernel-less, by ``cuobjdump -xelf``
    and readelf), which is all cuobjdump lists; its kernels (SASS 7.5 to 12.0) are 23,983
    containers in ``.ldata``. Judged by the fatbin
    section alone, ``audit`` said it "has no code for sm_90" on an H100."""
    try:
        venv = cuda_artifacts.torch_cuda_venv()
    except cuda_artifacts.Unavailable as exc:
        require("torch-cuda-wheel", False, str(exc))
        raise
    libdir = next(venv.glob("lib/python3*/site-packages/nvidia/cu13/lib"))
    cufft = fatbin.scan(libdir / "libcufft.so.12")
    assert ".ldata" in cufft.sections and cufft.containers > 20_000
    assert {"8.0", "9.0", "10.0", "12.0"} <= set(cufft.full_sass)
    rows, rc, err = cuobjdump_rows(libdir / "libcufft.so.12")
    assert rc == 0, err
    assert Counter(our_rows(cufft)) == Counter(rows) == Counter([("sass", "sm_75", "[1,8]", True)])
    # cuFFTW (the FFTW interface over cuFFT) carries only a stored kernel-less stub
    assert not fatbin.scan(libdir / "libcufftw.so.12").launchable
    h100 = json.loads((FACTS / "h100-standin.json").read_text())
    h100["nvidia"].update(driver_version="590.44.01", cuda_driver_version="13.1")
    check = archs.check_venv(venv, from_json(h100))
    assert check.problems == (), check.problems
