"""``[job] nccl``: which libnccl.so.2 torch is bound to, checked with the real thing.

The venv is torch 2.13.0+cu130 from PyPI with its own NCCL (nvidia-nccl-cu13 2.29.7);
the "system" NCCL a site module would put on LD_LIBRARY_PATH is the real
nvidia-nccl-cu13 2.27.7 library (origin: PyPI, that project and version). No GPU is
needed: importing a CUDA build of torch loads its NCCL, and NCCL loads without a
driver. What happens is what the dynamic loader does on a cluster node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hpcenv.build import fixes
from hpcenv.decide import plan
from hpcenv.kit import nccl
from hpcenv.profile import schema as profile
from hpcenv.runner import probes as runner
from hpcenv.utils import paths
from hpcenv.utils.errors import BadInput
from support import REPO, require
from support import cuda_artifacts as ca

OLD = ("nvidia-nccl-cu13", "2.27.7", "nvidia/nccl/lib/libnccl.so.2")
#: a library that finds NCCL on the loader path before torch: a stand-in for a site
#: library linked against the module's NCCL (any ``dlopen("libnccl.so.2")``)
FIRST_BY_SONAME = "import ctypes; ctypes.CDLL('libnccl.so.2')\n"
USES = (
    "import json, os, torch\n"
    "from hpcenv.kit import nccl\n"
    "lib = os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so')\n"
    "print(json.dumps({'version': list(torch.cuda.nccl.version()), "
    "'bound': nccl.bound_library(lib)}))\n"
)


@pytest.fixture(scope="module")
def cuda_venv() -> Path:
    """torch 2.13.0 CUDA from PyPI, with hpcenv's venv_nccl fix installed."""
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    try:
        venv = ca.torch_cuda_venv("-venv-nccl")
    except ca.Unavailable as exc:
        require("torch-cuda-wheel", False, str(exc))
    fixes.install(venv, ["venv_nccl"])
    return venv


@pytest.fixture(scope="module")
def old_nccl() -> Path:
    try:
        return ca.wheel_member(*OLD)
    except ca.Unavailable as exc:
        require("nccl-wheel", False, str(exc))
        raise


def _venv_nccl(venv: Path) -> Path:
    (lib,) = venv.glob("lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2")
    return lib


def _python(venv: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(paths.kit_path()), "HOME": "/nonexistent"}
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.slow
def test_an_older_nccl_loaded_first_breaks_torch_and_the_fix_puts_the_venv_s_first(
    cuda_venv: Path, old_nccl: Path
) -> None:
    """With the site's older NCCL on LD_LIBRARY_PATH and found first: without the fix,
    torch 2.13 does not import (it needs ncclCommResume, new in NCCL 2.28); with it, torch
    is bound to the venv's NCCL 2.29.7."""
    ld = {"LD_LIBRARY_PATH": str(old_nccl.parent)}
    broken = _python(cuda_venv, FIRST_BY_SONAME + USES, HPCENV_NO_FIXES="1", **ld)
    assert broken.returncode != 0
    assert "undefined symbol: ncclCommResume" in broken.stderr
    fixed = _python(cuda_venv, FIRST_BY_SONAME + USES, **ld)
    assert fixed.returncode == 0, fixed.stderr
    got = json.loads(fixed.stdout.strip().splitlines()[-1])
    assert got == {"version": [2, 29, 7], "bound": str(_venv_nccl(cuda_venv))}
    # torch's own RPATH already wins over LD_LIBRARY_PATH when nothing comes first
    plain = _python(cuda_venv, USES, HPCENV_NO_FIXES="1", **ld)
    assert json.loads(plain.stdout.strip().splitlines()[-1])["version"] == [2, 29, 7]


def _probe(venv: Path, mode: str, **env: str) -> dict[str, Any]:
    config = json.dumps({"nccl": mode})
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(REPO / "probes" / "torch_probe.py")],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(paths.kit_path()),
             "HPCENV_PROBE_CONFIG": config, **env},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _nccl_check(result: dict[str, Any]) -> dict[str, Any]:
    (check,) = [c for c in result["details"]["checks"] if c["name"] == "nccl-library"]
    return check  # type: ignore[no-any-return]


@pytest.mark.slow
def test_the_torch_probe_names_the_nccl_torch_uses(
    cuda_venv: Path, old_nccl: Path, tmp_path: Path
) -> None:
    own = str(_venv_nccl(cuda_venv))
    ok = _nccl_check(_probe(cuda_venv, "venv"))
    assert ok["status"] == "pass"
    assert (
        ok["summary"] == f"torch uses the venv's {own} (NCCL 2.29.7), as [job] nccl = 'venv' asks"
    )

    # LD_PRELOAD of another copy (the same release) wins over any fix: named, with the fix
    other = tmp_path / "libnccl.so.2"
    shutil.copyfile(own, other)
    preloaded = _nccl_check(_probe(cuda_venv, "venv", LD_PRELOAD=str(other)))
    assert preloaded["status"] == "fail"
    assert f"torch uses {other} (NCCL 2.29.7), not the venv's {own}" in preloaded["summary"]
    assert f"LD_PRELOAD puts {other} first" in preloaded["summary"]
    assert preloaded["remedy"].startswith("unset LD_PRELOAD")

    # an older one preloaded: torch does not import, and the probe says why
    broken = _probe(cuda_venv, "auto", LD_PRELOAD=str(old_nccl))
    assert broken["status"] == "fail"
    assert (
        f"torch needs a newer NCCL than the libnccl.so.2 loaded first, {old_nccl} "
        "(NCCL 2.27.7): LD_PRELOAD puts it first" in broken["summary"]
    )

    # 'system' asked for, but a torch wheel's RPATH finds its own NCCL
    system = _nccl_check(
        _probe(cuda_venv, "system", LD_LIBRARY_PATH=str(old_nccl.parent), HPCENV_NO_FIXES="1")
    )
    assert system["status"] == "fail"
    assert f"not the system's {old_nccl} (NCCL 2.27.7)" in system["summary"]


def test_the_fix_costs_one_dlopen_and_only_where_asked(cuda_venv: Path) -> None:
    """The venv's Pythons map the venv's NCCL at start (nothing else of the job does)."""
    maps = "print([l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l][:1])"
    on = _python(cuda_venv, maps)
    off = _python(cuda_venv, maps, HPCENV_NO_FIXES="1")
    assert on.stdout.strip() == repr([str(_venv_nccl(cuda_venv))])
    assert off.stdout.strip() == "[]"


# --- pure parts -------------------------------------------------------------------------

MAPS = """\
7f0000000000-7f0000001000 r--p 00000000 fd:01 1 /v/site-packages/nvidia/nccl/lib/libnccl.so.2
7f0000002000-7f0000003000 r-xp 00001000 fd:01 1 /v/site-packages/nvidia/nccl/lib/libnccl.so.2
7f0000004000-7f0000005000 r--p 00000000 fd:01 2 /opt/aws-ofi-nccl/lib/libnccl-net.so
7f0000006000-7f0000007000 r--p 00000000 fd:01 3 /opt/nccl/lib/libnccl.so.2.19.3 (deleted)
7f0000008000-7f0000009000 rw-p 00000000 00:00 0
7f000000a000-7f000000b000 r--p 00000000 fd:01 4 /usr/lib/libc.so.6
"""


def test_maps_list_every_nccl_copy_but_not_the_net_plugin() -> None:
    assert nccl.loaded_libraries(MAPS) == [
        "/v/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "/opt/nccl/lib/libnccl.so.2.19.3",
    ]
    assert nccl.preloaded({"LD_PRELOAD": "/a/libfoo.so:/b/libnccl.so.2 /c/libnccl.so"}) == [
        "/b/libnccl.so.2",
        "/c/libnccl.so",
    ]


@pytest.mark.parametrize(
    ("mode", "used", "status", "words"),
    [
        ("auto", "/v/libnccl.so.2", "pass", "(the venv's)"),
        ("auto", "/s/libnccl.so.2", "fail", "older than the venv's"),
        ("auto", "/n/libnccl.so.2", "pass", "(not the venv's)"),  # newer: fine
        ("venv", "/v/libnccl.so.2", "pass", "as [job] nccl = 'venv' asks"),
        ("venv", "/s/libnccl.so.2", "fail", "not the venv's"),
        ("system", "/s/libnccl.so.2", "pass", "as [job] nccl = 'system' asks"),
        ("system", "/v/libnccl.so.2", "fail", "not the system's"),
        ("auto", None, "skip", "no libnccl.so.2"),
    ],
)
def test_the_verdict_for_each_mode(mode: str, used: str | None, status: str, words: str) -> None:
    versions = {
        "/v/libnccl.so.2": "2.29.7",
        "/s/libnccl.so.2": "2.27.7",
        "/n/libnccl.so.2": "2.30.3",
    }
    verdict = nccl.check_library(
        mode,
        used=used,
        loaded=[used] if used else [],
        venv_lib="/v/libnccl.so.2",
        system_lib="/s/libnccl.so.2",
        preload=[],
        versions=versions,
    )
    assert verdict.status == status and words in verdict.summary, verdict.summary
    assert (verdict.remedy != "") == (status != "pass")


def test_nccl_venv_in_a_profile_installs_the_fix_and_reaches_the_probes(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        (REPO / "envs" / "brtx.toml").read_text().replace("[job]", '[job]\nnccl = "venv"')
    )
    prof = profile.load(str(path))
    made = plan.make_plan(prof, profile.declared_facts(prof), environ={})
    assert "venv_nccl" in made.fixes
    assert any("venv_nccl" in s.what for s in made.steps if s.kind == "fix")
    assert runner.config_for(prof)["nccl"] == "venv"
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace('nccl = "venv"', 'nccl = "mine"'))
    with pytest.raises(BadInput, match=r"\[job\] nccl = 'mine' must be one of: auto, venv, system"):
        profile.load(str(bad))
