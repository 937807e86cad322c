"""The compiled-wheel cache (``flashattn_build.build_cached_wheel``).

flash-attn needs CUDA and ~50 minutes, so the cache is shown with a small stand-in:
a real C extension package compiled by gcc through ``uv build`` (setuptools). The
ABI key comes from the real CPU torch in a venv built here (``abi_key``).
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from hpcenv.build import flashattn as flashattn_build
from hpcenv.tools import uv
from hpcenv.utils.errors import BuildFailed
from support import require
from support.buildkit import require_local_build, require_uv

SETUP = """
from setuptools import Extension, setup
setup(name="standin-ext", version="1.0", packages=["standin_ext"],
      ext_modules=[Extension("standin_ext._core", ["core.c"])])
"""
CORE = r"""
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&mod); }
"""


def stand_in_source(root: Path) -> Path:
    src = root / "standin-ext"
    (src / "standin_ext").mkdir(parents=True)
    (src / "standin_ext" / "__init__.py").write_text("from ._core import answer\n")
    (src / "core.c").write_text(CORE)
    (src / "setup.py").write_text(SETUP)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    return src


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_uv()
    require("gcc", shutil.which("gcc") is not None, "gcc is not installed")
    path = tmp_path_factory.mktemp("wheelcache") / "venv"
    uv.venv(path, "3.11")
    return path


KEY = {
    "torch": "2.13.0+cpu",
    "python_tag": "cp311",
    "arch": "x86_64",
    "cuda_archs": "90",
    "cxx11abi": "True",
}


def test_first_build_then_cache_hit(venv: Path, cache: Path, tmp_path: Path) -> None:
    src = stand_in_source(tmp_path)
    calls: list[Path] = []

    def build(out: Path) -> None:
        calls.append(out)
        uv.build_wheel(str(src), out, python=venv / "bin" / "python")

    first = flashattn_build.build_cached_wheel("standin-ext", "1.0", KEY, build)
    assert not first.hit and len(calls) == 1
    assert first.path.is_file() and first.path.parent.parent == cache / "wheels"
    names = zipfile.ZipFile(first.path).namelist()
    assert any(n.startswith("standin_ext/_core") and n.endswith(".so") for n in names)
    second = flashattn_build.build_cached_wheel("standin-ext", "1.0", KEY, build)
    assert second.hit and second.path == first.path and len(calls) == 1

    uv.install(venv, [str(second.path)])
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import standin_ext; print(standin_ext.answer())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == "42"

    other = flashattn_build.build_cached_wheel(
        "standin-ext", "1.0", {**KEY, "cuda_archs": "80"}, build
    )
    assert not other.hit and other.path != first.path and len(calls) == 2
    assert sorted(p.name for p in (cache / "wheels").iterdir() if p.is_dir()) == sorted(
        [first.path.parent.name, other.path.parent.name]
    )


def test_failed_build_leaves_no_entry(cache: Path) -> None:
    def broken(out: Path) -> None:
        (out / "half.whl.part").write_text("partial")
        raise BuildFailed("compiler died")

    with pytest.raises(BuildFailed, match="compiler died"):
        flashattn_build.build_cached_wheel("standin-ext", "1.0", KEY, broken)
    left = [p.name for p in (cache / "wheels").iterdir() if not p.name.endswith(".lock")]
    assert left == []


def test_abi_key_from_real_torch(tmp_path: Path) -> None:
    wheel = require_local_build()
    venv = tmp_path / "venv"
    uv.venv(venv, "3.11")
    uv.install(venv, [str(wheel)], extra=["--find-links", str(wheel.parent)])
    key = flashattn_build.abi_key(venv).fields()
    assert key["torch"] == "2.13.0+cpu"
    assert key["python_tag"] == "cp311" and key["arch"] == "x86_64"
    assert key["cxx11abi"] in ("True", "False") and key["torch_cuda"] == "None"
