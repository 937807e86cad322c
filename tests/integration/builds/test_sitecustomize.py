"""The sm90a fix (sitecustomize/sm90a.py) with the real CPU torch.

The environment is built here with real uv from the wheelhouse torch and the fix
installed by ``hpcenv.build.fixes.install`` (as a build does). This machine has no GPU:
``torch.cuda.is_available`` / ``device_count`` / ``get_device_capability`` /
``get_arch_list`` are replaced in the child process to stand in for a GH200 node
(capability 9.0, an aarch64 build listing ``sm_90a``) or an A100 (8.0).

torch 2.13 already parses arch names by their digits (the upstream fix). To show the
crash the fix exists for, the test venv's ``cpp_extension.py`` (a fresh copy, never
the uv cache's hard-linked file) gets its one parsing line reverted to the form of
torch <= 2.6 quoted in pytorch/pytorch issue 145642
(``int(arch.split('_')[1])``); everything else is the real torch code.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.build import fixes
from hpcenv.tools import uv
from support.buildkit import require_local_build

NEW_PARSE = """int("".join(re.findall(r"\\d+", arch.split('_')[1])))"""
OLD_PARSE = "int(arch.split('_')[1])"

PROBE = r"""
import json, os, sys
case = json.loads(sys.argv[1])
if case.get("preset") is None:
    os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
else:
    os.environ["TORCH_CUDA_ARCH_LIST"] = case["preset"]
import torch
cap = tuple(case["cap"]) if case["cap"] else None
calls = {"is_available": 0, "device_count": 0, "get_device_capability": 0, "_lazy_init": 0}

def counted(name, fn):
    def wrapper(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)
    return wrapper

torch.cuda.is_available = counted("is_available", lambda: cap is not None)
torch.cuda.device_count = counted("device_count", lambda: 1 if cap else 0)
torch.cuda.get_device_capability = counted("get_device_capability", lambda i=0: cap)
torch.cuda._lazy_init = counted("_lazy_init", torch.cuda._lazy_init)
torch.cuda.get_arch_list = lambda: case["arches"]
out = {"torch_at_start": case.get("torch_at_start")}
import torch.utils.cpp_extension as ce
out["calls_at_import"] = dict(calls)
out["cuda_initialized_at_import"] = torch.cuda.is_initialized()
out["wrapped"] = bool(getattr(ce._get_cuda_arch_flags, "_hpcenv_sm90a", False))
out["arch_list_env"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
if case.get("clear_after_import"):
    os.environ["TORCH_CUDA_ARCH_LIST"] = ""
try:
    out["flags"] = ce._get_cuda_arch_flags()
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
out["arch_list_env_after"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
out["calls_after"] = dict(calls)
print(json.dumps(out))
"""

GH200_ARCHES = ["sm_80", "sm_90", "sm_90a"]  # aarch64 cu126 torch.cuda.get_arch_list()
A100_ARCHES = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    wheel = require_local_build()
    path = tmp_path_factory.mktemp("sm90a") / "venv"
    uv.venv(path, "3.11")
    uv.install(path, [str(wheel)], extra=["--find-links", str(wheel.parent)])
    src = next(path.glob("lib/python3*/site-packages/torch/utils/cpp_extension.py"))
    text = src.read_text()
    assert text.count(NEW_PARSE) == 1, "torch's arch parsing line changed; update this test"
    # uv hard-links installed files to its cache: write a new file (new inode) so the
    # edit stays in this venv and never reaches the cache or other environments.
    edited = src.with_suffix(".py.edited")
    edited.write_text(text.replace(NEW_PARSE, OLD_PARSE))
    inode = src.stat().st_ino
    os.replace(edited, src)
    assert src.stat().st_ino != inode
    assert fixes.install(path, ["sm90a"]) == ["hpcenv_fix_sm90a"]
    yield path


def probe(venv: Path, *, fixes_on: bool = True, **case: object) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    env["HPCENV_NO_FIXES"] = "0" if fixes_on else "1"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PROBE, json.dumps(case)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_gh200_crashes_without_the_fix(venv: Path) -> None:
    out = probe(venv, fixes_on=False, cap=[9, 0], arches=GH200_ARCHES)
    assert out["error"] == "ValueError: invalid literal for int() with base 10: '90a'"
    assert out["wrapped"] is False


def test_gh200_with_the_fix_builds_for_sm90(venv: Path) -> None:
    out = probe(venv, cap=[9, 0], arches=GH200_ARCHES)
    assert "error" not in out, out
    assert out["wrapped"] is True
    assert out["arch_list_env"] is None  # nothing set at import ...
    assert out["arch_list_env_after"] == "9.0"  # ... but from the node's GPU when built
    flags = out["flags"]
    assert isinstance(flags, list)
    assert "-gencode=arch=compute_90,code=sm_90" in flags
    assert not [f for f in flags if "sm_80" in f or "90a" in f]


def test_importing_cpp_extension_does_not_touch_cuda(venv: Path) -> None:
    """DeepSpeed and inductor import cpp_extension in processes that fork later: the fix
    must not read the GPUs (which initialises CUDA) at that import, only when torch
    builds an extension."""
    out = probe(venv, cap=[9, 0], arches=GH200_ARCHES)
    assert out["wrapped"] is True
    assert out["calls_at_import"] == {
        "is_available": 0,
        "device_count": 0,
        "get_device_capability": 0,
        "_lazy_init": 0,
    }
    assert out["cuda_initialized_at_import"] is False
    after = out["calls_after"]
    assert isinstance(after, dict) and after["get_device_capability"] > 0  # read when building


def test_gh200_list_emptied_after_import_is_set_when_building(venv: Path) -> None:
    out = probe(venv, cap=[9, 0], arches=GH200_ARCHES, clear_after_import=True)
    assert "error" not in out, out
    assert out["arch_list_env_after"] == "9.0"
    assert "-gencode=arch=compute_90,code=sm_90" in out["flags"]  # type: ignore[operator]


@pytest.mark.slow
def test_gh200_suffix_tolerated_with_native(venv: Path) -> None:
    """TORCH_CUDA_ARCH_LIST=native makes torch parse get_arch_list() (with sm_90a)."""
    without = probe(venv, fixes_on=False, cap=[9, 0], arches=GH200_ARCHES, preset="native")
    assert without["error"] == "ValueError: invalid literal for int() with base 10: '90a'"
    out = probe(venv, cap=[9, 0], arches=GH200_ARCHES, preset="native")
    assert "error" not in out, out
    assert out["arch_list_env_after"] == "native"  # the user's setting is kept
    assert "-gencode=arch=compute_90,code=sm_90" in out["flags"]  # type: ignore[operator]


def test_user_setting_is_kept(venv: Path) -> None:
    out = probe(venv, cap=[9, 0], arches=GH200_ARCHES, preset="9.0a")
    assert out["arch_list_env_after"] == "9.0a"
    assert out["flags"] == ["-gencode=arch=compute_90a,code=sm_90a"]
    # torch itself reads no GPU when the list is given: neither may the fix (CUDA init)
    after = out["calls_after"]
    assert isinstance(after, dict) and after["get_device_capability"] == 0


@pytest.mark.slow
def test_other_gpu_is_left_alone(venv: Path) -> None:
    with_fix = probe(venv, cap=[8, 0], arches=A100_ARCHES)
    without = probe(venv, fixes_on=False, cap=[8, 0], arches=A100_ARCHES)
    assert with_fix["arch_list_env_after"] is None
    assert with_fix["flags"] == without["flags"]
    assert "-gencode=arch=compute_80,code=sm_80" in with_fix["flags"]  # type: ignore[operator]


@pytest.mark.slow
def test_no_cuda_is_left_alone(venv: Path) -> None:
    with_fix = probe(venv, cap=None, arches=[])
    without = probe(venv, fixes_on=False, cap=None, arches=[])
    assert with_fix["arch_list_env_after"] is None
    assert with_fix.get("error") == without.get("error")
    assert with_fix.get("flags") == without.get("flags")


def test_startup_does_not_import_torch(venv: Path) -> None:
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys; print('torch' in sys.modules, 'hpcenv_fix_sm90a' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == ["False", "True"]
