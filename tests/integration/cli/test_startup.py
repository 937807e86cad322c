"""Start-up: ``hpcenv --help``, ``--version`` and ``facts --json`` import only what they use
(no command module for the first two, no builder, rich, packaging or yaml for any), and
every command's own ``--help`` still works from the command table. ``audit uv.lock --json``
imports no builder, rich, venv-binary reader, hand-written-file reader or host-fact
collector, and starts ``uv export`` before it imports packaging; audited again, it imports
none of packaging's marker, requirement, specifier or tag modules (nor logging, platform or
sysconfig, which ``packaging.tags`` imports): their answers are kept with the lock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv import cli
from support import DATA, FACTS, require

HEAVY = ("hpcenv.build", "rich", "packaging", "yaml", "torch")

#: One interpreter runs the three start-ups in turn and prints, after each, the modules
#: loaded so far (a module the first loaded would show in all three: none may appear).
_SCRIPT = """
import contextlib, io, json, sys
from hpcenv.cli import main
seen = {}
for argv in (["--help"], ["--version"], ["facts", "--json"]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    seen[" ".join(argv)] = {"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    cache = tmp_path_factory.mktemp("cache")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HPCENV_CACHE": str(cache)},
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _heavy(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def _commands(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if m.startswith("hpcenv.commands.")]


def test_help_imports_no_command_module_and_lists_every_command(
    started: dict[str, dict[str, object]],
) -> None:
    run = started["--help"]
    assert run["code"] == 0
    assert _commands(run["modules"]) == []
    assert _heavy(run["modules"]) == []
    out = str(run["out"])
    for name in cli.COMMANDS:
        assert f"    {name} " in out or f"    {name}\n" in out, name


def test_version_imports_no_command_module(started: dict[str, dict[str, object]]) -> None:
    run = started["--version"]
    assert run["code"] == 0 and str(run["out"]).startswith("hpcenv ")
    assert _commands(run["modules"]) == []
    assert _heavy(run["modules"]) == []


def test_facts_json_imports_its_command_only_and_nothing_heavy(
    started: dict[str, dict[str, object]],
) -> None:
    run = started["facts --json"]
    assert run["code"] == 0 and json.loads(str(run["out"]))["schema"] == 1
    assert _commands(run["modules"]) == ["hpcenv.commands.facts"]
    assert _heavy(run["modules"]) == []


def test_the_command_table_lists_every_command_module() -> None:
    """A module in ``hpcenv/commands/`` that is not in ``cli.COMMANDS`` could never run."""
    here = Path(cli.__file__).parent / "commands"
    modules = {p.stem for p in here.glob("*.py") if not p.stem.startswith("_")}
    assert set(cli.COMMANDS) == modules


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_commands_help_shows_its_description(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    with pytest.raises(SystemExit) as exited:
        cli.main([name, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: hpcenv {name}")
    doc = importlib.import_module(f"hpcenv.commands.{name}").__doc__
    assert doc and " ".join(doc.split()[:4]) in " ".join(out.split())


def test_an_unknown_command_names_the_commands_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bulid"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'bulid'" in err and "'build'" in err


#: What ``hpcenv audit uv.lock --json`` of a lock that runs does not use: the builder, rich,
#: a venv's binaries, the readers of hand-written files and their resolver, resolve's choice
#: (only a lock that does not run is told a better build) with the plan and index lookups,
#: the host-fact collectors, email, and tempfile (a work directory; its caches' files are
#: named by ``fsio.temp_name``).
AUDIT_UNUSED = (
    *HEAVY[:2],
    "hpcenv.binaries",
    "hpcenv.kit.fatbin",
    "hpcenv.project.compile",
    "hpcenv.project.readers",
    "hpcenv.project.handwritten",
    "hpcenv.project.torch_wish",
    "hpcenv.decide.torch_choice",
    "hpcenv.models.plan",
    "hpcenv.knowledge.lookup",
    "hpcenv.facts.allocation",
    "hpcenv.facts.fabric",
    "hpcenv.facts.nvidia",
    "email",
    "tempfile",
)

#: The audit of a lock in a fresh interpreter: the modules it loaded, and whether packaging
#: was loaded when ``uv export`` started (it starts first, to run beside those imports).
_AUDIT_SCRIPT = """
import contextlib, io, json, sys
from hpcenv.tools import uv
export = uv.project_export
started = []
def project_export(*args, **kwargs):
    started.append("packaging" in sys.modules)
    return export(*args, **kwargs)
uv.project_export = project_export
from hpcenv.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules),
                  "packaging_when_uv_started": started}))
"""


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    require("uv", shutil.which("uv") is not None, "uv is not on PATH")
    home = tmp_path_factory.mktemp("home")
    lock = DATA / "projects" / "prime-rl" / "uv.lock"
    argv = ["audit", str(lock), "--facts", str(FACTS / "gh200-isambard.json"), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", _AUDIT_SCRIPT, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HPCENV_HOME": str(home)},
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_audit_of_a_lock_imports_only_what_judges_a_lock(audited: dict[str, object]) -> None:
    # 3: prime-rl's mooncake-transfer-engine has aarch64 wheels for glibc >= 2.39 only and
    # no sdist; the recorded GH200 has 2.35 (every locked package's wheels are judged)
    assert audited["code"] == 3
    out = json.loads(str(audited["out"]))
    assert out["torch"].startswith("2.") and "mooncake-transfer-engine" in str(out)
    modules = audited["modules"]
    assert isinstance(modules, list)
    assert [m for m in modules if any(m == u or m.startswith(u + ".") for u in AUDIT_UNUSED)] == []
    assert _commands(modules) == ["hpcenv.commands.audit"]


def test_audit_of_a_lock_starts_uv_export_before_importing_packaging(
    audited: dict[str, object],
) -> None:
    """Once, and first: the export runs beside the imports, and is not run again."""
    assert audited["packaging_when_uv_started"] == [False]


#: What a second audit of the same lock on the same node does not import: packaging's
#: answers for the lock are kept (``utils/answers``), and ``packaging.utils`` would import
#: ``packaging.tags`` with logging, platform and sysconfig. Only ``packaging.version`` stays.
AUDIT_AGAIN_UNUSED = (
    "packaging.markers",
    "packaging.requirements",
    "packaging.specifiers",
    "packaging.tags",
    "packaging.utils",
    "packaging._parser",
    "packaging._tokenizer",
    "logging",
    "platform",
    "sysconfig",
)


@pytest.fixture(scope="module")
def audited_again(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """The audit of each real lock run twice in a fresh per-user cache: the first fills it
    (the lock read, packaging's answers), the second is what a user's next run is."""
    uv_bin = shutil.which("uv")
    require("uv", uv_bin is not None, "uv is not on PATH")
    assert uv_bin is not None
    env = {
        **os.environ,
        "HPCENV_HOME": str(tmp_path_factory.mktemp("home")),
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg")),
        "PATH": f"{Path(uv_bin).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    runs = []
    for project in ("prime-rl", "open-instruct"):
        lock = DATA / "projects" / project / "uv.lock"
        argv = ["audit", str(lock), "--facts", str(FACTS / "gh200-isambard.json"), "--json"]
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, "-c", _AUDIT_SCRIPT, *argv],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                timeout=120,
            )
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def test_a_lock_audited_again_imports_no_packaging_parser(
    audited_again: list[dict[str, object]],
) -> None:
    for first, again in zip(audited_again[::2], audited_again[1::2], strict=True):
        assert again["code"] == first["code"] and first["code"] in (0, 3)  # 3: cannot run
        assert again["out"] == first["out"]  # the same verdict, byte for byte
        first_modules, modules = first["modules"], again["modules"]
        assert isinstance(first_modules, list) and isinstance(modules, list)
        assert "packaging.markers" in first_modules  # the first run did parse
        unused = [m for m in modules if m in AUDIT_AGAIN_UNUSED]
        assert unused == []
