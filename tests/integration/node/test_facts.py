"""Host facts: the JSON contract, the NVIDIA readers (NVML double, fake nvidia-smi,
/proc), SLURM allocation, libfabric and the net plugin lookup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcenv.cli import main
from hpcenv.facts import collect as facts
from hpcenv.facts import nvidia
from hpcenv.facts.collect import load
from hpcenv.kit import nvidia_proc
from hpcenv.models.facts import from_json, to_json
from hpcenv.slurm import allocation
from hpcenv.utils.errors import BadInput
from support import FACTS
from support.fakenodes import fake_smi

CONTRACT_KEYS = {
    "schema",
    "hostname",
    "arch",
    "glibc",
    "python",
    "cpus",
    "memory_gib",
    "nvidia",
    "slurm",
    "network",
    "modules",
}


def test_facts_json_on_this_machine_is_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= CONTRACT_KEYS
    assert data["schema"] == 1
    assert data["arch"] == os.uname().machine
    assert data["cpus"] == os.cpu_count()
    assert data["memory_gib"] > 0
    assert set(data["network"]) >= {"libfabric_providers", "nccl_net_plugin"}
    if shutil.which("nvidia-smi") is None and not Path("/proc/driver/nvidia/version").exists():
        assert data["nvidia"] is None


def test_facts_cli_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from hpcenv.cli import main; main(['facts', '--json']); "
        "sys.stderr.write(str('torch' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().endswith("False")


def test_fake_nvidia_smi_with_two_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_smi(
        tmp_path / "bin",
        [
            "0, NVIDIA GH200 120GB, 9.0, 97871, 565.57.01, 0",
            "1, NVIDIA GH200 120GB, 9.0, 97871, 565.57.01, 2",
        ],
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCENV_NO_NVML", "1")  # a real NVML would win over the fake
    assert main(["facts", "--json"]) == 0
    nv = json.loads(capsys.readouterr().out)["nvidia"]
    assert nv["driver_version"] == "565.57.01"
    assert nv["cuda_driver_version"] == "12.7"
    assert [g["index"] for g in nv["gpus"]] == [0, 1]
    assert {g["compute_capability"] for g in nv["gpus"]} == {"9.0"}
    assert nv["gpus"][1]["ecc_uncorrected"] == 2
    assert nv["gpus"][0]["memory_mib"] == 97871


def test_smi_csv_not_supported_fields() -> None:
    gpus = nvidia.parse_smi_csv("0, Quadro RTX 6000, 7.5, 24576, 535.104.05, [N/A]\n")
    assert gpus[0].ecc_uncorrected is None
    assert gpus[0].compute_capability == "7.5"


class FakeNVML:
    """Test double of the pynvml calls hpcenv makes, standing in for a GPU node's NVML."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0

    def __init__(
        self, gpus: list[dict[str, Any]], driver: str = "575.57.08", cuda: int = 12090
    ) -> None:
        self.gpus, self.driver, self.cuda, self.shut = gpus, driver, cuda, False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return self.driver.encode()

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:
        return str(h["name"])

    def nvmlDeviceGetCudaComputeCapability(self, h: dict[str, Any]) -> tuple[int, int]:
        return h["cc"]  # type: ignore[no-any-return]

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(total=h["mib"] * 1024 * 1024)

    def nvmlDeviceGetTotalEccErrors(self, h: dict[str, Any], kind: int, counter: int) -> int:
        if h.get("ecc") is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return int(h["ecc"])


def test_nvml_reader_with_a_double() -> None:
    nvml = FakeNVML(
        [
            {"name": "Tesla V100-PCIE-32GB", "cc": (7, 0), "mib": 32768, "ecc": 0},
            {"name": "NVIDIA A100-SXM4-80GB", "cc": (8, 0), "mib": 81920, "ecc": None},
        ]
    )
    found = nvidia.read_nvml(nvml)
    assert found is not None and nvml.shut
    assert found.driver_version == "575.57.08"
    assert found.cuda_driver_version == "12.9"
    assert [g.compute_capability for g in found.gpus] == ["7.0", "8.0"]
    assert found.gpus[1].ecc_uncorrected is None
    assert found.gpus[1].memory_mib == 81920


def test_nvml_without_library_falls_through() -> None:
    class NoLib:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert nvidia.read_nvml(NoLib()) is None


def test_proc_driver_version() -> None:
    text = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  565.57.01  "
        "Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Oct 15 ...\nGCC version: ...\n"
    )
    assert nvidia_proc.parse_proc_version(text) == "565.57.01"
    assert (
        nvidia_proc.parse_proc_version(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19"
        )
        == "535.104.05"
    )


def test_slurm_allocation_from_env() -> None:
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "nid[001-002]",
        "SLURM_NTASKS": "8",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_TASKS_PER_NODE": "4(x2)",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_GPUS_ON_NODE": "4",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    }
    s = allocation.from_env(env)
    assert s is not None
    assert s.hosts == ("nid001", "nid002")
    assert (s.ntasks, s.nnodes, s.ntasks_per_node, s.gpus_on_node) == (8, 2, 4, 4)
    assert s.cuda_visible_devices == "0,1,2,3"
    assert allocation.from_env({}) is None
    # SLURM_TASKS_PER_NODE is always set ("1(x2)" without a task count): not a request
    implicit = {k: v for k, v in env.items() if k != "SLURM_NTASKS_PER_NODE"}
    implicit["SLURM_TASKS_PER_NODE"] = "1(x2)"
    s2 = allocation.from_env(implicit)
    assert s2 is not None and s2.ntasks_per_node is None


def test_modules_from_lmod_env() -> None:
    assert facts.loaded_modules({"LOADEDMODULES": "PrgEnv-cray:cuda/12.6"}) == (
        "PrgEnv-cray",
        "cuda/12.6",
    )


@pytest.mark.parametrize("path", sorted(FACTS.glob("*.json")), ids=lambda p: p.stem)
def test_recorded_facts_round_trip(path: Path) -> None:
    recorded = load(path)
    assert recorded.nvidia is not None and recorded.gpus
    again = from_json(json.loads(json.dumps(to_json(recorded))), "again")
    assert to_json(again) == to_json(recorded)


def test_missing_keys_are_unknown() -> None:
    f = from_json({"arch": "aarch64"}, "partial.json")
    assert f.arch == "aarch64" and f.nvidia is None and f.cpus is None


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"cpus": "many"}', "'cpus'"),
        ('{"nvidia": {"gpus": []}}', "nvidia.driver_version"),
        (
            '{"nvidia": {"driver_version": "565.57.01", "gpus": [{"compute_capability": "sm90"}]}}',
            "compute_capability",
        ),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_facts_file_is_one_line_exit_2(
    tmp_path: Path, content: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text(content)
    assert main(["facts", "--facts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and str(bad) in err
    assert "Traceback" not in err


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
json_any = st.recursive(
    json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=12,
)
facts_like = st.fixed_dictionaries(
    {},
    optional={
        key: json_any
        for key in (
            "schema",
            "hostname",
            "arch",
            "cpus",
            "memory_gib",
            "modules",
            "slurm",
            "network",
        )
    }
    | {
        "nvidia": st.one_of(
            json_any,
            st.fixed_dictionaries(
                {"driver_version": json_any},
                optional={
                    "cuda_driver_version": json_any,
                    "gpus": st.lists(
                        st.one_of(
                            json_any,
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "index": json_any,
                                    "name": json_any,
                                    "compute_capability": json_any,
                                    "memory_mib": json_any,
                                },
                            ),
                        ),
                        max_size=3,
                    ),
                },
            ),
        )
    },
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(facts_like, json_any))
def test_fuzz_facts_json_is_facts_or_one_line_bad_input(data: object) -> None:
    """Any JSON document either loads as facts or is refused as BadInput, in one line."""
    try:
        loaded = from_json(data, "fuzz.json")
    except BadInput as exc:
        assert str(exc).startswith("fuzz.json") and "\n" not in str(exc)
    else:
        assert to_json(loaded)["schema"] == 1


def test_facts_json_loads_no_heavy_module_and_no_other_command(tmp_path: Path) -> None:
    """The import rule of hpcenv.commands: `hpcenv facts --json` starts fast."""
    code = (
        "import io, contextlib, json, sys; from hpcenv.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['facts', '--json'])\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HPCENV_CACHE": str(tmp_path)},
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    heavy = {m for m in loaded if m.split(".")[0] in ("rich", "packaging", "torch")}
    assert not heavy, heavy
    commands = {m for m in loaded if m.startswith("hpcenv.commands.")}
    assert commands == {"hpcenv.commands.facts"}, commands
