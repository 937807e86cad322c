"""``hpcenv audit VENV`` reads the binaries: every installed distribution with CUDA code
must carry SASS that runs on each GPU of the node, or PTX the node's driver can JIT.

The venv is real (uv) and holds real CUDA libraries from PyPI (bitsandbytes 0.50.2,
xformers 0.0.28.post3, nvidia-curand-cu12 10.3.10.19). Its torch is a stand-in: a wheel
``torch 2.7.1`` without ``nvidia-*`` dependencies whose ``torch/lib/libtorch_cuda.so`` is
a real CUDA 12.8 library (bitsandbytes' ``libbitsandbytes_cuda128.so``: SASS 7.0-12.0,
PTX 12.0 of ISA 8.7) and whose ``torch/version.py`` says ``cuda = '12.8'``. It stands in
for the aarch64 torch wheels of download.pytorch.org that bundle their CUDA libraries
(unreachable from here, and gigabytes); a real CUDA torch from PyPI is audited in
``bench/bench_archs.py``. The nodes are the recorded facts in ``tests/data/facts/``; a
Pascal node (6.1) is that V100 file with its GPUs replaced, written in the test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from hpcenv import cli
from hpcenv.binaries import archs
from hpcenv.kit import fatbin
from hpcenv.models.facts import from_json
from hpcenv.project import audit
from support import FACTS, cuda_artifacts, require
from support.cuobjdump_oracle import real, wheel_of
from support.fatbin_build import F_64BIT_LINUX, container, entry


def write_wheel(out: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A real wheel (zip with METADATA, WHEEL, RECORD) holding ``files``."""
    info = f"{name}-{version}.dist-info"
    files = dict(files)
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{info}/METADATA"] = meta.encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: hpcenv-tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
    )
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    whl = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    tmp = tmp_path_factory.mktemp("audit")
    torch = write_wheel(
        tmp,
        "torch",
        "2.7.1",
        {
            "torch/__init__.py": b"__version__ = '2.7.1'\n",
            "torch/version.py": b"from typing import Optional\n__version__ = '2.7.1'\n"
            b"cuda: Optional[str] = '12.8'\n",
            "torch/lib/libtorch_cuda.so": real("bnb-cuda128").read_bytes(),
        },
    )
    wheels = [torch, *(wheel_of(k) for k in ("bnb-cuda118", "xformers", "curand"))]
    root = cuda_artifacts.install_venv(tmp / "venv", wheels)
    return root


def facts_file(tmp_path: Path, base: str, gpu: dict[str, str] | None = None) -> Path:
    data = json.loads((FACTS / base).read_text())
    if gpu:
        for g in data["nvidia"]["gpus"]:
            g.update(gpu)
    out = tmp_path / f"facts-{base}"
    out.write_text(json.dumps(data))
    return out


def test_bundled_cuda_torch_is_read_from_the_binary(venv: Path, tmp_path: Path) -> None:
    facts = from_json(json.loads(facts_file(tmp_path, "v100-supercloud.json").read_text()))
    result = audit.audit(venv, facts)
    assert result.build == "cu128" and result.cuda == "12.8"  # not guessed as CPU
    assert "torch/lib/libtorch_cuda.so carries CUDA code" in result.evidence
    assert result.ok, result.message
    # the binaries were read, so the hand-kept arch table is not consulted (nor missed)
    assert not any("does not know the GPU archs" in w for w in result.warnings)


def test_package_without_code_for_the_gpu_is_named(venv: Path, tmp_path: Path) -> None:
    """A Pascal node (6.1): torch's and bitsandbytes' CUDA 12.8 libraries start at 7.0;
    xformers (SASS 6.0) and curand (SASS 6.0) run there."""
    path = facts_file(tmp_path, "v100-supercloud.json", {"compute_capability": "6.1",
                                                         "name": "Tesla P40"})  # fmt: skip
    facts = from_json(json.loads(path.read_text()))
    result = audit.audit(venv, facts)
    assert not result.ok
    assert "torch 2.7.1: libtorch_cuda.so has no code for sm_61" in result.message
    assert "bitsandbytes 0.50.2: libbitsandbytes_cuda128.so has no code for sm_61" in result.message
    assert "SASS 7.0, 7.5, 8.0" in result.message  # what it carries
    assert "a 6.1 GPU needs SASS 6.0-6.1 or PTX <= 6.1" in result.message
    assert "no kernel image is available" in result.message
    assert "xformers" not in result.message and "curand" not in result.message
    code = cli.main(["audit", str(venv), "--facts", str(path), "--json"])
    assert code == 3


def test_per_cuda_alternatives_judge_torchs_cuda(venv: Path, tmp_path: Path) -> None:
    """bitsandbytes loads the library for torch's CUDA (12.8 here): its CUDA 13 builds,
    which dropped Volta, do not fail a V100 node."""
    facts = from_json(json.loads(facts_file(tmp_path, "v100-supercloud.json").read_text()))
    check = archs.check_venv(venv, facts, torch_cuda="12.8")
    assert check.problems == () and check.torch_read
    wrong = archs.check_venv(venv, facts, torch_cuda="13.0")
    assert any("libbitsandbytes_cuda130.so has no code for sm_70" in p for p in wrong.problems)


def test_ptx_counts_only_when_the_driver_can_jit_it(tmp_path: Path) -> None:
    """A library with SASS 8.0 and PTX 8.0 of ISA 8.7 (CUDA 12.8) on a 12.0 GPU: runs
    through PTX under a CUDA 12.8 driver, not under a 12.7 one (GH200's 565)."""
    lib = tmp_path / "libk.so"
    lib.write_bytes(
        container(entry(2, 80), entry(1, 80, flags=F_64BIT_LINUX, version=(8, 7), payload=b"x"))
    )
    f = archs.FileCode(path=str(lib), code=fatbin.scan(lib))
    warnings: set[str] = set()
    how, _ = archs._judge(f, "12.0", "12.8", warnings)
    assert how == "PTX 8.0"
    how, need = archs._judge(f, "12.0", "12.7", warnings)
    assert how is None and "needs a driver for CUDA >= 12.8" in need
    assert archs._judge(f, "8.6", None, warnings)[0] == "sm_80"


def test_driver_cuda_from_facts_or_knowledge(tmp_path: Path) -> None:
    data = json.loads((FACTS / "gh200-isambard.json").read_text())
    assert archs.driver_cuda(from_json(data)) == "12.7"
    data["nvidia"]["cuda_driver_version"] = None  # then hpcenv.knowledge's driver table
    assert archs.driver_cuda(from_json(data)) == "12.6"  # 565 runs 12.6 outright
