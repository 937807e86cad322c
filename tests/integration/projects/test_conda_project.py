"""A conda ``environment.yml`` read as conda installs it, by every command that asks
(audit, and plan/build through ``install_set.project_set``): ``pytorch=1.11.0`` is torch 1.11.0
(conda's ``=`` is a fuzzy prefix match), ``cudatoolkit=11.3`` / ``pytorch-cuda=12.1`` / a
``cuda11.3`` build string choose the torch variant, ``python=3.8.5`` is the Python.

The files here are of this test's own making, in the shape of the torch-1.11-era conda
files the issue names (pytorch.org's previous-versions page: ``conda install
pytorch==1.11.0 cudatoolkit=11.3 -c pytorch``). Audit resolves them with real uv against
PyPI; the plan side needs no network (the resolution before install is not called).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from hpcenv.cli import main
from hpcenv.decide.plan import make_plan
from hpcenv.facts import collect
from hpcenv.profile import schema as profile
from hpcenv.project import install_set, readers
from hpcenv.project import uv_lock as uvlock
from hpcenv.project.request import ProjectRequest
from hpcenv.utils.errors import BadInput
from support import FACTS
from support.buildkit import require_pypi

pytestmark = pytest.mark.pypi  # PyPI as of support.PYPI_AS_OF

A100_FILE = str(FACTS / "a100-standin.json")
A100 = collect.load(FACTS / "a100-standin.json")

TORCH_1_11 = """\
name: era-of-1.11
channels:
  - pytorch
dependencies:
  - python=3.8.5
  - pytorch=1.11.0
  - cudatoolkit=11.3
  - numpy
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    return tmp_path / "cache"


def conda_project(tmp_path: Path, text: str = TORCH_1_11) -> Path:
    directory = tmp_path / "proj"
    directory.mkdir()
    (directory / "environment.yaml").write_text(text)
    return directory


# --- reading --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "release"),
    [("==1.11.0.*", "1.11.0"), ("==2.1.2", "2.1.2"), ("==2.1.2+cu121", "2.1.2"),
     ("==1.11.*", None), (">=1.13", None)],
)  # fmt: skip
def test_an_exact_release_reads_condas_fuzzy_pin(spec: str, release: str | None) -> None:
    assert readers.exact_release(SpecifierSet(spec)) == release


def test_the_cuda_selector_chooses_the_variant(tmp_path: Path) -> None:
    request = readers.read(conda_project(tmp_path) / "environment.yaml")
    assert (request.variant, request.python) == ("cu113", "3.8")
    assert request.variant_why == "environment.yaml says cudatoolkit=11.3"
    for dep, variant in [
        ("pytorch-cuda=12.1", "cu121"),
        ("pytorch=1.11.0=py3.8_cuda11.3_cudnn8.2.0_0", "cu113"),
        ("pytorch=1.11.0=py3.8_cpu_0", "cpu"),
    ]:
        text = f"dependencies:\n  - {dep}\n"
        (tmp_path / "e.yml").write_text(text)
        assert readers.read(tmp_path / "e.yml").variant == variant, dep


def test_a_name_starting_with_http_is_a_requirement(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "httpx==0.27.0\nhttplib2\nhttpcore>=1\n"
        "https://example.org/wheels/foo-1.0-py3-none-any.whl\n"
    )
    request = readers.read(tmp_path / "requirements.txt")
    assert request.names() == ("httpx", "httplib2", "httpcore", "foo")
    assert request.warnings == ()


# --- every command gives the same answer ----------------------------------------------


def test_audit_judges_the_conda_build_with_the_files_python(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "torch version '1.11.0.*' is not a version" (exit 2), or PyPI's cu102 build
    and a false "no sm_80; fix: use cu113" on the A100, for the node's Python 3.11."""
    require_pypi()
    target = conda_project(tmp_path) / "environment.yaml"
    main(["audit", str(target), "--facts", A100_FILE, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (out["torch"], out["build"], out["python"]) == ("1.11.0+cu113", "cu113", "3.8")
    assert out["ok"] is True and out["fix"] is None
    assert "python=3.8" in out["python_why"]


def test_plan_installs_the_conda_build_with_the_files_python(tmp_path: Path) -> None:
    plan = make_plan(profile.load("local"), A100, environ={})
    request = ProjectRequest(
        directory=conda_project(tmp_path),
        file=None,
        selection=uvlock.DEFAULT_SELECTION,
        with_profile_packages=False,
    )
    ps = install_set.project_set(request, plan, A100)
    assert (ps.torch_after, ps.variant, ps.python.version) == (
        "torch==1.11.0+cu113",
        "cu113",
        "3.8",
    )
    assert "cudatoolkit=11.3" in ps.changes[0].why


# --- a directory with two kinds -------------------------------------------------------


def test_an_environment_file_that_installs_the_project_wins_over_its_setup_py(
    tmp_path: Path,
) -> None:
    """Before: ``--project DIR`` planned from the bare setup.py (its torch pin gone) and
    said nothing. setup.py here is a bare ``setup(name=...)``, never run by this test."""
    directory = conda_project(tmp_path, TORCH_1_11 + "  - pip:\n    - -e .\n")
    (directory / "setup.py").write_text("from setuptools import setup\nsetup(name='proj')\n")
    assert readers.find_in(directory) == directory / "environment.yaml"
    note = readers.precedence_note(directory, directory / "environment.yaml")
    assert note is not None and "read environment.yaml; passed over setup.py" in note
    (tmp_path / "plain").mkdir()
    plain = conda_project(tmp_path / "plain")  # does not install the project: setup.py first
    (plain / "setup.py").write_text("from setuptools import setup\nsetup(name='proj')\n")
    assert readers.find_in(plain) == plain / "setup.py"


def test_plan_names_the_file_read_and_the_one_passed_over(tmp_path: Path) -> None:
    directory = conda_project(tmp_path, TORCH_1_11 + "  - pip:\n    - -e .\n")
    (directory / "setup.py").write_text("from setuptools import setup\nsetup(name='proj')\n")
    plan = make_plan(profile.load("local"), A100, environ={})
    request = ProjectRequest(
        directory=directory,
        file=None,
        selection=uvlock.DEFAULT_SELECTION,
        with_profile_packages=False,
    )
    ps = install_set.project_set(request, plan, A100)
    assert ps.torch_after == "torch==1.11.0+cu113"
    assert any("passed over setup.py" in w for w in ps.warnings)


def test_plan_exits_3_with_json_when_no_build_of_the_projects_torch_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch 1.11.0 carries no sm_90: nothing runs on the H100s. Before: exit 4 ("build
    failed", though nothing was built) and nothing on stdout under --json."""
    directory = conda_project(tmp_path, TORCH_1_11.replace("  - cudatoolkit=11.3\n", ""))
    h100 = str(FACTS / "h100-standin.json")
    rc = main(["plan", "local", "--facts", h100, "--project", str(directory), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 3 and out["exit_code"] == 3
    assert "torch 1.11.0" in out["error"] and "sm_90" in out["error"]


# --- --python for plan, lock and build of a project --------------------------------------


def test_python_option_sets_the_projects_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--python X.Y`` wins over the file's ``python=`` (plan, lock and build share it);
    one requires-python excludes is exit 2 naming both."""
    directory = conda_project(tmp_path)
    rc = main(["plan", "local", "--facts", A100_FILE, "--project", str(directory),
               "--python", "3.9", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["project"]["python"] == "3.9"
    assert out["project"]["python_why"] == "--python"
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "pyproject.toml").write_text(
        '[project]\nname = "q"\nversion = "0"\nrequires-python = ">=3.11"\n'
    )
    for command in ("plan", "lock", "build"):
        rc = main([command, "local", "--facts", A100_FILE, "--project", str(tmp_path / "q"),
                   "--python", "3.10", "--json"])  # fmt: skip
        out = json.loads(capsys.readouterr().out)
        assert rc == 2 and "--python 3.10" in out["error"] and ">=3.11" in out["error"], command
    rc = main(["plan", "local", "--python", "3.12", "--json"])
    assert rc == 2 and "go with --project" in json.loads(capsys.readouterr().out)["error"]


def test_a_variant_not_published_for_the_arch_names_the_release(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1.11.0 published no cu113 build for aarch64: exit 3 naming torch==1.11.0, the release
    conda's ``pytorch=1.11.0`` is, not the ``==1.11.0.*`` spelling hpcenv reads it into."""
    target = conda_project(tmp_path)
    rc = main(["audit", str(target), "--facts", str(FACTS / "gh200-isambard.json"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 3 and out["exit_code"] == 3
    assert "no torch==1.11.0 published a cu113 build for aarch64" in out["error"]
    assert "1.11.0.*" not in out["error"]


def test_condas_variables_section_is_read_and_an_alias_refused(tmp_path: Path) -> None:
    """Issue 40: the hand parser refused conda's ``variables:`` (a mapping), exit 2 on a
    valid file; the file is read with PyYAML's safe loader now, aliases refused (a few
    lines that expand without bound), one line naming the file and the line."""
    text = TORCH_1_11 + "variables:\n  CUDA_HOME: /usr/local/cuda\n  OMP_NUM_THREADS: 4\n"
    request = readers.read(conda_project(tmp_path, text) / "environment.yaml")
    assert (request.variant, request.python) == ("cu113", "3.8")
    assert "torch==1.11.0.*" in request.requirements
    bomb = "x: &a [1, 2]\ny: [*a, *a]\ndependencies:\n  - numpy\n"
    (tmp_path / "bomb.yml").write_text(bomb)
    with pytest.raises(
        BadInput, match=r"bomb\.yml \(line 2\): conda environment file holds an alias"
    ):
        readers.read(tmp_path / "bomb.yml")
