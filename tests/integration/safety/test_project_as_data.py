"""A repo under ``audit`` or ``plan --project`` is data: its code never runs and nothing
outside it is read.

Hostile repos are made in tmp: a ``setup.py`` and an in-tree build backend that each write a
marker file when run, requirements files that include or link to files outside the project,
``-e`` paths that leave it. Each is audited with the real CLI (real uv); before this change uv
built their metadata (running them, in the user's tree for ``-e .``) and included files were
read (their first line printed in the error, their names sent to the index the repo names).
"""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from hpcenv.project import containment, static_meta
from hpcenv.project import readers as project_files
from hpcenv.project.copy_tree import copy_project
from hpcenv.utils.errors import BadInput
from support import FACTS, REPO
from support.buildkit import hpcenv

V100_FILE = str(FACTS / "v100-supercloud.json")
SECRET = "root:$6$not-for-your-eyes:19000:0:99999:7:::"


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (files, directories, links), relative."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _marker_setup(marker: Path, extra: str = "") -> str:
    return (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from setuptools import setup\n"
        "deps = ['numpy' + '']\n"  # computed: only running it gives the list
        f"setup(name='evil', version='1', install_requires=deps{extra})\n"
    )


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """tmp/repo: a setup.py and an in-tree build backend that each write a marker."""
    repo = tmp_path / "repo"
    (repo / "backend").mkdir(parents=True)
    (repo / "setup.py").write_text(_marker_setup(tmp_path / "MARKER-setup"))
    (repo / "backend" / "evil_backend.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(tmp_path / 'MARKER-backend')!r}).write_text('ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
    )
    (repo / "requirements.txt").write_text("-e .\n")
    return repo


def _audit(*args: str, home: Path) -> tuple[int, str]:
    done = hpcenv("audit", *args, "--facts", V100_FILE, env={"HPCENV_CACHE": str(home)})
    return done.returncode, done.stdout + done.stderr


def test_audit_of_a_hostile_repo_runs_none_of_it(hostile: Path, tmp_path: Path) -> None:
    before = tree(hostile)
    code, out = _audit(str(hostile / "setup.py"), home=tmp_path / "cache")
    assert code == 2, out
    assert "setup.py computes its requirements" in out and "--allow-build" in out
    assert "Traceback" not in out
    code, out = _audit(str(hostile / "requirements.txt"), home=tmp_path / "cache")  # -e .
    assert code == 2 and "setup.py computes its requirements" in out, out
    # a pyproject whose build backend is in the tree, its dependencies declared as data
    (hostile / "setup.py").unlink()
    (hostile / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "evil_backend"\n'
        'backend-path = ["backend"]\n[project]\nname = "evilb"\nversion = "1"\n'
        "dependencies = []\n"
    )
    code, out = _audit(str(hostile / "pyproject.toml"), home=tmp_path / "cache")
    assert code == 2 and "no torch in this pyproject" in out, out  # read, resolved, judged
    before |= {"pyproject.toml"}
    before -= {"setup.py"}
    assert tree(hostile) == before  # no *.egg-info, nothing written into the tree
    assert not (tmp_path / "MARKER-setup").exists()
    assert not (tmp_path / "MARKER-backend").exists()


def test_allow_build_runs_it_in_a_copy_never_in_the_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.py").write_text(  # writes its marker beside itself: in the copy
        "import pathlib\npathlib.Path(__file__).with_name('MARKER').write_text('ran')\n"
        "from setuptools import setup\nsetup(name='evil', version='1', "
        "install_requires=[] + [])\n"
    )
    (repo / "requirements.txt").write_text("-e .\n")
    before = tree(repo)
    _, out = _audit(str(repo / "requirements.txt"), "--allow-build", home=tmp_path / "c")
    assert "computes its requirements" not in out and "Traceback" not in out, out
    assert "no torch" in out, out  # resolved: uv ran its setup.py (in a copy)
    assert tree(repo) == before  # no MARKER, no evil.egg-info in the user's tree


def test_static_setup_py_is_read_with_ast(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy>=1.20\n# comment\nscipy\n")
    (tmp_path / "setup.py").write_text(
        "import os\nfrom setuptools import setup\n"
        "HERE = os.path.dirname(__file__)\n"
        "REQUIRED = ['torch>=2.1', 'einops']\n"
        "with open(os.path.join(HERE, 'requirements.txt')) as f:\n"
        "    EXTRA = f.read().splitlines()\n"
        "setup(name='ok', install_requires=REQUIRED + EXTRA, python_requires='>=3.9',\n"
        "      extras_require={'dev': ['pytest']})\n"
    )
    req = project_files.read(tmp_path / "setup.py", extras=("dev",))
    assert req.dynamic == ()
    assert req.requirements == ("torch>=2.1", "einops", "numpy>=1.20", "scipy", "pytest")
    assert req.requires_python == ">=3.9"
    with pytest.raises(BadInput, match="no optional dependency group 'docs'"):
        project_files.read(tmp_path / "setup.py", extras=("docs",))


def test_setup_cfg_is_read_as_data(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "setup.cfg").write_text(
        "[options]\npython_requires = >=3.8\ninstall_requires =\n    torch>=2.0\n"
        "    tqdm; python_version < '3.12'\n[options.extras_require]\nviz = matplotlib\n"
    )
    req = project_files.read(tmp_path / "setup.cfg", extras=("viz",))
    assert req.dynamic == ()
    assert req.requirements == ("torch>=2.0", "tqdm; python_version < '3.12'", "matplotlib")
    assert req.requires_python == ">=3.8"


def test_dynamic_setup_py_is_said_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nimport json\nsetup(install_requires=json.load(open('d')))\n"
    )
    meta = static_meta.of_setup_py(tmp_path / "setup.py")
    assert meta.dynamic is not None and "\n" not in meta.dynamic
    assert "setup.py computes its requirements" in meta.dynamic


def test_a_file_setup_py_reads_outside_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text(SECRET + "\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.py").write_text(
        "from setuptools import setup\n"
        "setup(install_requires=open('../outside.txt').read().splitlines())\n"
    )
    with pytest.raises(BadInput, match="leaves the project") as err:
        project_files.read(repo / "setup.py")
    assert SECRET not in str(err.value)


class _Listener(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.paths.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    _Listener.paths.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", _Listener.paths
    server.shutdown()
    server.server_close()


def test_an_include_outside_the_project_is_refused_unread(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, requests = listener
    secret = tmp_path / "secret.txt"
    secret.write_text("machine-id-0123456789abcdef\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text(f"--index-url {url}\n-r {secret}\n")
    code, out = _audit(str(repo / "requirements.txt"), home=tmp_path / "cache")
    assert code == 2 and "-r/-c include" in out and "leaves the project" in out, out
    assert str(secret) in out and "machine-id" not in out
    (repo / "requirements.txt").write_text(f"--index-url {url}\n-c ../secret.txt\ntqdm\n")
    code, out = _audit(str(repo / "requirements.txt"), home=tmp_path / "cache")
    assert code == 2 and "leaves the project" in out and "machine-id" not in out, out
    assert requests == []  # no name of that file reached the index


def test_a_symlinked_requirements_file_leaving_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shadow").write_text(SECRET + "\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (repo / "requirements.txt").symlink_to(tmp_path / "shadow")
    code, out = _audit(str(repo / "requirements.txt"), home=tmp_path / "cache")
    assert code == 2 and "(a symlink)" in out and "leaves the project" in out, out
    assert "not-for-your-eyes" not in out and "Traceback" not in out
    # a link inside the project is followed as before
    (repo / "requirements.txt").unlink()
    (repo / "base.txt").write_text("--no-index\n")
    (repo / "requirements.txt").symlink_to("base.txt")
    assert project_files.read(repo / "requirements.txt").index_url == ""


def test_editable_path_leaving_the_project_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "setup.py").write_text(_marker_setup(tmp_path / "MARKER"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("-e ../other\n")
    with pytest.raises(BadInput, match=r"the local project .*other leaves the project"):
        project_files.read(repo / "requirements.txt")
    # plan --project: refused before anything is built (before: built ../other in place)
    done = hpcenv("plan", "local", "--project", str(repo), env={"HPCENV_HOME": str(tmp_path)})
    assert done.returncode == 2 and "leaves the project" in done.stderr, done.stderr
    assert not (tmp_path / "MARKER").exists() and tree(other) == {"setup.py"}


def test_plan_project_never_runs_a_setup_py(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.py").write_text(_marker_setup(tmp_path / "MARKER"))
    (repo / "requirements.txt").write_text("-e .\n")
    done = hpcenv("plan", "local", "--project", str(repo / "requirements.txt"),
                  env={"HPCENV_HOME": str(tmp_path / "home")})  # fmt: skip
    assert done.returncode == 2 and "setup.py computes its requirements" in done.stderr
    assert not (tmp_path / "MARKER").exists() and tree(repo) == {"setup.py", "requirements.txt"}


def test_a_package_data_symlink_leaving_the_tree_is_refused_at_build(tmp_path: Path) -> None:
    (tmp_path / "id_rsa").write_text("-----BEGIN KEY-----\n")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "data.txt").symlink_to(tmp_path / "id_rsa")
    with pytest.raises(BadInput, match=r"pkg/data.txt is a symlink leaving the project"):
        copy_project(repo, tmp_path / "copy")
    (repo / "pkg" / "data.txt").unlink()
    (repo / "pkg" / "real.txt").write_text("x")
    (repo / "pkg" / "data.txt").symlink_to("real.txt")  # inside: copied as a link
    copy_project(repo, tmp_path / "copy2")
    assert os.readlink(tmp_path / "copy2" / "pkg" / "data.txt") == "real.txt"


def test_containment_is_one_rule(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert containment.inside(tmp_path / "a" / "b" / "x", tmp_path / "a")
    assert not containment.inside(tmp_path / "a" / ".." / "x", tmp_path / "a")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a" / "loop")
    assert not containment.inside(tmp_path / "a" / "loop", tmp_path / "a")
    assert containment.shown("a\nb") == "a\\nb"


def test_a_killed_audits_work_copy_is_removed_by_the_next(tmp_path: Path) -> None:
    """A SIGKILLed audit (no handler runs) leaves its resolve directory in $TMPDIR; the
    next audit of this user removes it, and never one of a live process."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    left = tmpdir / f"hpcenv-resolve-{int(dead.stdout)}-abc123"
    (left / "project").mkdir(parents=True)
    (left / "project" / "setup.py").write_text("# a copy of the user's project\n")
    alive = tmpdir / f"hpcenv-resolve-{os.getpid()}-def456"
    alive.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("--no-index\n")  # resolved: an empty set
    done = hpcenv("audit", str(repo / "requirements.txt"), "--facts", V100_FILE,
                  env={"TMPDIR": str(tmpdir), "HPCENV_CACHE": str(tmp_path / "c")})  # fmt: skip
    assert done.returncode == 2 and "no torch" in done.stderr, done.stderr
    assert not left.exists() and alive.is_dir()
    assert [p.name for p in tmpdir.iterdir()] == [alive.name]  # its own: removed too


def test_a_newline_in_a_file_name_stays_in_one_error_line(tmp_path: Path) -> None:
    repo = tmp_path / "a\nb"
    repo.mkdir()
    (repo / "requirements.txt").write_text("-r missing.txt\n")
    code, out = _audit(str(repo / "requirements.txt"), home=tmp_path / "cache")
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert "a\\nb/missing.txt: no such requirements file" in out


def test_setuptools_dynamic_dependency_files_are_read_as_data(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "x"\nversion = "1"\ndynamic = ["dependencies"]\n'
        '[tool.setuptools.dynamic]\ndependencies = {file = ["requirements.txt"]}\n'
    )
    (tmp_path / "requirements.txt").write_text("torch>=2.2\n")
    req = project_files.read(tmp_path / "pyproject.toml")
    assert req.dynamic == () and req.requirements == ("torch>=2.2",)
    (tmp_path / "pyproject.toml").write_text(
        (tmp_path / "pyproject.toml").read_text().replace("requirements.txt", "../x.txt")
    )
    with pytest.raises(BadInput, match=r"\[tool.setuptools.dynamic\] file .*x.txt leaves"):
        project_files.read(tmp_path / "pyproject.toml", root=tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "x"\nversion = "1"\ndynamic = ["dependencies"]\n'
    )
    req = project_files.read(tmp_path / "pyproject.toml")
    assert req.dynamic and "build backend computes its requirements" in req.dynamic[0]


def test_a_conda_files_pip_include_outside_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "environment.yml").write_text(
        "name: x\ndependencies:\n  - pip\n  - pip:\n    - -r ../secret.txt\n"
    )
    with pytest.raises(BadInput, match=r"-r/-c include .*secret.txt leaves the project") as err:
        project_files.read(repo / "environment.yml")
    assert "not-for-your-eyes" not in str(err.value)


@pytest.mark.parametrize("name", ["pyproject.toml", ".python-version"])
def test_a_locks_pyproject_or_python_version_leaving_the_project_is_refused_unread(
    tmp_path: Path, name: str
) -> None:
    """A uv.lock's project files are read with it (by hpcenv, and by ``uv export``, which
    audit starts before anything else): a symlink among them leaving the project was
    followed, ``.python-version``'s first line read from the file it led to."""
    from hpcenv.project import uv_export

    lock = REPO / "tests" / "data" / "projects" / "nanochat"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    (repo / "uv.lock").write_bytes((lock / "uv.lock").read_bytes())
    (repo / "pyproject.toml").write_bytes((lock / "pyproject.toml").read_bytes())
    outside = tmp_path / "outside"
    if name == "pyproject.toml":
        outside.write_bytes((repo / "pyproject.toml").read_bytes())
        (repo / "pyproject.toml").unlink()
    else:
        outside.write_text(SECRET + "\n")
    (repo / name).symlink_to(outside)
    if name == "pyproject.toml":
        assert uv_export.lock_of(repo) is None  # uv is not started on it early
    for target in (repo, repo / "uv.lock"):
        code, out = _audit(str(target), home=tmp_path / "cache")
        assert code == 2 and f"{name} leaves the project" in out, out
        assert "not-for-your-eyes" not in out and "Traceback" not in out


@pytest.mark.parametrize("where", ["uv.toml", "pyproject.toml"])
def test_a_locks_uv_settings_never_make_audit_write_outside_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``uv export``, which audit runs on a lock, read the repo's uv settings: its
    ``cache-dir`` made uv create a cache (``CACHEDIR.TAG``, a 0666 ``.lock``) anywhere."""
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)  # it would mask the repo's setting
    lock = REPO / "tests" / "data" / "projects" / "prime-rl"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "uv.lock").write_bytes((lock / "uv.lock").read_bytes())
    pyproject = (lock / "pyproject.toml").read_text()
    elsewhere = tmp_path / "elsewhere"
    setting = f"cache-dir = {str(elsewhere)!r}\n"
    if where == "uv.toml":
        (repo / "uv.toml").write_text(setting)
    else:
        pyproject = pyproject.replace("[tool.uv]\n", f"[tool.uv]\n{setting}", 1)
        assert setting in pyproject
    (repo / "pyproject.toml").write_text(pyproject)
    code, out = _audit(str(repo), home=tmp_path / "cache")
    assert code in (0, 3) and "Traceback" not in out, out  # judged, as without the setting
    assert not elsewhere.exists()
