"""Audit of what research code ships instead of a lock, on real projects' files.

tests/data/projects/{kohya_ss,whisper,mingpt,olmo,dit} are copied from public repositories
(ORIGIN beside each). Before issue 21, audit read each of them as a compiled requirements
file: a bare ``torch`` line was "no torch" (exit 2), ``torch==2.6.0`` on a V100 was "a
CPU-only build" (PyPI's x86_64 2.6.0 is its cu124 build), and ``setup.py``,
``pyproject.toml`` and ``environment.yml`` were "no torch". Now each is read as what it is,
resolved for the node with real uv against PyPI (tests that need PyPI skip without it),
then judged.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.facts import collect
from hpcenv.project import readers as project_files
from hpcenv.project.audit import audit, read
from hpcenv.tools import uv
from hpcenv.utils.errors import BadInput
from support import DATA, FACTS, require
from support.buildkit import require_pypi

pytestmark = pytest.mark.pypi  # PyPI as of support.PYPI_AS_OF

PROJECTS = DATA / "projects"
V100 = collect.load(FACTS / "v100-supercloud.json")
V100_FILE = str(FACTS / "v100-supercloud.json")
GH200_FILE = str(FACTS / "gh200-isambard.json")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hpcenv cache; uv's own cache stays shared (downloads are reused)."""
    monkeypatch.setenv("HPCENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    return tmp_path / "cache"


# --- reading: each file as what it is --------------------------------------------------


def test_requirements_includes_and_indexes_are_read_relative_to_the_file() -> None:
    req = project_files.read(PROJECTS / "kohya_ss" / "requirements_linux.txt")
    assert req.kind == "requirements" and not req.compiled
    assert req.extra_index_urls == ("https://download.pytorch.org/whl/cu128",)
    assert "torch==2.7.0+cu128" in req.requirements
    assert "transformers==4.54.1" in req.requirements  # from -r requirements.txt
    assert len(req.files) == 2
    assert any("./sd-scripts is not here" in w for w in req.warnings)


def test_pip_options_constraints_urls_and_hashes(tmp_path: Path) -> None:
    (tmp_path / "constraints.txt").write_text("numpy<2\n")
    (tmp_path / "base.txt").write_text("tqdm>=4 ; python_version >= '3.8'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname = 'pkg'\nversion = '1'\n")
    req_file = tmp_path / "requirements.txt"
    req_file.write_text(
        "--index-url https://mirror.example/simple\n"
        "-f ./wheels  # a wheelhouse\n"
        "-r base.txt\n-c constraints.txt\n-e ./pkg\n"
        "git+https://github.com/facebookresearch/segment-anything.git@dca509f#egg=segment_anything\n"
        "torch==2.6.0 \\\n    --hash=sha256:0000\n"
        "--no-binary :all:\n"
    )
    (tmp_path / "wheels").mkdir()
    req = project_files.read(req_file)
    assert req.index_url == "https://mirror.example/simple"
    assert req.find_links == (str((tmp_path / "wheels").resolve()),)
    assert req.constraints == ("numpy<2",)
    assert req.local == (str((tmp_path / "pkg").resolve()),)
    assert (
        "segment_anything @ git+https://github.com/facebookresearch/segment-anything.git@dca509f"
        in req.requirements
    )
    assert "torch==2.6.0" in req.requirements
    assert "tqdm>=4 ; python_version >= '3.8'" in req.requirements
    assert any("--no-binary" in n for n in req.notes)


def test_an_include_cycle_and_a_missing_include_are_bad_input(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("-r b.txt\n")
    (tmp_path / "b.txt").write_text("-r a.txt\n")
    with pytest.raises(BadInput, match="includes itself"):
        project_files.read(tmp_path / "a.txt")
    (tmp_path / "c.txt").write_text("-r missing.txt\n")
    with pytest.raises(BadInput, match=r"missing.txt: no such requirements file \(included from"):
        project_files.read(tmp_path / "c.txt")


def test_setup_py_and_pyproject_are_never_read_as_requirements() -> None:
    setup = read(PROJECTS / "mingpt" / "setup.py")
    assert setup.kind == "setup.py" and setup.request is not None
    # minGPT's setup.py gives install_requires as a literal: read as data (ast), not run
    assert setup.request.project_file is not None and setup.request.requirements == ("torch",)
    assert setup.request.dynamic == ()
    pyproject = read(PROJECTS / "olmo" / "pyproject.toml")
    assert pyproject.kind == "pyproject" and pyproject.request is not None
    assert "torch>=2.1" in pyproject.request.requirements
    # a project directory without a venv or a lock is read by its dependency file
    assert read(PROJECTS / "mingpt").kind == "setup.py"


def test_conda_environment_maps_names_drops_cuda_and_names_conda_only(tmp_path: Path) -> None:
    dit = project_files.read(PROJECTS / "dit" / "environment.yml")
    assert dit.kind == "environment.yml"
    assert dit.requirements == ("torch>=1.13", "torchvision", "timm", "diffusers", "accelerate")
    assert any("channels pytorch, nvidia ignored" in n for n in dit.notes)
    assert any("dropped pytorch-cuda" in n and "brings its CUDA" in n for n in dit.notes)
    env = tmp_path / "environment.yaml"
    env.write_text(
        "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.10\n"
        "  - pytorch::pytorch=2.1.0=py3.10_cuda12.1_cudnn8.9.2_0\n  - cudatoolkit=11.8\n"
        "  - numpy=1.26\n  - ffmpeg\n  - cuda-nvcc\n  - pip\n  - pip:\n    - einops==0.7.0\n"
    )
    req = project_files.read(env)
    assert req.python == "3.10"
    assert req.requirements == ("torch==2.1.0.*", "numpy==1.26.*", "einops==0.7.0")
    assert req.warnings == (
        f"{env}: conda-only packages without a PyPI twin, not installed: ffmpeg "
        "(install them with the system or modules)",
    )
    assert any("cudatoolkit" in n and "cuda-nvcc" in n for n in req.notes)


# --- resolved for the node, then judged (real uv, real PyPI) -----------------------------


def test_a_bare_torch_line_is_what_pip_installs_and_the_fix_is_resolves(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """whisper's ``torch`` line: pip gets PyPI's newest torch, whose CUDA 13 build cannot
    run on the V100s; the fix is resolve's (an older release whose cu126 runs)."""
    require_pypi()
    rc = main(["audit", str(PROJECTS / "whisper" / "requirements.txt"), "--facts", V100_FILE,
               "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert rc == 3 and out["ok"] is False
    assert out["resolved"].startswith("resolved from a hand-written requirements file for x86_64")
    assert out["build"].startswith("cu13")
    assert out["fix"] is not None and "cu126" in out["fix"] and "use torch 2.14" in out["fix"]
    assert out["warnings"], "resolve's warnings about the fix are carried"


def test_pinned_torch_2_6_0_on_x86_is_pypis_cu124_build(cache: Path, tmp_path: Path) -> None:
    require_pypi()
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.6.0\n")
    result = audit(req, V100)
    assert result.ok, result.message
    assert (result.build, result.cuda) == ("cu124", "12.4")
    assert result.resolved is not None and "torch==2.6.0" in result.resolved
    # cached by content and target: a second audit runs no uv at all
    os.environ["HPCENV_UV"] = "/bin/false"
    try:
        again = audit(req, V100)
    finally:
        del os.environ["HPCENV_UV"]
    assert again.build == "cu124" and again.resolved is not None and "(cached)" in again.resolved
    # a day later the newest matching release may differ: resolved again
    (entry,) = (cache / "resolved").iterdir()
    os.utime(entry, (entry.stat().st_atime, entry.stat().st_mtime - 2 * 86400))
    later = audit(req, V100)
    assert later.resolved is not None and "(cached)" not in later.resolved
    # another content is another resolution
    req.write_text("torch>=2.6,<2.7\n")
    ranged = audit(req, V100)
    assert ranged.torch_version.startswith("2.6.") and ranged.build == "cu124"


def test_setup_py_is_resolved_through_its_build_backend_from_a_copy(cache: Path) -> None:
    require_pypi()
    tree = PROJECTS / "mingpt"
    before = sorted(p.name for p in tree.iterdir())
    result = audit(tree / "setup.py", V100)
    assert result.kind == "setup.py" and result.resolved is not None
    assert result.resolved.startswith("resolved from a hand-written setup.py")
    assert result.torch_version and result.build.startswith("cu")
    assert sorted(p.name for p in tree.iterdir()) == before  # no minGPT.egg-info left there


def test_pyproject_without_a_lock_and_its_optional_dependencies(cache: Path) -> None:
    require_pypi()
    from hpcenv.project import uv_lock as uvlock

    result = audit(PROJECTS / "olmo" / "pyproject.toml", V100)
    assert result.kind == "pyproject" and result.resolved is not None
    with pytest.raises(BadInput, match="no optional dependency group 'nope'"):
        audit(PROJECTS / "olmo" / "pyproject.toml", V100,
              selection=uvlock.Selection(extras=("nope",)))  # fmt: skip


def test_conda_environment_on_the_gh200(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DiT asks for pytorch-cuda=11.7: conda never built it for aarch64 (exit 3, named)."""
    require_pypi()
    target = str(PROJECTS / "dit" / "environment.yml")
    assert main(["audit", target, "--facts", GH200_FILE, "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and "published a cu117 build for aarch64" in out["error"]


def test_conda_environment_on_the_v100(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pytorch>=1.13 beside pytorch-cuda=11.7 is 2.0.1+cu117, the last release with it."""
    require_pypi()
    main(["audit", str(PROJECTS / "dit" / "environment.yml"), "--facts", V100_FILE, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "environment.yml"
    assert (out["torch"], out["build"], out["ok"]) == ("2.0.1+cu117", "cu117", True)
    assert any("pytorch-cuda" in n for n in out["notes"])


def test_an_unreachable_index_judges_the_exact_pins_with_a_warning(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kohya_ss's files with its PyTorch index replaced by a closed local port: the pins
    as written still show a cu128 torch with no sm_70 code for the V100s."""
    require("uv", uv.available(), "uv not found")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name in ("requirements_linux.txt", "requirements.txt"):
        text = (PROJECTS / "kohya_ss" / name).read_text()
        text = text.replace("https://download.pytorch.org/whl/cu128", f"http://127.0.0.1:{port}/")
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    result = audit(tmp_path / "requirements_linux.txt", V100)
    assert not result.ok and result.build == "cu128"
    assert "sm_70" in result.message
    assert result.resolved is not None and "exact pins judged as written" in result.resolved
    assert any("unreachable" in w for w in result.warnings)


# --- every CUDA package, not only torch --------------------------------------------------


def test_a_lock_whose_vllm_needs_7_5_fails_on_the_v100s(capsys: pytest.CaptureFixture[str]) -> None:
    """prime-rl pins vLLM 0.26.0 (compute capability >= 7.5 from 0.20.0, vllm.toml)."""
    rc = main(["audit", str(PROJECTS / "prime-rl" / "uv.lock"), "--facts", V100_FILE, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert any(
        p.startswith("vllm 0.26.0+cu129: needs compute capability >= 7.5") for p in out["packages"]
    )
    assert "vllm 0.26.0+cu129" in out["message"]
    assert rc == 3


def test_flash_attn_2_and_fa3_fail_on_the_rtx6000s(capsys: pytest.CaptureFixture[str]) -> None:
    """open-instruct's torch runs on BRTX's Quadro RTX 6000 (7.5), its flash-attn does not."""
    rc = main(["audit", str(PROJECTS / "open-instruct" / "uv.lock"), "--facts",
               str(FACTS / "rtx6000-brtx.json"), "--json"])  # fmt: skip
    assert rc == 3
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert (
        "flash-attn 2.8.3+cu128torch2.10: flash-attn 2 needs compute capability >= 8.0"
        in out["message"]
    )
    assert any(p.startswith("flash-attn-3 3.0.0") and ">= 9.0" in p for p in out["packages"])
    # prime-rl's lock on the GH200: no flash-attn complaint (9.0); its one problem is
    # mooncake-transfer-engine's aarch64 wheels, glibc >= 2.39 (test_audit_gpu_stacks.py)
    assert main(["audit", str(PROJECTS / "prime-rl" / "uv.lock"), "--facts", GH200_FILE,
                 "--json"]) == 3  # fmt: skip
    gh = json.loads(capsys.readouterr().out)
    bad = [p for p in gh["packages"] if ": runs here" not in p]
    assert [p.split(":", 1)[0] for p in bad] == ["mooncake-transfer-engine 0.3.11.post1"]
    assert any(p.startswith("vllm 0.26.0+cu129: runs here") for p in gh["packages"])


def test_bad_hand_written_files_are_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "requirements.txt"
    bad.write_text("numpy\ntorch >>= 2\n")
    assert main(["audit", str(bad), "--facts", V100_FILE]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{bad} (line 2): 'torch >>= 2' is not a requirement" in err
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels:\n  - conda-forge\n")
    assert main(["audit", str(env), "--facts", V100_FILE]) == 2
    assert "no 'dependencies:' list" in capsys.readouterr().err
    opt = tmp_path / "r2.txt"
    opt.write_text("-x y\n")
    assert main(["audit", str(opt), "--facts", V100_FILE]) == 2
    assert f"{opt} (line 1): unknown option '-x'" in capsys.readouterr().err


def test_a_file_meant_for_a_separate_torch_install_says_how(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A requirements file meant to be installed after a separate ``pip install torch``:
    resolved for the node it installs no torch, and the error says what to do instead."""
    require_pypi()
    project = tmp_path / "kohya"
    project.mkdir()
    (project / "requirements.txt").write_text("einops==0.7.0\nsafetensors==0.4.5\n")
    assert main(["audit", str(project / "requirements.txt"), "--facts", V100_FILE]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no torch in this requirements file" in err
    assert f"'hpcenv build PROFILE --project {project}' installs the profile's torch" in err


@pytest.mark.parametrize(("name", "file"), [("pyproject-extras", "pyproject.toml"),
                                            ("vllm-range", "setup.py")])  # fmt: skip
def test_extra_of_a_lockless_pyproject_and_a_setup_py(
    cache: Path, capsys: pytest.CaptureFixture[str], name: str, file: str
) -> None:
    """Issue 40: ``audit pyproject.toml --extra fa`` (no lock) and ``audit setup.py --extra
    vllm`` exited 2 with uv's "Requesting extras requires a pyproject.toml ..." (the extra
    was passed to ``uv pip compile`` of a requirements.in; it is read as data instead)."""
    require_pypi()
    extra = {"pyproject-extras": "fa", "vllm-range": "vllm"}[name]
    main(["audit", str(PROJECTS / name / file), "--extra", extra, "--facts", V100_FILE, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert "Requesting extras" not in json.dumps(out)
    judged = " ".join(out["packages"])
    assert {"pyproject-extras": "flash-attn 2.7.4.post1", "vllm-range": "vllm 0.11.0"}[
        name
    ] in judged


def test_flash_attn_pins_resolve_without_building_it(cache: Path) -> None:
    """Issue 40: ``torch==2.1.2`` + ``flash-attn==2.5.8`` on the V100: uv ran flash-attn's
    setup.py to learn its requirements (it imports torch: failed), and audit pasted the
    build's 40-line traceback into a warning, judging the pins as written. Now uv is told
    the release's requirements (``knowledge/dependency_metadata.toml``, read from its
    sdist), so the file resolves, no build runs, and the verdict is the same."""
    require_pypi()
    result = audit(PROJECTS / "flash-attn-pins" / "requirements.txt", V100)
    assert result.resolved is not None and result.resolved.startswith("resolved from"), (
        result.resolved
    )
    assert not [w for w in result.warnings if "built" in w or "Traceback" in w], result.warnings
    assert "flash-attn 2.5.8: flash-attn 2 needs compute capability >= 8.0" in result.packages[0]
