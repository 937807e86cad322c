"""Every GPU package judged from what it pulls, torch or not (issue 41): a JAX project's
uv.lock, and torch beside JAX, audited on recorded nodes.

``tests/data/projects/jax_gpu`` is a uv.lock made by uv from PyPI (``jax[cuda12]`` and
``jax[cuda13]`` 0.7.2 as two conflicting extras) and ``torch_jax`` a ``uv pip compile`` of
``torch==2.9.1`` + ``jax[cuda13]==0.7.2`` with uv's ``# via`` lines (ORIGIN beside each).
The nodes are the recorded GH200 (driver 565) and V100 (575) facts, and the V100's facts
with driver 470 (CUDA 11.4), standing in for a node this machine cannot be. Before issue
41 the lock was "installs no torch ... nothing to audit" (exit 2) on every node, and the
torch + JAX file called torch "a CUDA 13.5 build" (the JAX plugin's runtime), naming no
JAX package.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcenv.cli import main
from support import DATA, FACTS
from support.buildkit import require_pypi

pytestmark = pytest.mark.pypi  # PyPI as of support.PYPI_AS_OF

JAX_LOCK = DATA / "projects" / "jax_gpu" / "uv.lock"
TORCH_JAX = DATA / "projects" / "torch_jax" / "requirements.txt"
V100 = str(FACTS / "v100-supercloud.json")
GH200 = str(FACTS / "gh200-isambard.json")


@pytest.fixture
def driver_470(tmp_path: Path) -> str:
    """The V100 node with driver 470.82.01 (CUDA 11.4), as on an older cluster."""
    facts = json.loads(Path(V100).read_text())
    facts["nvidia"].update(driver_version="470.82.01", cuda_driver_version="11.4")
    path = tmp_path / "v100-470.json"
    path.write_text(json.dumps(facts))
    return str(path)


def _audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    rc = main(["audit", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_jax_cuda12_is_refused_on_driver_470_naming_525(
    driver_470: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _audit(capsys, str(JAX_LOCK), "--facts", driver_470, "--extra", "gpu")
    assert rc == 3 and out["ok"] is False and out["torch"] is None
    message = str(out["message"])
    assert "no torch" in message
    (plugin,) = [p for p in out["packages"] if str(p).startswith("jax-cuda12-plugin 0.7.2")]  # type: ignore[attr-defined]
    assert "pulls nvidia-cuda-runtime-cu12 12.9.79" in plugin
    assert "needs driver >= 525.60.13" in plugin and "(470.82.01)" in plugin


@pytest.mark.parametrize("facts", [GH200, V100], ids=["gh200-565", "v100-575"])
def test_jax_cuda12_runs_on_gh200_and_v100(facts: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _audit(capsys, str(JAX_LOCK), "--facts", facts, "--extra", "gpu")
    assert rc == 0 and out["ok"] is True, out["message"]
    assert "its GPU packages run here" in str(out["message"])
    assert any(str(p).startswith("jax-cuda12-plugin 0.7.2: runs here") for p in out["packages"])  # type: ignore[attr-defined]


def test_jax_cuda13_on_v100_names_compute_capability_7_5_and_driver_580(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _audit(capsys, str(JAX_LOCK), "--facts", V100, "--extra", "cuda13")
    assert rc == 3 and out["ok"] is False
    (plugin,) = [p for p in out["packages"] if str(p).startswith("jax-cuda13-plugin")]  # type: ignore[attr-defined]
    assert "pulls nvidia-cuda-runtime 13.5.37" in plugin
    assert "needs driver >= 580.65.06" in plugin
    assert "needs compute capability >= 7.5" in plugin and "the GPUs are 7.0" in plugin
    assert "fix: jax[cuda12]" in plugin


def test_torch_beside_jax_cuda13_names_the_jax_plugin_not_torch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _audit(capsys, str(TORCH_JAX), "--facts", V100)
    assert rc == 3
    # torch is the CUDA 12.8 build it pulls, and it runs here; JAX's CUDA 13 does not
    assert (out["torch"], out["build"]) == ("2.9.1", "cu128")
    assert out["evidence"] == "pulls nvidia-cuda-runtime-cu12 12.8.90"
    bad = [p for p in out["packages"] if ": runs here" not in str(p)]  # type: ignore[attr-defined]
    assert {str(p).split(" ", 1)[0] for p in bad} == {"jax-cuda13-plugin", "jax-cuda13-pjrt"}
    assert "jax-cuda13-plugin 0.7.2: built for CUDA 13.5" in str(out["message"])


JAX_PLUGINS = {  # the x86_64 cp311 wheels uv locked (tests/data/projects/jax_gpu/uv.lock)
    "12": (
        "https://files.pythonhosted.org/packages/f1/b8/56708eff0065bf68cc5c738f5bdfbec4bd76ce"
        "ddbef3bfaf9ac869bcbd2f/jax_cuda12_plugin-0.7.2-cp311-cp311-manylinux_2_27_x86_64.whl",
        "adc924ebc7a45c8d3400ea0118dc70a7082b2a86e35711738d403dd3815d09bf",
    ),
    "13": (
        "https://files.pythonhosted.org/packages/b1/7f/5eeeb8a9c476d5c09e46ae1bf3bcf4630532873"
        "147f0caaa45718410ac33/jax_cuda13_plugin-0.7.2-cp311-cp311-manylinux_2_27_x86_64.whl",
        "75879b5dcddb02c298a923cf695e9d5d574853dbb9cc09c2544c85624ea85fb2",
    ),
}


def test_the_jax_plugins_gpu_code_read_from_their_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real wheels (5.5 MB each), read by range: JAX's CUDA 12 kernels are built for
    5.0 to 12.0, its CUDA 13 kernels for 7.5 to 12.0, so a V100 has none (what JAX's docs
    and CUDA 13's release notes say, here from the artifacts)."""
    require_pypi()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from hpcenv.binaries import wheel_code

    c12 = wheel_code.read_cached(JAX_PLUGINS["12"][0], sha256=JAX_PLUGINS["12"][1])
    c13 = wheel_code.read_cached(JAX_PLUGINS["13"][0], sha256=JAX_PLUGINS["13"][1])
    assert {lib.member for lib in c13.libraries} >= {"jax_cuda13_plugin/_linalg.so",
                                                      "jax_cuda13_plugin/_prng.so"}  # fmt: skip
    assert all(lib.sass[0] == "5.0" for lib in c12.libraries) and not c12.missing(
        "7.0", ptx_jit=True
    )
    assert all(lib.sass[0] == "7.5" for lib in c13.libraries)
    assert c13.missing("7.0", ptx_jit=True) == c13.libraries and not c13.missing(
        "9.0", ptx_jit=False
    )
    # cached by sha256: read again without the network
    monkeypatch.setattr(wheel_code, "read", None)
    assert wheel_code.read_cached(JAX_PLUGINS["13"][0], sha256=JAX_PLUGINS["13"][1]) == c13


def test_audit_gpu_code_names_the_wheel_without_code_for_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_pypi()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    req = tmp_path / "requirements.txt"
    req.write_text("# This file was autogenerated by uv via the following command:\n"
                   "jax-cuda13-plugin==0.7.2\n")  # fmt: skip
    rc, out = _audit(capsys, str(req), "--facts", V100, "--gpu-code")
    assert rc == 3
    (line,) = [p for p in out["packages"] if "its wheel" in str(p)]  # type: ignore[attr-defined]
    assert str(line).startswith(
        "jax-cuda13-plugin 0.7.2: its wheel jax_cuda13_plugin-0.7.2-cp311-cp311-manylinux_2_27"
        "_x86_64.whl carries no code for sm_70 (jax_cuda13_plugin/"
    )
    assert "SASS 7.5 8.0 9.0 10.0 12.0, PTX 12.0" in str(line)


PRIME_RL = DATA / "projects" / "prime-rl" / "uv.lock"  # ORIGIN there
LEROBOT = DATA / "projects" / "lerobot" / "uv.lock"


@pytest.mark.parametrize(
    ("facts", "needs", "tag"),
    [
        (GH200, "its aarch64 wheels need glibc >= 2.39, the node has 2.35",
         "(cp312-manylinux_2_35_aarch64)"),
        (V100, "its x86_64 wheels need glibc >= 2.35, the node has 2.31",
         "(cp312-manylinux_2_31_x86_64)"),
    ],
    ids=["gh200-aarch64", "v100-x86_64"],
)  # fmt: skip
def test_every_locked_package_s_wheels_are_judged_for_the_node_s_glibc(
    facts: str, needs: str, tag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """prime-rl's lock (a real public one) installs mooncake-transfer-engine 0.3.11.post1,
    whose wheels are manylinux_2_35 (x86_64) and _2_39 (aarch64) only, no sdist: uv sync
    fails on the recorded GH200 (glibc 2.35) and V100 (2.31). Before: only torch's wheels
    were judged, and the audit said the set runs."""
    rc, out = _audit(capsys, str(PRIME_RL), "--facts", facts)
    assert rc == 3 and out["ok"] is False
    (line,) = [p for p in out["packages"] if str(p).startswith("mooncake-transfer-engine")]  # type: ignore[attr-defined]
    assert str(line).startswith(
        f"mooncake-transfer-engine 0.3.11.post1: no wheel installs on this node {tag}"
    )
    assert needs in str(line) and str(line).endswith("and it has no sdist")
    assert "mooncake-transfer-engine 0.3.11.post1: no wheel" in str(out["message"])


def test_a_package_without_an_aarch64_wheel_is_named_on_gh200_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lerobot's ``intelrealsense`` extra: pyrealsense2 2.56.5.9235 has x86_64 (and other
    OS) wheels only, no sdist. On GH200 it is named, with its newest tag; on x86_64 it
    installs and is not."""
    rc, out = _audit(capsys, str(LEROBOT), "--facts", GH200, "--extra", "intelrealsense")
    assert rc == 3 and out["ok"] is False
    (line,) = [p for p in out["packages"] if str(p).startswith("pyrealsense2 ")]  # type: ignore[attr-defined]
    assert str(line) == (
        "pyrealsense2 2.56.5.9235: no wheel installs on this node (cp312-manylinux_2_35_aarch64): "
        "none of its 4 wheels is for aarch64; its newest wheel tag is "
        "cp313-cp313-manylinux1_x86_64, and it has no sdist"
    )
    _rc, x86 = _audit(capsys, str(LEROBOT), "--facts", V100, "--extra", "intelrealsense")
    assert not [p for p in x86["packages"] if str(p).startswith("pyrealsense2")]  # type: ignore[attr-defined]


TF_REQS = DATA / "projects" / "tensorflow_gpu" / "requirements.txt"  # ORIGIN there
WHEELS = DATA / "wheels"  # real METADATA extracts, ORIGIN there


def test_tensorflow_and_cuda_from_uvs_resolution_is_judged_by_what_it_pulls(
    driver_470: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tensorflow[and-cuda]==2.20.0`` resolved by uv from PyPI: its CUDA 12 runtime is
    tensorflow's (uv's ``# via``), so tensorflow is refused on driver 470 and runs on 575;
    hpcenv holds no TensorFlow row (``knowledge/packages.toml``)."""
    rc, out = _audit(capsys, str(TF_REQS), "--facts", driver_470)
    assert rc == 3 and out["torch"] is None
    (line,) = [p for p in out["packages"] if str(p).startswith("tensorflow ")]  # type: ignore[attr-defined]
    assert str(line).startswith(
        "tensorflow 2.20.0: built for CUDA 12.9 (pulls nvidia-cuda-runtime-cu12 12.9.79), "
        "needs driver >= 525.60.13, the driver runs CUDA <= 11.4 (470.82.01)"
    )
    rc, out = _audit(capsys, str(TF_REQS), "--facts", V100)
    assert rc == 0 and "its GPU packages run here (tensorflow 2.20.0;" in str(out["message"])


def _tf_venv(root: Path, *, and_cuda: bool) -> Path:
    """A venv holding TensorFlow 2.20.0's real METADATA, with (``and_cuda``) the CUDA 12
    wheels its ``and-cuda`` extra pulls (cuDNN's real METADATA; the runtime's version as uv
    resolved it), or without: the CPU install."""
    from support.standin_site import install, site_of

    site = site_of(root)
    (tf,) = WHEELS.glob("tensorflow-2.20.0-*.METADATA")
    install(site, "tensorflow", "2.20.0", metadata=tf.read_text())
    install(site, "numpy", "2.3.0")
    if and_cuda:
        install(site, "nvidia-cuda-runtime-cu12", "12.9.79")
        (cudnn,) = WHEELS.glob("nvidia_cudnn_cu12-*.METADATA")
        install(site, "nvidia-cudnn-cu12", "9.28.0.42", metadata=cudnn.read_text())
    return root


def test_a_tensorflow_venv_names_tensorflow_through_its_requires_dist(
    tmp_path: Path, driver_470: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A venv has no ``# via`` lines: its dist-info METADATA's ``Requires-Dist`` (the
    ``and-cuda`` extra's, the runtime installed) attribute the runtime to tensorflow.
    Before: "nvidia-cuda-runtime-cu12 12.9.79: ..." was refused, tensorflow never named.
    The CPU install (no extra) holds no GPU package: nothing to audit."""
    venv = _tf_venv(tmp_path / "gpu", and_cuda=True)
    rc, out = _audit(capsys, str(venv), "--facts", driver_470)
    assert rc == 3
    assert [str(p).split(":", 1)[0] for p in out["packages"]] == ["tensorflow 2.20.0"]  # type: ignore[attr-defined]
    assert "pulls nvidia-cuda-runtime-cu12 12.9.79" in str(out["packages"][0])  # type: ignore[index]
    assert "needs driver >= 525.60.13" in str(out["message"])
    cpu = _tf_venv(tmp_path / "cpu", and_cuda=False)
    rc, out = _audit(capsys, str(cpu), "--facts", driver_470)
    assert rc == 2 and "tensorflow" not in str(out.get("packages", ""))
