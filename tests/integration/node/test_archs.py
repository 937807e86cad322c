"""``hpcenv archs PATH... [--json]`` on real CUDA libraries, wheels and a venv from PyPI:
the archs it prints equal ``cuobjdump -all --list-elf`` / ``--list-ptx``; wheels are read
member by member; a venv's libraries are grouped by the distribution that installed
them; unreadable input is one line with exit 2 (a broken file inside a venv is listed,
not fatal)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcenv import cli
from hpcenv.binaries import archs
from hpcenv.kit import fatbin
from support import cuda_artifacts, require
from support.cuobjdump_oracle import as_listed, cuobjdump_lists, real, wheel_of


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["archs", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.parametrize("key", ["bnb-cuda118", "bnb-cuda130", "curand", "nccl"])
def test_json_equals_cuobjdump(capsys: pytest.CaptureFixture[str], key: str) -> None:
    lib = real(key)
    code, out, _err = run_cli(capsys, "--json", str(lib))
    assert code == 0
    (entry,) = json.loads(out)["files"]
    elf, ptx = cuobjdump_lists(lib)
    assert elf, "cuobjdump listed no cubin: nothing would be compared"
    assert as_listed(entry["sass_entries"], "sass") == elf
    assert as_listed(entry["ptx_entries"], "ptx") == ptx
    assert entry["sass"] == list(entry["sass_entries"])  # X.Y, in order
    assert all(re.fullmatch(r"\d+\.\d[af]?", a) for a in entry["sass"] + entry["ptx"])


def test_wheel_members_are_read_without_unpacking(capsys: pytest.CaptureFixture[str]) -> None:
    whl = wheel_of("bnb-cuda118")
    code, out, _err = run_cli(capsys, "--json", str(whl))
    assert code == 0
    found = json.loads(out)
    names = sorted(Path(f["path"]).name for f in found["files"])
    assert names == [f"libbitsandbytes_cuda{v}.so" for v in (118, 121, 124, 126, 128, 130, 132)]
    assert found["libraries_read"] == 16  # the CPU, ROCm and XPU builds hold no CUDA code
    assert {f["distribution"] for f in found["files"]} == {"bitsandbytes"}
    assert {f["version"] for f in found["files"]} == {"0.50.2"}
    by_name = {Path(f["path"]).name: f for f in found["files"]}
    extracted = fatbin.scan(real("bnb-cuda128"))
    assert by_name["libbitsandbytes_cuda128.so"]["sass_entries"] == extracted.sass
    assert by_name["libbitsandbytes_cuda128.so"]["ptx"] == ["12.0"]


def test_ptx_isa_table_agrees_with_real_libraries() -> None:
    """bitsandbytes names each library for the CUDA release it was built with; the PTX ISA
    version in its entries maps (ptx_isa.toml) to that release (12.6 writes 8.5, as 12.5)."""
    for key in ("bnb-cuda118", "bnb-cuda128", "bnb-cuda130"):
        lib = real(key)
        isa = fatbin.scan(lib).max_ptx_isa
        assert isa is not None
        cuda, confirmed = archs.ptx_cuda(isa)
        built = re.search(r"cuda(\d+)(\d)\.so$", lib.name)
        assert built and confirmed
        assert cuda == f"{built.group(1)}.{built.group(2)}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv holding bitsandbytes, xformers and nvidia-curand-cu12 (installed by uv
    from the cached PyPI wheels, without their dependencies), an unowned library and a
    broken one."""
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    wheels = [wheel_of(k) for k in ("bnb-cuda118", "xformers", "curand")]
    root = cuda_artifacts.install_venv(tmp_path_factory.mktemp("archs") / "venv", wheels)
    site = next(root.glob("lib/python*/site-packages"))
    shutil.copy(real("curand"), site / "libloose.so")  # installed by hand: no RECORD owns it
    (site / "libbroken.so").write_text("not a library")
    return root


def test_venv_grouped_by_distribution(capsys: pytest.CaptureFixture[str], venv: Path) -> None:
    code, out, _err = run_cli(capsys, "--json", str(venv))
    assert code == 0
    found = json.loads(out)
    dists = {(f["distribution"], Path(f["path"]).name) for f in found["files"]}
    assert ("xformers", "_C.so") in dists
    assert ("nvidia-curand-cu12", "libcurand.so.10") in dists
    assert ("bitsandbytes", "libbitsandbytes_cuda130.so") in dists
    assert (None, "libloose.so") in dists
    assert [Path(e["path"]).name for e in found["errors"]] == ["libbroken.so"]
    assert "not an ELF file" in found["errors"][0]["error"]
    site = next(venv.glob("lib/python*/site-packages"))
    same = json.loads(run_cli(capsys, "--json", str(site))[1])  # site-packages directly
    assert same["files"] == found["files"]


def test_table_for_people(capsys: pytest.CaptureFixture[str], venv: Path) -> None:
    code, out, err = run_cli(capsys, str(venv))
    assert code == 0
    assert "xformers" in out and "9.0a" in out and "bitsandbytes" in out
    assert "carry GPU code" in out
    assert "libbroken.so" in err


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_text("no zip here")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    lib = real("bnb-cuda130")
    cut = tmp_path / "cut.so"
    cut.write_bytes(lib.read_bytes()[: lib.stat().st_size // 3])
    cases = {
        str(fake): "not a wheel",
        str(empty_dir): "no lib/python*/site-packages",
        str(cut): "truncated",
        str(tmp_path / "missing.so"): "no such file",
    }
    for path, message in cases.items():
        code, out, err = run_cli(capsys, path)
        assert code == 2, path
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
        assert out == ""


def test_stripped_libraries(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``strip --strip-all`` keeps the fatbin sections (they are loaded): same answer. With
    the section headers removed (what ``sstrip`` does) the sections cannot be found by
    name: one line naming the file, exit 2."""
    strip = shutil.which("strip")
    require("binutils", strip is not None, "strip (binutils) not installed")
    assert strip is not None
    lib = real("bnb-cuda130")
    stripped = tmp_path / "stripped.so"
    subprocess.run([strip, "--strip-all", "-o", str(stripped), str(lib)], check=True)
    assert stripped.stat().st_size < lib.stat().st_size
    before, after = fatbin.scan(lib), fatbin.scan(stripped)
    assert (after.sass, after.ptx, after.ptx_isa) == (before.sass, before.ptx, before.ptx_isa)
    assert after.sass  # a library with GPU code, or the comparison proves nothing
    data = bytearray(lib.read_bytes())
    data[0x28:0x30] = b"\0" * 8  # e_shoff: no section headers
    data[0x3C:0x40] = b"\0" * 4
    headless = tmp_path / "headless.so"
    headless.write_bytes(bytes(data))
    code, _out, err = run_cli(capsys, str(headless))
    assert code == 2 and "no section headers" in err and err.count("\n") == 1
