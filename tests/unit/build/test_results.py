"""The build's typed results: no untyped dict leaves ``build/`` for the commands, and each
result writes the JSON the build report has always held (key order included)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from hpcenv.binaries.cudalibs import LinkCheck
from hpcenv.build import results
from hpcenv.project.install_set import Change
from hpcenv.utils.errors import BadInput

BUILD = Path(results.__file__).parent


#: The edge: where a typed result becomes JSON (the report file, the marker, --json).
EDGE_METHODS = {"serialize", "to_json"}
UNTYPED = ("dict[str, Any]", "Mapping[str, Any]")


def _untyped_in_build() -> list[str]:
    """``file:line name`` of each public function or method of ``build/`` whose return
    annotation, and each public class field whose annotation, mentions an untyped dict."""
    found: list[str] = []
    for path in sorted(BUILD.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
                public = not node.name.startswith("_") and node.name not in EDGE_METHODS
                if public and any(u in ast.unparse(node.returns) for u in UNTYPED):
                    found.append(f"{path.name}:{node.lineno} {node.name}")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                fields = [
                    (item.lineno, item.target.id, ast.unparse(item.annotation))
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                ]
                found += [
                    f"{path.name}:{line} {node.name}.{name}"
                    for line, name, annotation in fields
                    if any(u in annotation for u in UNTYPED)
                ]
    return found


def test_no_untyped_dict_crosses_from_the_build_to_the_commands() -> None:
    assert _untyped_in_build() == []


def _dumps(data: object) -> str:
    return json.dumps(data, indent=2)


def test_a_project_install_writes_the_report_keys_in_their_order() -> None:
    done = results.ProjectInstall(
        project="/p",
        selection="uv.lock",
        python="3.11",
        python_why="its .python-version",
        torch_before="2.9.1+cu130",
        variant="cu126",
        warnings=("w",),
        changes=(Change(name="torch", before="2.9.1+cu130", after=None, why="why"),),
        copy_skipped=("skipped .git",),
        no_build_isolation=results.NoIsolation(
            packages=("deepspeed",), torch="2.13.0", build_requires=("wheel",), why={"d": "s"}
        ),
        installed_from_copy=(".",),
        torch_after="2.9.1+cu126",
        swapped=True,
        libraries=LinkCheck(major=12),
        checked=("torchext",),
    )
    expected = {
        "project": "/p",
        "selection": "uv.lock",
        "python": "3.11",
        "python_why": "its .python-version",
        "torch_before": "2.9.1+cu130",
        "variant": "cu126",
        "warnings": ["w"],
        "changes": [{"name": "torch", "before": "2.9.1+cu130", "after": None, "why": "why"}],
        "copy_skipped": ["skipped .git"],
        "no_build_isolation": {
            "packages": ["deepspeed"],
            "torch": "2.13.0",
            "build_requires": ["wheel"],
            "why": {"d": "s"},
        },
        "installed_from_copy": ["."],
        "torch_after": "2.9.1+cu126",
        "swapped": True,
        "libraries": {"cuda_major": 12, "ok": True, "problems": [], "objects": {}, "stacks": {}},
        "checked": ["torchext"],
        "flash_attn_from_project": False,
    }
    assert _dumps(done.serialize()) == _dumps(expected)


def test_a_project_install_leaves_out_what_was_not_done() -> None:
    done = results.ProjectInstall(
        project="/p", selection="s", python="3.11", python_why="w", torch_before="t", variant=None
    )
    assert list(done.serialize()) == [
        "project",
        "selection",
        "python",
        "python_why",
        "torch_before",
        "variant",
        "warnings",
        "changes",
        "copy_skipped",
        "no_build_isolation",
        "torch_after",
        "swapped",
        "checked",
        "flash_attn_from_project",
    ]


def test_flash_attn_outcomes_as_the_report_wrote_them() -> None:
    skip = results.FlashAttnOutcome(action="skip", reason="cpu", version="2.8.3")
    assert _dumps(skip.serialize()) == _dumps(
        {"action": "skip", "reason": "cpu", "version": "2.8.3"}
    )
    wheel = results.FlashAttnOutcome(action="wheel", reason="r", version="2.8.3", wheel="u")
    assert _dumps(wheel.serialize()) == _dumps(
        {"action": "wheel", "reason": "r", "version": "2.8.3", "from": "u"}
    )
    built = results.FlashAttnBuilt(
        wheel="/c/f.whl",
        hit=False,
        key={"torch": "2.9.1"},
        build_env={"JOBS": "4"},
        seconds=1.5,
    )
    build = results.FlashAttnOutcome(action="build", reason="r", version="2.8.3", built=built)
    assert _dumps(build.serialize()) == _dumps(
        {
            "action": "build",
            "reason": "r",
            "version": "2.8.3",
            "from": "/c/f.whl",
            "cache": "built",
            "key": {"torch": "2.9.1"},
            "build_env": {"JOBS": "4"},
            "seconds": 1.5,
        }
    )
    by_project = results.FlashAttnOutcome.left_to_project()
    assert _dumps(by_project.serialize()) == _dumps(
        {"action": "skip", "reason": "the project installs flash-attn"}
    )


def test_a_marker_is_parsed_into_its_stamp_and_what_it_installed() -> None:
    marker = results.BuildMarker.parse(
        {"schema": 1, "stamp": "abc", "installed": {"torch": "2.13.0+cpu"}}, "m.json"
    )
    assert marker == results.BuildMarker(stamp="abc", installed={"torch": "2.13.0+cpu"})


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"installed": {}}, "'stamp' must be a string, not missing"),
        ({"stamp": 5}, "'stamp' must be a string, not a JSON number"),
        ({"stamp": "a", "installed": ["torch"]}, "'installed' must be an object"),
        ({"stamp": "a", "installed": {"torch": 2}}, "not 'torch' is a JSON number"),
    ],
)
def test_a_marker_hpcenv_did_not_write_is_named_with_its_key(
    data: dict[str, object], named: str
) -> None:
    with pytest.raises(BadInput, match=r"^m\.json: ") as err:
        results.BuildMarker.parse(data, "m.json")
    assert named in str(err.value) and "\n" not in str(err.value)
