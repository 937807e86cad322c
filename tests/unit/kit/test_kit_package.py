"""The probe kit (``hpcenv.kit``): one owner per helper, standard library only, one
registry of probes; its small pure parts on their own."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from hpcenv.kit import libfabric, nccl, registry, slurm_env, versions
from hpcenv.kit.status import Status
from support import REPO

KIT = REPO / "src" / "hpcenv" / "kit"


def _imports(path: Path) -> set[str]:
    """Module-level imports (a function may import what its probe checks: torch)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize(
    "path", [REPO / "src" / "hpcenv" / "__init__.py", *sorted(KIT.glob("*.py"))], ids=str
)
def test_the_kit_imports_the_standard_library_and_itself_only(path: Path) -> None:
    """A target environment sees the kit and nothing else of hpcenv (paths.kit_path)."""
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for name in _imports(path):
        top = name.split(".")[0]
        assert top in allowed or name.startswith("hpcenv.kit"), f"{path.name} imports {name}"


def test_every_probe_script_is_registered_and_named_apart_from_its_package() -> None:
    scripts = {p.name for p in (REPO / "probes").glob("*.py") if not p.name.startswith("_")}
    assert scripts == {p.script for p in registry.PROBES}
    for p in registry.PROBES:
        assert p.script.endswith("_probe.py") and p.script.removesuffix(".py").isidentifier()


def test_readme_and_nox_list_every_probe() -> None:
    readme = (REPO / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `hpcenv probe "))
    for name in registry.NAMES:
        assert name in row, f"README's probe row does not name {name}"
    noxfile = (REPO / "noxfile.py").read_text()
    assert "registry.PROBES" in noxfile  # probe-<name> sessions come from the registry


def test_status_combine_rule() -> None:
    assert Status.combine([]) is Status.SKIP
    assert Status.combine(["skip", "skip"]) is Status.SKIP
    assert Status.combine(["skip", "pass"]) is Status.PASS
    assert Status.combine([Status.PASS, "fail", "error"]) is Status.ERROR
    assert Status.FAIL.failed and Status.ERROR.failed and not Status.SKIP.failed
    assert str(Status.PASS) == "pass" == Status.PASS
    with pytest.raises(ValueError):
        Status.combine(["ok"])


def test_nccl_version_spellings() -> None:
    assert nccl.decode_version(22703) == "2.27.3"
    assert nccl.decode_version(21903) == "2.19.3"
    assert nccl.decode_version(2804) == "2.8.4"
    assert nccl.version_text((2, 21, 5)) == "2.21.5"
    assert nccl.version_text(22105) == "2.21.5"  # an int from an older torch
    assert nccl.version_text("2.21.5") == "2.21.5"


def test_version_ranges_as_the_tables_write_them() -> None:
    assert versions.key("2.23.4+cuda12.4") == (2, 23, 4)
    assert versions.key("") == ()
    assert versions.in_range("2.23.4", ">=2.21,<2.24")
    assert not versions.in_range("2.24.0", ">=2.21,<2.24")
    assert versions.in_range((0, 10, 1), ">=0.10")
    assert not versions.in_range("2.23", "~=2.23")  # a form the tables never use


def test_fi_info_list_parsing() -> None:
    text = "cxi:\n    version: 1.0\ntcp:\n    version: 1.1\ntcp;ofi_rxm:\n    version: 1\ncxi:\n"
    assert libfabric.parse_fi_info_list(text) == ("cxi", "tcp", "tcp;ofi_rxm")
    assert libfabric.FI_INFO_TIMEOUT_S > 0


def test_slurm_env_reads_counts_in_every_spelling() -> None:
    s = slurm_env.read(
        {
            "SLURM_JOBID": "7",
            "SLURM_NNODES": "2",
            "SLURM_TASKS_PER_NODE": "4(x2)",
            "SLURM_GPUS_ON_NODE": "a100:4",
            "SLURM_CPUS_ON_NODE": "72",
            "SLURM_STEP_GPUS": "0,1",
        }
    )
    assert s.in_job and s.job_id == "7" and s.nnodes == 2
    assert (s.tasks_per_node, s.ntasks_per_node) == (4, None)  # only an explicit one caps
    assert (s.gpus_on_node, s.cpus_on_node, s.step_gpus) == (4, 72, "0,1")
    assert not slurm_env.read({}).in_job
    assert slurm_env.count("garbage") is None and slurm_env.count("0") == 0
