"""Lockfiles against a PEP 503 index on 127.0.0.1 serving stand-in torch wheels
(``buildkit.build_stand_in_index``: they stand in for download.pytorch.org's
``+cu126`` / ``+cu130`` builds and their nvidia-cuda-runtime dependencies, and for
PyPI). Real ``uv pip compile``; nothing here contacts the internet.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hpcenv.build import lockfiles as lock
from hpcenv.models.facts import Facts
from hpcenv.utils.errors import BuildFailed
from support import FACTS
from support.buildkit import CU12_RUNTIME, StandInIndex, hpcenv, stand_in_plan


@pytest.fixture
def offline_pypi(index: StandInIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PyPI replaced by the stand-in ``/simple/`` index; locks written under tmp."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", f"{index.url}/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("HPCENV_LOCKFILES", str(tmp_path / "lockfiles"))
    return tmp_path / "lockfiles"


def test_lock_pins_the_variant_and_its_runtime(index: StandInIndex, offline_pypi: Path) -> None:
    plan = stand_in_plan(index.url)
    facts = Facts(arch="x86_64", glibc="2.35")
    path = lock.compile_lock(plan, facts)
    assert path == offline_pypi / "standin-x86_64.txt"
    pins = lock.pinned(path)
    assert pins["torch"] == "2.9.1+cu126"
    assert pins[CU12_RUNTIME[0]] == CU12_RUNTIME[1]
    assert "nvidia-cuda-runtime-cu13" not in pins
    assert pins["standin-triton"] == "3.5.1"  # x86_64-only dependency
    text = path.read_text()
    assert "x86_64.whl" not in text  # hashes, not file names
    header = lock.read_header(path)
    assert header["python-platform"] == "x86_64-manylinux_2_35"
    assert header["plan-digest"] == plan.digest()
    assert header["command"].startswith("uv pip compile requirements.in --generate-hashes")
    assert f"--index {index.url}/cu126" in header["command"]
    assert json.loads(header["facts"])["arch"] == "x86_64"
    assert lock.mismatch(path, plan, facts) is None
    assert "# via -r requirements.in" in text  # no temporary paths in the lock
    assert lock.compile_lock(plan, facts).read_text() == text  # same inputs, same bytes


def test_lock_for_aarch64_from_this_x86_host(index: StandInIndex, offline_pypi: Path) -> None:
    import hashlib

    plan = stand_in_plan(index.url, arch="aarch64")
    path = lock.compile_lock(plan, Facts(arch=None))  # declared facts: glibc unknown
    assert path.name == "standin-aarch64.txt"
    pins = lock.pinned(path)
    assert pins["torch"] == "2.9.1+cu126"
    assert "standin-triton" not in pins  # its marker is platform_machine == "x86_64"
    assert lock.read_header(path)["python-platform"] == "aarch64-manylinux_2_28"
    aarch64 = index.files / "torch-2.9.1+cu126-cp311-cp311-manylinux_2_28_aarch64.whl"
    assert hashlib.sha256(aarch64.read_bytes()).hexdigest() in path.read_text()


def test_other_variant_gets_its_own_runtime(index: StandInIndex, offline_pypi: Path) -> None:
    plan = stand_in_plan(index.url, backend="cu130")
    pins = lock.pinned(lock.compile_lock(plan, Facts(arch="x86_64")))
    assert pins["torch"] == "2.9.1+cu130"
    assert pins["nvidia-cuda-runtime-cu13"] == "13.0.96"
    assert CU12_RUNTIME[0] not in pins


def test_changed_plan_or_hand_edit_is_detected(index: StandInIndex, offline_pypi: Path) -> None:
    plan = stand_in_plan(index.url)
    facts = Facts(arch="x86_64")
    path = lock.compile_lock(plan, facts)
    changed = replace(plan, packages=("torchext",))
    why = lock.mismatch(path, changed, facts)
    assert why is not None and "inputs digest" in why
    other_variant = replace(plan, torch=replace(plan.torch, backend="cu130"))
    assert lock.mismatch(path, other_variant, facts) is not None
    # recompiled for the changed plan, it matches that plan
    lock.compile_lock(changed, facts)
    assert lock.mismatch(path, changed, facts) is None
    assert lock.pinned(path)["torchext"] == "0.1.0"
    body = "".join(ln for ln in path.read_text().splitlines(True) if not ln.startswith("#"))
    path.write_text(body)
    reason = lock.mismatch(path, changed, facts)
    assert reason is not None and "no hpcenv header" in reason


@pytest.mark.slow
@pytest.mark.slow
def test_unreachable_index_is_one_clear_error(offline_pypi: Path) -> None:
    plan = stand_in_plan("http://127.0.0.1:9/whl")
    with pytest.raises(BuildFailed, match=r"127\.0\.0\.1:9/whl/cu126"):
        lock.compile_lock(plan, Facts(arch="x86_64"))
    assert not (offline_pypi / "standin-x86_64.txt").exists()


def test_lock_cli_check(index: StandInIndex, offline_pypi: Path, tmp_path: Path) -> None:
    profile = tmp_path / "standin.toml"
    text = (
        '[profile]\npython = "3.11"\n[platform]\narch = "x86_64"\n'
        f'[torch]\nversion = "==2.9.1"\nbackend = "cu126"\nindex_url = "{index.url}"\n'
        "[packages]\ninstall = []\n"
    )
    profile.write_text(text)
    facts = str(FACTS / "rtx6000-brtx.json")
    env = {"PIP_FIND_LINKS": ""}
    made = hpcenv("lock", str(profile), "--facts", facts, env=env)
    assert made.returncode == 0, made.stderr
    assert lock.pinned(offline_pypi / "standin-x86_64.txt")["torch"] == "2.9.1+cu126"
    ok = hpcenv("lock", str(profile), "--facts", facts, "--check", env=env)
    assert ok.returncode == 0, ok.stderr
    profile.write_text(text.replace("install = []", 'install = ["torchext"]'))
    stale = hpcenv("lock", str(profile), "--facts", facts, "--check", env=env)
    assert stale.returncode == 4
    assert "inputs digest" in stale.stderr and stale.stderr.count("\n") == 1


def test_torch_requirement_carries_the_variant() -> None:
    from hpcenv.tools import uv

    plan = stand_in_plan("https://download.pytorch.org/whl")
    assert uv.torch_requirement(plan) == "torch==2.9.1+cu126"
    args = uv.source_args(plan)
    assert args[args.index("--index") + 1] == "https://download.pytorch.org/whl/cu126"
    wheel = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    local = replace(plan, torch_wheel=wheel, find_links=("/opt/wheels",))
    assert uv.torch_requirement(local) == "torch==2.13.0+cpu"
    assert "--index" not in uv.source_args(local)  # the torch index is never contacted
    assert uv.source_args(replace(local, offline=True))[-1] == "--offline"
    assert uv.python_platform("aarch64", "2.35") == "aarch64-manylinux_2_35"
    assert uv.python_platform("x86_64", None) == "x86_64-manylinux_2_28"
