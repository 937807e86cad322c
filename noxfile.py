"""nox sessions for hpcenv. Thin: each session calls the ``hpcenv`` CLI.

Generated, never listed by hand:
- ``build-<profile>`` for every ``envs/<profile>.toml``;
- ``probe-<name>`` for every probe of ``hpcenv.kit.registry`` (imported from ``src/``
  without installing hpcenv: the kit is standard library only), and ``probe`` for the
  profile's suite.

The profile a probe session checks is ``$HPCENV_PROFILE`` (default ``local``); extra
arguments after ``--`` go to hpcenv, e.g. ``nox -s probe-nccl -- --ranks 4``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "src"))
from hpcenv.kit import registry  # noqa: E402 - standard library only

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]  # `nox -s unit`: the fast loop

PROFILES = sorted(p.stem for p in (ROOT / "envs").glob("*.toml"))


def _hpcenv(session: nox.Session) -> None:
    """Install hpcenv (and only it) into the session's venv."""
    session.install("-e", str(ROOT))


def _profile() -> str:
    return os.environ.get("HPCENV_PROFILE", "local")


def _dev(session: nox.Session) -> None:
    session.run_install("uv", "sync", "--frozen", "--group", "dev", "--active",
                        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location})


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (unit + integration on real uv, torch, Ray, SLURM), one worker per
    core this process may run on and one more (``PYTEST_XDIST_AUTO_NUM_WORKERS`` to set
    them): the SLURM tests grouped by the cluster they use (each starts once), a
    file's tests together (tests/conftest.py groups them). The extra worker fills the time
    the others wait on SLURM jobs, timeouts and child processes (on 2 cores: 23% of the CPU
    idle with 2 workers, 7% with 3; 763 s -> 668 s for the suite, 2026-11-27)."""
    _dev(session)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or str((cores or 1) + 1)
    session.run("pytest", "-n", workers, "--dist", "loadgroup", *session.posargs)


@nox.session
def unit(session: nox.Session) -> None:
    """The fast loop: tests/unit (one module each; no subprocess, network or SLURM) and
    what hpcenv imports at start-up (a fresh interpreter each)."""
    _dev(session)
    startup = "tests/integration/cli/test_startup.py"
    session.run("pytest", "tests/unit", startup, "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, ruff format --check, mypy --strict, import-linter's layers, every profile validates."""
    _dev(session)
    dirs = ["src", "tests", "probes", "bench", "sitecustomize", "noxfile.py"]
    session.run("ruff", "check", *[d for d in dirs if (ROOT / d).exists()])
    session.run("ruff", "format", "--check", "src", "probes", "sitecustomize")
    session.run("mypy")
    session.run("lint-imports")  # the layers of docs/design.md, no cycles, a stdlib-only kit
    session.run("hpcenv", "profiles")


@nox.session
def facts(session: nox.Session) -> None:
    """What this node is (add -- --json for the contract)."""
    _hpcenv(session)
    session.run("hpcenv", "facts", *session.posargs)


@nox.session
def knowledge(session: nox.Session) -> None:
    """Regenerate the torch/vLLM data from PyPI (-- --index URL: also from a PyTorch index)."""
    _hpcenv(session)
    session.run("hpcenv", "knowledge", "update", *session.posargs)


@nox.session(name="knowledge-check")
def knowledge_check(session: nox.Session) -> None:
    """Exit 7 when PyPI has a torch, vLLM or flash-attn release the data lacks. Not part of
    ``tests``: the suite must pass whatever PyPI released today (the weekly workflow runs it)."""
    _hpcenv(session)
    session.run("hpcenv", "knowledge", "check", *session.posargs)


def _make_build(profile: str) -> None:
    @nox.session(name=f"build-{profile}")
    def build(session: nox.Session) -> None:
        _hpcenv(session)
        session.run("hpcenv", "build", profile, *session.posargs)

    build.__doc__ = f"Build the {profile} environment (envs/{profile}.toml)."


def _make_probe(info: registry.ProbeInfo) -> None:
    @nox.session(name=f"probe-{info.name}")
    def run_probe(session: nox.Session) -> None:
        _hpcenv(session)
        session.run("hpcenv", "probe", info.name, "--env", _profile(), *session.posargs)

    run_probe.__doc__ = f"The {info.name} probe in the $HPCENV_PROFILE env: {info.summary}."


for _name in PROFILES:
    _make_build(_name)
for _info in registry.PROBES:
    _make_probe(_info)


@nox.session
def probe(session: nox.Session) -> None:
    """Run the profile's whole probe suite ($HPCENV_PROFILE, default local)."""
    _hpcenv(session)
    session.run("hpcenv", "probe", "--env", _profile(), *session.posargs)


@nox.session(name="probe-preflight")
def probe_preflight(session: nox.Session) -> None:
    """Job preflight: GPUs, CUDA_VISIBLE_DEVICES, scratch, modules, ECC ($HPCENV_PROFILE)."""
    _hpcenv(session)
    session.run("hpcenv", "preflight", _profile(), *session.posargs)


@nox.session
def lock(session: nox.Session) -> None:
    """Regenerate lockfiles/ with 'hpcenv lock' (never by hand)."""
    _hpcenv(session)
    session.run("hpcenv", "lock", *session.posargs)


@nox.session
def doctor(session: nox.Session) -> None:
    """The main job: facts, plan, build and probe the $HPCENV_PROFILE (local) environment."""
    _hpcenv(session)
    session.run("hpcenv", "doctor", _profile(), *session.posargs)


@nox.session
def cluster(session: nox.Session) -> None:
    """A real N-node SLURM on this machine (root): -- up [--nodes 3] [--slow node3] | down."""
    _hpcenv(session)
    cluster_py = ROOT / "tests" / "support" / "cluster.py"
    session.run("python", str(cluster_py), *(session.posargs or ["status"]))


@nox.session
def bench(session: nox.Session) -> None:
    """Performance against baselines; writes bench/results.json and bench/RESULTS.md."""
    _dev(session)
    session.run("python", "bench/run_all.py", *session.posargs)
