"""Every package the profile installs (and torch) imports, with its version, and its
compiled extensions load.

Requirement names are distribution names (``ray[default]>=2.49``); the modules they
provide come from the distribution's ``top_level.txt`` or, failing that, its
``RECORD`` (``hpcenv.kit.imports``, shared with the build's import check). A compiled
extension that fails to load with a linker error (undefined symbol, missing .so, GLIBC
version) is the classic sign of a wheel built for another torch, CUDA or glibc, so each
one is loaded, not just the package's top module.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.metadata as md
import re
import sys
import time
import warnings
from typing import Any

from hpcenv.kit import probe
from hpcenv.kit.imports import import_names
from hpcenv.kit.status import Status

NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
LINKER_ERRORS = re.compile(
    r"undefined symbol|cannot open shared object|GLIBC|version `|wrong ELF class|"
    r"no kernel image|invalid ELF header",
    re.I,
)
#: Extensions per package loaded at most (torch ships dozens; a sample is enough).
MAX_EXTENSIONS = 40


def dist_name(requirement: str) -> str | None:
    """'ray[default]>=2.49' -> 'ray', 'priv @ https://host/priv.whl' -> 'priv' (PEP 508
    names the package before a URL); a bare URL or path -> None."""
    m = NAME.match(requirement)
    if m is None:
        return None
    rest = requirement[m.end() :].lstrip()
    if rest.startswith("[") and "]" in rest:
        rest = rest[rest.index("]") + 1 :].lstrip()
    if rest.startswith("://") or (("://" in rest or "/" in rest) and not rest.startswith("@")):
        return None  # https://..., or a path like dir/pkg.whl
    return m.group(1)


def extension_modules(dist: md.Distribution, tops: list[str]) -> list[str]:
    """Dotted names of the compiled extension modules a distribution ships for this Python."""
    out = []
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    for f in dist.files or []:
        name = f.name
        suffix = next((s for s in suffixes if name.endswith(s)), None)
        if suffix is None or not f.parts or f.parts[0] not in tops:
            continue
        parts = [*f.parts[:-1], name[: -len(suffix)]]
        if all(p.isidentifier() for p in parts):
            out.append(".".join(parts))
    return out


def try_import(module: str) -> tuple[bool, str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(module)
    except Exception as exc:  # any import failure is what this probe reports
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return True, ""


def check_package(ctx: probe.Context, requirement: str) -> None:
    name = dist_name(requirement)
    if name is None:
        ctx.check(
            requirement,
            Status.SKIP,
            "not a named requirement",
            remedy="name the package in [packages] install",
        )
        return
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        ctx.check(
            name,
            Status.FAIL,
            "not installed in the environment",
            remedy=f"rebuild the environment (hpcenv build); '{requirement}' is missing",
        )
        return
    version = dist.version
    tops = import_names(dist)
    info: dict[str, Any] = {"version": version, "modules": tops}
    start = time.monotonic()
    for top in tops:
        ok, err = try_import(top)
        if not ok:
            ctx.check(
                name,
                Status.FAIL,
                f"{name} {version}: import {top} failed: {err}",
                remedy=remedy_for(name, err),
                **info,
            )
            return
    info["import_s"] = round(time.monotonic() - start, 2)
    exts = extension_modules(dist, tops)
    broken = []
    for mod in exts[:MAX_EXTENSIONS]:
        ok, err = try_import(mod)
        if not ok and LINKER_ERRORS.search(err):
            broken.append(f"{mod}: {err}")
    info["extensions_checked"] = min(len(exts), MAX_EXTENSIONS)
    info["extensions_total"] = len(exts)
    if broken:
        ctx.check(
            name,
            Status.FAIL,
            f"{name} {version}: {len(broken)} compiled extension(s) do not load: {broken[0]}",
            remedy=remedy_for(name, broken[0]),
            broken=broken,
            **info,
        )
        return
    ctx.metrics[f"{name}_import_s"] = info["import_s"]
    ctx.check(
        name,
        Status.PASS,
        f"{name} {version}" + (f" ({info['extensions_checked']} extensions load)" if exts else ""),
        **info,
    )


def remedy_for(name: str, err: str) -> str:
    if "undefined symbol" in err:
        return (
            f"{name} was built against another torch/CUDA than the one installed: "
            f"reinstall {name} for this torch (flash-attn: rebuild; vllm: keep its torch pin)"
        )
    if "GLIBC" in err or "version `" in err:
        return f"{name}'s wheel needs a newer glibc than this node has: use an older wheel"
    if "cannot open shared object" in err:
        return "a shared library is missing: load the module that provides it (cuda, nccl)"
    return f"run '{sys.executable} -c \"import {name}\"' to see the full error"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--packages", nargs="*", help="requirements to check (default: profile's)")


def body(ctx: probe.Context) -> None:
    """Every package of the profile imports; versions; compiled extensions load."""
    requirements = ctx.args.packages
    if requirements is None:
        requirements = list(ctx.config.get("install") or [])
    if not any(dist_name(r) == "torch" for r in requirements):
        requirements = ["torch", *requirements]
    ctx.details["requirements"] = requirements
    for r in requirements:
        check_package(ctx, r)
    ok = [c for c in ctx.checks if c["status"] == Status.PASS]
    if len(ok) == len(ctx.checks):
        ctx.summary = f"{len(ok)} packages import: " + ", ".join(c["summary"] for c in ok)


if __name__ == "__main__":
    sys.exit(probe.main("imports", body, add_args))
