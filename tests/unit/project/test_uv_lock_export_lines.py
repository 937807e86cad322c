"""``uv export`` lines read by ``hpcenv.project.uv_lock``: a ``name==version`` line (how uv
prints a package from an index) is read by a pattern, anything else by ``packaging``'s
``Requirement``, with the same name, URL and pins either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from hpcenv.project.uv_lock import _PIN, _requirement
from hpcenv.utils.errors import BadInput

#: lines of ``uv export --frozen`` of the real locks in tests/data/projects (markers cut)
PINS = (
    "torch==2.9.1+cu128",
    "nvidia-cuda-runtime-cu12==12.8.90",
    "nvidia-cublas==13.1.0.3",
    "backports-tarfile==1.2.0",
    "zope-interface==8.0.1",
    "ruamel-yaml-clib==0.2.14",
    "pytorch-triton==3.5.0+gitbfeb0668",
    "vllm==0.11.0rc2",
    "setuptools==80.9.0",
    "typing-extensions==4.15.0",
    "jaxtyping==0.3.2.post1",
    "torchvision==0.24.0.dev20250902+cu128",
    "Foo.Bar==1.0",  # a name as written (canonicalised by the caller)
)
OTHERS = (
    "vllm @ https://github.com/vllm-project/vllm/releases/download/v0.26.0/"
    "vllm-0.26.0%2Bcu129-cp38-abi3-manylinux_2_31_aarch64.whl",
    "dion @ git+https://github.com/samsja/dion.git@d891eebbd950a6ff11d9b5f806282e33df83df9d",
    "accelerate[torch]==1.10.1",
    "foo===1.0-weird",
    "foo==1.*",
)


def _packaging(line: str) -> tuple[str, str | None, tuple[str, ...]]:
    req = Requirement(line)
    return req.name, req.url, tuple(s.version for s in req.specifier if s.operator in ("==", "==="))


@pytest.mark.parametrize("line", PINS)
def test_a_pin_is_read_by_the_pattern_as_packaging_reads_it(line: str) -> None:
    assert _PIN.fullmatch(line) is not None
    assert _requirement(line, Path("uv.lock")) == _packaging(line)


@pytest.mark.parametrize("line", OTHERS)
def test_any_other_line_is_read_by_packaging(line: str) -> None:
    assert _requirement(line, Path("uv.lock")) == _packaging(line)


@pytest.mark.parametrize("line", ["torch=2.9.1", "==2.9.1", "torch==2.9.1 extra"])
def test_a_line_packaging_cannot_read_is_bad_input_naming_the_lock(line: str) -> None:
    with pytest.raises(BadInput, match=r"^uv.lock: uv export printed"):
        _requirement(line, Path("uv.lock"))
