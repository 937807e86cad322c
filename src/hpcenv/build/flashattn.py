"""flash-attn from source, built once per ABI key and reused from a wheel cache.

A flash-attn source build takes ~50 minutes or more on a GH200 node; the result
depends only on (flash-attn version, torch version and variant, Python tag, CPU
arch, CUDA archs, C++ ABI of torch). ``build_cached_wheel`` keeps the wheel under
``<cache>/wheels/<name>-<version>-<digest>/`` with a ``key.json`` saying what the
digest covers; the next build with the same key installs the cached wheel in
seconds. The cache is generic (tests and bench use a small gcc-built C extension).

A cache entry is written to a temporary sibling and renamed into place, and builds
of the same key are serialised with a lock file, so a killed build never leaves a
half-written entry that would be mistaken for a good one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hpcenv.build import build_lock
from hpcenv.build.results import FlashAttnBuilt
from hpcenv.models.plan import Plan
from hpcenv.tools import command, uv
from hpcenv.utils import fsio, paths
from hpcenv.utils.errors import BuildFailed
from hpcenv.utils.names import canonicalize_name

#: Packages a ``--no-build-isolation`` flash-attn build needs in the environment.
BUILD_REQUIREMENTS = ("setuptools", "wheel", "packaging", "ninja", "psutil", "einops")

ABI_PROBE = r"""
import json, platform, sys
import torch
print(json.dumps({
    "torch": torch.__version__,
    "torch_cuda": torch.version.cuda,
    "cxx11abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    "python_tag": f"cp{sys.version_info[0]}{sys.version_info[1]}",
    "arch": platform.machine(),
}))
"""


@dataclass(frozen=True, kw_only=True)
class CachedWheel:
    path: Path
    hit: bool  # True: taken from the cache; False: built now
    key: dict[str, str]
    seconds: float


def cache_root() -> Path:
    return paths.cache_dir() / "wheels"


def key_dir(name: str, version: str, key_fields: Mapping[str, str]) -> Path:
    key = {"name": canonicalize_name(name), "version": version, **key_fields}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / f"{canonicalize_name(name)}-{version}-{digest}"


def _cached(entry: Path) -> Path | None:
    wheels = sorted(entry.glob("*.whl"))
    if len(wheels) == 1 and (entry / "key.json").is_file():
        return wheels[0]
    return None


def build_cached_wheel(
    name: str,
    version: str,
    key_fields: Mapping[str, str],
    build_fn: Callable[[Path], None],
) -> CachedWheel:
    """The wheel for this key: from the cache, or ``build_fn(out_dir)`` then cached.

    ``build_fn`` must write exactly one ``.whl`` into ``out_dir``.
    """
    start = time.monotonic()
    key = {
        "name": canonicalize_name(name),
        "version": version,
        **{k: str(v) for k, v in key_fields.items()},
    }
    entry = key_dir(name, version, key_fields)
    found = _cached(entry)
    if found:
        return CachedWheel(path=found, hit=True, key=key, seconds=time.monotonic() - start)
    fsio.ensure_dir(entry.parent)
    with build_lock.hold(entry.with_suffix(".lock"), what=f"building {name} {version}"):
        found = _cached(entry)  # another process may have built it while we waited
        if found:
            return CachedWheel(path=found, hit=True, key=key, seconds=time.monotonic() - start)
        tmp = fsio.new_dir(entry.parent, f".tmp-{entry.name}-")
        try:
            build_fn(tmp)
            wheels = sorted(tmp.glob("*.whl"))
            if len(wheels) != 1:
                raise BuildFailed(
                    f"building {name} {version} produced {len(wheels)} wheels in {tmp}, not one"
                )
            fsio.write_json(tmp / "key.json", key)
            shutil.rmtree(entry, ignore_errors=True)  # an incomplete entry of a killed build
            os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    wheel = _cached(entry)
    assert wheel is not None
    return CachedWheel(path=wheel, hit=False, key=key, seconds=time.monotonic() - start)


@dataclass(frozen=True, kw_only=True)
class AbiKey:
    """What a compiled torch extension's binary depends on (``ABI_PROBE``'s answer)."""

    torch: str
    torch_cuda: str | None  # None: a CPU build
    cxx11abi: bool
    python_tag: str  # cp311
    arch: str

    @classmethod
    def parse(cls, line: str, where: str) -> AbiKey:
        """``ABI_PROBE``'s JSON line; BuildFailed naming ``where`` when it is not one."""
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise BuildFailed(f"{where}: the torch ABI probe printed {line[-200:]!r}, not JSON")
        strings = ("torch", "python_tag", "arch")
        cuda = data.get("torch_cuda")
        if not all(isinstance(data.get(k), str) for k in strings) or not (
            isinstance(data.get("cxx11abi"), bool) and (cuda is None or isinstance(cuda, str))
        ):
            raise BuildFailed(f"{where}: the torch ABI probe printed {line[-200:]!r}")
        return cls(**{k: data[k] for k in (*strings, "torch_cuda", "cxx11abi")})

    def fields(self) -> dict[str, str]:
        """The key's fields as strings, as the wheel cache's digest covers them (an entry
        made before this type existed has the same digest: ``str()`` of each value)."""
        return {
            "torch": self.torch,
            "torch_cuda": str(self.torch_cuda),
            "cxx11abi": str(self.cxx11abi),
            "python_tag": self.python_tag,
            "arch": self.arch,
        }


def abi_key(venv: Path, *, log: IO[str] | None = None) -> AbiKey:
    """What a compiled torch extension's binary depends on, asked from the venv's torch."""
    done = command.run([str(paths.venv_python(venv)), "-c", ABI_PROBE], log=log, timeout=300)
    lines = done.stdout.strip().splitlines()
    return AbiKey.parse(lines[-1] if lines else "", str(venv))


def _pip(log: IO[str] | None) -> tuple[list[str], dict[str, str]]:
    """pip (for ``pip download`` of a source distribution), kept in hpcenv's cache: one
    copy per user (it runs as you), made again when someone else could have written it."""
    target = paths.cache_dir() / "tools" / f"pip-{os.getuid()}"
    if fsio.untrusted(target) or (target.exists() and target.stat().st_uid != os.getuid()):
        shutil.rmtree(target)
    if not (target / "pip").is_dir():
        uv._run(["pip", "install", "--target", str(target), "pip"], log=log)
    return ["-m", "pip"], {"PYTHONPATH": str(target)}


def install_flash_attn(venv: Path, plan: Plan, *, log: IO[str] | None = None) -> FlashAttnBuilt:
    """Build (or take from the cache) the flash-attn wheel for ``venv`` and install it."""
    fa = plan.flash_attn
    if not fa.version:
        raise BuildFailed(f"profile {plan.profile}: flash-attn build planned without a version")
    version = fa.version
    uv.install(venv, list(BUILD_REQUIREMENTS), plan=plan, log=log)
    key = abi_key(venv, log=log).fields()
    key["cuda_archs"] = ";".join(fa.cuda_archs)
    env = {
        "FLASH_ATTN_CUDA_ARCHS": ";".join(fa.cuda_archs),
        "MAX_JOBS": str(fa.max_jobs or 1),
        "NVCC_THREADS": str(fa.nvcc_threads or 2),
        "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
    }
    python = paths.venv_python(venv)

    def build_fn(out: Path) -> None:
        src = out / "src"
        pip_args, pip_env = _pip(log)
        links = [a for link in uv.find_links(plan) for a in ("--find-links", link)]
        command.run(
            [
                str(python),
                *pip_args,
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"flash-attn=={version}",
                "-d",
                str(src),
                *links,
            ],
            env={**os.environ, **pip_env},
            log=log,
            timeout=1800,
        )
        sdists = sorted(src.glob("flash_attn-*.tar.gz"))
        if not sdists:
            raise BuildFailed(f"no flash-attn {version} source distribution was downloaded")
        uv.build_wheel(
            str(sdists[0]), out, python=python, extra=["--no-build-isolation"], env=env, log=log
        )
        shutil.rmtree(src, ignore_errors=True)

    cached = build_cached_wheel("flash-attn", version, key, build_fn)
    uv.install(venv, [str(cached.path)], extra=["--no-deps"], log=log)
    return FlashAttnBuilt(
        wheel=str(cached.path),
        hit=cached.hit,
        key=cached.key,
        build_env=env,
        seconds=round(cached.seconds, 3),
    )
