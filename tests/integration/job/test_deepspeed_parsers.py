"""DeepSpeed's version decides its flags, judged by the real argument parsers of released
DeepSpeed versions.

The sdists of DeepSpeed 0.12.6 to 0.19.8 are downloaded once from PyPI (checked against
PyPI's sha256, cached under ``~/.cache/hpcenv-tests/deepspeed``); the ``parse_args``
functions of their ``deepspeed/launcher/runner.py`` (the ``deepspeed`` command) and
``deepspeed/launcher/launch.py`` (the per-node launcher) are taken from the source as
released, with the module constants they use (``constants.py``), and run here: nothing
else of DeepSpeed runs (no torch import). What they show: ``--no_ssh`` and
``--node_rank`` came with 0.15.0 (0.14.4's runner has neither), so an older DeepSpeed on
several nodes is started by hpcenv as ``python -u -m deepspeed.launcher.launch
--world_info=... --node_rank=N`` on each node, which every release's launch.py takes.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpcenv.job import command, launchers
from hpcenv.utils.errors import BadInput
from support import REPO, cuda_artifacts, require

#: The releases tested, oldest supported to newest at the time of writing.
VERSIONS = ("0.12.6", "0.13.5", "0.14.0", "0.14.4", "0.15.0", "0.15.4", "0.19.8")
CACHE = cuda_artifacts.CACHE / "deepspeed"
MEMBERS = ("runner.py", "launch.py", "constants.py")
ALLOC = launchers.Allocation(
    nodes=2, node_rank="1", per_node=4, master_addr="n1", master_port="29500",
    hostfile="/h", hosts=("n1", "n2"),
)  # fmt: skip
TRAIN = ["deepspeed", "train.py", "--deepspeed", "ds.json"]


def _sdist_url(version: str) -> tuple[str, str]:
    url = f"{cuda_artifacts.PYPI}/deepspeed/json"
    data = json.loads(cuda_artifacts._get(url))
    for f in data.get("releases", {}).get(version) or []:
        if f["packagetype"] == "sdist":
            return urllib.parse.urljoin(url, f["url"]), f["digests"]["sha256"]
    raise cuda_artifacts.Unavailable(f"PyPI lists no sdist of deepspeed {version}")


def launcher_sources(version: str) -> Path:
    """``CACHE/<version>/`` with the release's launcher files, deepspeed/constants.py (as
    ds_constants.py) and its PKG-INFO."""
    dest = CACHE / version
    with cuda_artifacts.locked(f"deepspeed-{version}"):
        if (dest / "ds_constants.py").exists():
            return dest
        url, sha = _sdist_url(version)
        blob = cuda_artifacts._get(url)
        if hashlib.sha256(blob).hexdigest() != sha:
            raise cuda_artifacts.Unavailable(f"deepspeed {version}: sha256 is not PyPI's")
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "sdist.tar.gz"
            archive.write_bytes(blob)
            with tarfile.open(archive) as tar:
                for m in tar.getmembers():
                    parts = m.name.split("/")
                    name = {
                        ("PKG-INFO",): "PKG-INFO",
                        ("deepspeed", "constants.py"): "ds_constants.py",
                        **{("deepspeed", "launcher", f): f for f in MEMBERS},
                    }.get(tuple(parts[1:]))
                    if name and m.isfile() and (src := tar.extractfile(m)):
                        dest.mkdir(parents=True, exist_ok=True)
                        (dest / name).write_bytes(src.read())
    return dest


def real_parser(version: str, module: str) -> Callable[[list[str]], argparse.Namespace]:
    """``deepspeed/launcher/<module>.py``'s own ``parse_args`` of ``version``, as released."""
    try:
        where = launcher_sources(version)
    except (cuda_artifacts.Unavailable, OSError) as exc:
        require("pypi", False, f"deepspeed {version}'s sdist on PyPI: {exc}")
        raise
    ns: dict[str, Any] = {"argparse": argparse, "ArgumentParser": argparse.ArgumentParser,
                          "REMAINDER": argparse.REMAINDER}  # fmt: skip
    for constants in ("ds_constants.py", "constants.py"):  # stdlib imports and values only
        exec(compile((where / constants).read_text(), constants, "exec"), ns)
    tree = ast.parse((where / f"{module}.py").read_text())
    keep = [n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)]
    keep += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "parse_args"]
    exec(compile(ast.Module(body=keep, type_ignores=[]), f"{module}.py", "exec"), ns)

    def parse(argv: list[str]) -> argparse.Namespace:
        if module == "runner":
            return ns["parse_args"](argv)  # type: ignore[no-any-return]
        saved = sys.argv
        sys.argv = ["launch.py", *argv]
        try:
            return ns["parse_args"]()  # type: ignore[no-any-return]
        finally:
            sys.argv = saved

    return parse


def _rejects(parse: Callable[[list[str]], argparse.Namespace], argv: list[str]) -> bool:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        parse(argv)
        return False
    return True


@pytest.mark.parametrize("version", VERSIONS)
def test_no_ssh_came_with_0_15(version: str) -> None:
    """The threshold hpcenv uses is what the real runners accept."""
    runner = real_parser(version, "runner")
    new = launchers.version_tuple(version) >= launchers.NO_SSH_SINCE
    assert _rejects(runner, ["--no_ssh", "--node_rank", "1", "t.py"]) is not new


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_s_own_parser_takes_what_hpcenv_renders(version: str) -> None:
    launch = launchers.plan(command.read(TRAIN), ALLOC, deepspeed=version)
    if launchers.version_tuple(version) >= launchers.NO_SSH_SINCE:
        assert launch.argv[0] == "deepspeed"
        args = real_parser(version, "runner")(list(launch.argv[1:]))
        assert (args.no_ssh, args.node_rank, args.hostfile) == (True, 1, "/h")
        assert (args.user_script, args.user_args) == ("train.py", ["--deepspeed", "ds.json"])
        return
    assert launch.argv[:4] == ("python", "-u", "-m", "deepspeed.launcher.launch")
    assert _rejects(real_parser(version, "runner"), list(launch.added[4:]))  # not the runner's
    args = real_parser(version, "launch")(list(launch.argv[4:]))
    assert (args.node_rank, args.master_addr, args.master_port) == (1, "n1", 29500)
    assert json.loads(base64.urlsafe_b64decode(args.world_info)) == {
        "n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]
    }  # fmt: skip
    assert (args.training_script, args.training_script_args) == ("train.py", TRAIN[2:])


def test_an_old_deepspeed_keeps_the_options_its_launcher_takes() -> None:
    argv = ["A=1", "deepspeed", "--num_gpus", "2", "--master_port", "1234", "--module",
            "my.train", "--x"]  # fmt: skip
    launch = launchers.plan(command.read(argv), ALLOC, deepspeed="0.12.6")
    assert launch.argv[:5] == ("A=1", "python", "-u", "-m", "deepspeed.launcher.launch")
    args = real_parser("0.12.6", "launch")(list(launch.argv[5:]))
    assert args.module and args.master_port == 1234 and args.training_script == "my.train"
    assert json.loads(base64.urlsafe_b64decode(args.world_info))["n2"] == [0, 1]
    with pytest.raises(BadInput, match=r"deepspeed 0\.14\.4 --include: before 0\.15"):
        launchers.plan(command.read(["deepspeed", "--include", "n1:0", "t.py"]), ALLOC,
                       deepspeed="0.14.4")  # fmt: skip
    one_node = launchers.Allocation(nodes=1, node_rank="0", per_node=4, master_addr="n1",
                                    master_port="1")  # fmt: skip
    assert launchers.plan(command.read(TRAIN), one_node, deepspeed="0.12.6").argv[0] == "deepspeed"


def _venv_with(tmp_path: Path, version: str) -> Path:
    """A venv whose site-packages holds DeepSpeed ``version``'s METADATA (its sdist's
    PKG-INFO, as a wheel built from it installs)."""
    venv = tmp_path / "venv"
    info = venv / "lib" / "python3.11" / "site-packages" / f"deepspeed-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes((launcher_sources(version) / "PKG-INFO").read_bytes())
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv


def test_the_version_is_read_from_the_job_s_venv(tmp_path: Path) -> None:
    real_parser("0.12.6", "launch")  # the sdist, or a skip saying why
    venv = _venv_with(tmp_path, "0.12.6")
    assert launchers.installed_version(venv, "deepspeed") == "0.12.6"
    assert launchers.installed_version(tmp_path / "none", "deepspeed") == ""
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv", "sbatch", "brtx", "--nodes", "2", "--env", str(venv),
         "--", "deepspeed", "train.py"],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "hpcenv: deepspeed runs on each node as python -u -m deepspeed.launcher.launch" in (
        done.stdout
    )
    assert "(DeepSpeed 0.12.6)" in done.stdout


def test_the_node_wrapper_starts_an_old_deepspeed_s_launch_module(tmp_path: Path) -> None:
    """On a node: ``python -m hpcenv.job.launchers -- deepspeed ...`` with the job's venv
    holding DeepSpeed 0.12.6 execs ``python -u -m deepspeed.launcher.launch`` (a stand-in
    ``python`` prints its argv; the real 0.12.6 parser reads it)."""
    venv = _venv_with(tmp_path, "0.12.6")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").write_text('#!/bin/sh\nfor w; do echo "$w"; done\n')
    (bindir / "python").chmod(0o755)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("n1 slots=2\nn2 slots=2\n")
    (tmp_path / "ds.json").write_text("{}")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "SLURM_NODEID": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "HPCENV_LAUNCH_NODES": "2", "HPCENV_LAUNCH_PER_NODE": "2",
           "HPCENV_LAUNCH_HOSTFILE": str(hostfile), "VIRTUAL_ENV": str(venv),
           "HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hpcenv.job.launchers", "--", *TRAIN],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    words = done.stdout.splitlines()
    assert words[:3] == ["-u", "-m", "deepspeed.launcher.launch"]
    args = real_parser("0.12.6", "launch")(words[3:])
    assert args.node_rank == 1
    assert json.loads(base64.urlsafe_b64decode(args.world_info)) == {"n1": [0, 1], "n2": [0, 1]}
