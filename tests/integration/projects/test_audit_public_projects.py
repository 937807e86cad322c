"""``audit`` on real projects' universal locks (tests/data/projects/*, origin in ORIGIN).

- open-instruct: groups ``cuda12``/``cuda13`` in ``[tool.uv] conflicts``, default groups
  ``dev`` + ``cuda12``, aarch64 torch from the cu130 index by marker, flash-attn URL wheels
  per group, ``requires-python ==3.12.*``;
- nanochat: extras ``cpu``/``gpu`` conflicting, torch 2.9.1, ``.python-version`` 3.10,
  ``default-groups = []``;
- prime-rl: cu128 torch 2.11 on both arches, a workspace, extras with URL wheels;
- lerobot: a setuptools project, torch 2.11.0+cu128 on Linux from the cu128 index.

Which packages ``uv sync`` installs is uv's to say: ``uv export --frozen`` resolves the
conflicts and groups for a selection and leaves PEP 508 markers, which ``packaging``
evaluates for the node. ``hpcenv.project.uv_lock`` reads its set that way (issue 21) and
must match each line to the right package of the lock (nanochat's torch 2.9.1 is in it
twice, from PyPI and the CPU index), naming the same packages and versions. Verdicts
use the recorded GH200 (565 driver) and V100 facts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hpcenv.cli import main
from hpcenv.project import uv_lock as uvlock
from hpcenv.project.audit import marker_environment
from hpcenv.tools import uv
from support import DATA, FACTS
from support.buildkit import require_uv

PROJECTS = DATA / "projects"
GH200 = str(FACTS / "gh200-isambard.json")
V100 = str(FACTS / "v100-supercloud.json")

#: (project, uv's selection flags, arch, Python) compared with uv export
CASES = [
    ("open-instruct", [], "x86_64", "3.12.3"),
    ("open-instruct", [], "aarch64", "3.12.3"),
    ("open-instruct", ["--no-default-groups", "--group", "cuda13"], "x86_64", "3.12.3"),
    ("open-instruct", ["--no-default-groups", "--group", "cuda13"], "aarch64", "3.12.3"),
    ("open-instruct", ["--no-default-groups"], "x86_64", "3.12.3"),
    ("nanochat", [], "x86_64", "3.10.12"),
    ("nanochat", [], "aarch64", "3.10.12"),
    ("nanochat", ["--extra", "gpu"], "aarch64", "3.12.3"),
    ("nanochat", ["--extra", "cpu"], "x86_64", "3.11.9"),
    ("prime-rl", [], "aarch64", "3.12.3"),
    ("prime-rl", ["--all-extras"], "x86_64", "3.12.3"),
    ("prime-rl", ["--extra", "flash-attn", "--no-default-groups"], "aarch64", "3.12.3"),
    ("lerobot", [], "x86_64", "3.12.3"),
    ("lerobot", [], "aarch64", "3.13.1"),
]


def selection(flags: list[str]) -> uvlock.Selection:
    extras, groups = [], []
    for flag, value in zip(flags, [*flags[1:], ""], strict=False):
        if flag == "--extra":
            extras.append(value)
        elif flag == "--group":
            groups.append(value)
    return uvlock.Selection(
        extras=tuple(extras),
        groups=tuple(groups),
        all_extras="--all-extras" in flags,
        no_default_groups="--no-default-groups" in flags,
    )


def copy_project(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest, ignore=shutil.ignore_patterns(".*cache", "__pycache__"))
    return dest


def uv_export(project: Path, flags: list[str], arch: str, python: str) -> dict[str, str]:
    """``{name: version or URL}`` uv installs for the selection on the node (via export)."""
    done = subprocess.run(
        [*uv.uv_argv(), "export", "--frozen", "--no-hashes", "--no-annotate", "--no-header",
         "--no-emit-project", "--no-emit-workspace", *flags],
        cwd=project, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    env = marker_environment(arch, python)
    out = {}
    for line in done.stdout.splitlines():
        if not line or line.startswith(("#", "-")):
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            pin = next(iter(req.specifier), None)
            out[canonicalize_name(req.name)] = pin.version if pin else str(req.url)
    return out


@pytest.mark.parametrize(("name", "flags", "arch", "python"), CASES)
def test_install_set_matches_uv(
    name: str, flags: list[str], arch: str, python: str, tmp_path: Path
) -> None:
    require_uv()
    project = copy_project(name, tmp_path)
    want = uv_export(project, flags, arch, python)
    lock = uvlock.read_lock(project / "uv.lock")
    got = uvlock.resolve(
        lock, uvlock.read_project(project), marker_environment(arch, python), selection(flags)
    )
    mine = {n: p for n, p in got.packages.items() if not p.local}
    assert sorted(mine) == sorted(want)
    for n, pkg in mine.items():
        if pkg.source.startswith("registry="):  # URL and git sources: uv prints the URL
            assert pkg.version == want[n], n
    assert "torch" in mine and mine["torch"].version == want["torch"]


def audit_cli(
    capsys: pytest.CaptureFixture[str], name: str, *args: str
) -> tuple[int, dict[str, object]]:
    code = main(["audit", str(PROJECTS / name / "uv.lock"), *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_open_instruct_on_the_gh200(capsys: pytest.CaptureFixture[str]) -> None:
    """Default groups dev + cuda12: on aarch64 the marker source sends torch to cu130, which
    the 565 driver cannot run; the message names the fork and the selection."""
    code, data = audit_cli(capsys, "open-instruct", "--facts", GH200)
    assert code == 3 and data["ok"] is False
    assert data["torch"] == "2.10.0+cu130"
    message = str(data["message"])
    assert "fork \"platform_machine == 'aarch64' and sys_platform == 'linux'\"" in message
    assert "groups dev, cuda12 (the project's default-groups)" in message
    assert "needs driver >= 580.65.06, this node has 565.57.01" in message
    assert "several torch versions" not in message
    assert "cu126" in str(data["fix"]) and "--project" in str(data["fix"])


def test_open_instruct_groups_on_the_v100(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = audit_cli(capsys, "open-instruct", "--facts", V100)
    # torch 2.10.0+cu128 runs on the V100s; the lock's flash-attn 2 (needs 8.0) does not
    assert code == 3 and data["torch"] == "2.10.0+cu128"
    assert "a CUDA 12.8 build that runs here" in str(data["message"])
    assert "but flash-attn 2.8.3+cu128torch2.10: flash-attn 2 needs compute capability >= 8.0" in (
        str(data["message"])
    )
    assert "Python 3.12" in str(data["selection"])  # the node's 3.11 is outside ==3.12.*
    assert "outside the project's requires-python ==3.12.*" in str(data["python_why"])
    code, data = audit_cli(
        capsys, "open-instruct", "--facts", V100, "--no-default-groups", "--group", "cuda13"
    )
    assert code == 3 and data["torch"] == "2.10.0+cu130"
    assert "groups cuda13 (--no-default-groups + --group cuda13)" in str(data["selection"])
    # no groups at all: PyPI's torch 2.10.0, whose CUDA runtime is reached through the graph
    code, data = audit_cli(capsys, "open-instruct", "--facts", V100, "--no-default-groups")
    assert data["torch"] == "2.10.0" and str(data["evidence"]).startswith(
        "pulls nvidia-cuda-runtime"
    )


def test_conflicting_selection_is_bad_input_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["audit", str(PROJECTS / "open-instruct" / "uv.lock"), "--facts", GH200, "--group",
         "cuda13", "--json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2
    data = json.loads(captured.out)
    assert data["ok"] is False and data["exit_code"] == 2
    assert "group cuda12 (enabled by default) and group cuda13 conflict" in data["error"]
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_nanochat_extras(capsys: pytest.CaptureFixture[str]) -> None:
    # no extra: PyPI's torch 2.9.1, a CPU build on aarch64
    code, data = audit_cli(capsys, "nanochat", "--facts", GH200)
    assert code == 3 and data["build"] == "cpu" and data["torch"] == "2.9.1"
    assert "pins 3.10 in .python-version" in str(data["python_why"])
    # --extra gpu: 2.9.1+cu128 from the cu128 index, minor-version compatible on 565
    code, data = audit_cli(capsys, "nanochat", "--facts", GH200, "--extra", "gpu")
    assert code == 0 and data["torch"] == "2.9.1+cu128"
    assert "extras gpu" in str(data["selection"]) and data["warnings"]
    code, data = audit_cli(capsys, "nanochat", "--facts", V100, "--extra", "cpu")
    assert code == 3 and data["torch"] == "2.9.1+cpu"
    code, data = audit_cli(capsys, "nanochat", "--facts", V100, "--all-extras")
    assert code == 2 and "extra cpu and extra gpu conflict" in str(data["error"])
    code, data = audit_cli(capsys, "nanochat", "--facts", V100, "--extra", "tpu")
    assert code == 2 and "no optional dependency 'tpu'" in str(data["error"])


def test_prime_rl_and_lerobot(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("prime-rl", "lerobot"):
        code, data = audit_cli(capsys, name, "--facts", GH200)
        assert data["torch"] == "2.11.0+cu128", name
        assert any("minor-version" in w for w in data["warnings"])  # type: ignore[attr-defined]
        # prime-rl's mooncake-transfer-engine has aarch64 wheels for glibc >= 2.39 only
        # (test_audit_gpu_stacks.py); lerobot's set installs
        assert code == (3 if name == "prime-rl" else 0), data["message"]
        code, data = audit_cli(capsys, name, "--facts", V100)  # cu128 of 2.11 has no sm_70
        assert code == 3 and "no code for sm_70" in str(data["message"]), name


def test_declared_profile(capsys: pytest.CaptureFixture[str]) -> None:
    """--declared PROFILE: the profile's [platform] is the node; no facts file needed."""
    code, data = audit_cli(capsys, "open-instruct", "--declared", "isambard")
    assert code == 3 and data["node"] == "profile isambard's declared node"
    assert "565.57.01" in str(data["message"])
    code, data = audit_cli(capsys, "open-instruct", "--declared", "supercloud")
    assert data["torch"] == "2.10.0+cu128" and "build that runs here" in str(data["message"])
    assert code == 3 and "flash-attn 2 needs compute capability >= 8.0" in str(data["message"])
    assert main(["audit", "x.lock", "--declared", "isambard", "--facts", GH200]) == 2


def test_no_torch_wheel_for_the_node(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """lerobot's torch 2.11.0+cu128 lists no CPython 3.15 wheel; nanochat's lock with the
    aarch64 wheels of 2.9.1+cu128 removed (the shape of an index without aarch64 builds)."""
    code, data = audit_cli(capsys, "lerobot", "--facts", V100, "--python", "3.15")
    assert code == 3
    assert "has no wheel for x86_64 Linux with CPython 3.15" in str(data["error"])
    project = copy_project("nanochat", tmp_path)
    lock = project / "uv.lock"
    lines = lock.read_text().splitlines(keepends=True)
    lock.write_text(
        "".join(ln for ln in lines if "torch-2.9.1%2Bcu128" not in ln or "aarch64" not in ln)
    )
    code = main(["audit", str(lock), "--facts", GH200, "--extra", "gpu", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 3
    assert "torch 2.9.1+cu128" in data["error"] and "has no wheel for aarch64" in data["error"]
    assert "several torch versions" not in data["error"]


def test_lock_installing_no_torch_says_which_selection_does(tmp_path: Path) -> None:
    """A project whose torch comes only with an extra: the message names the flag."""
    project = copy_project("nanochat", tmp_path)
    pyproject = project / "pyproject.toml"
    from hpcenv.facts.collect import load
    from hpcenv.project.audit import audit, read
    from hpcenv.utils.errors import BadInput

    assert read(project / "uv.lock").kind == "uv.lock"
    # drop torch from the root's own dependencies in the lock (the extras keep theirs)
    lock = project / "uv.lock"
    text = lock.read_text()
    root = text.index('name = "nanochat"')
    end = text.index("[package.optional-dependencies]", root)
    body = "".join(
        ln
        for ln in text[root:end].splitlines(keepends=True)
        if not ln.lstrip().startswith('{ name = "torch"')
    )
    lock.write_text(text[:root] + body + text[end:])
    with pytest.raises(
        BadInput, match=r"installs no torch.*torch comes with --extra cpu or --extra gpu"
    ):
        audit(lock, load(Path(GH200)))
    assert pyproject.is_file()
