"""Hostile or broken input is one line naming the file, key or value (exit 2), never a
traceback: bytes that are not UTF-8, nesting deep enough to exhaust Python's stack,
rich markup in any displayed value, wrong types in a rank's result, absurd numbers.

Text files are read by one reader (``fsio.read_text``), JSON and TOML parsed by
``fsio.parse_json``/``parse_toml`` with a nesting bound, and the consoles never parse
markup (``report.MaskingConsole``): each class is fixed once, there.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hpcenv.build import builder as build
from hpcenv.cli import main
from hpcenv.models.results import RankResult, Status
from hpcenv.ui import report
from hpcenv.utils import fsio
from support import FACTS
from support.buildkit import hpcenv as _cli

NOT_UTF8 = b'[profile]\ndescription = "caf\xe9"\n'


def _one_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


# --- bytes ------------------------------------------------------------------------------


def test_non_utf8_profile_facts_lock_and_requirements(tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_bytes(NOT_UTF8)
    _one_line(_cli("show", str(prof)), 2, str(prof), "not UTF-8", "line 2")
    facts = tmp_path / "f.json"
    facts.write_bytes(b'{"hostname": "n\xff"}')
    _one_line(_cli("facts", "--facts", str(facts)), 2, str(facts), "not UTF-8")
    reqs = tmp_path / "requirements.txt"
    reqs.write_bytes(b"torch==2.9.1\n# \xfe\n")
    _one_line(_cli("audit", str(reqs), "--facts", str(FACTS / "gh200-isambard.json")), 2, "UTF-8")
    locks = tmp_path / "lockfiles"
    locks.mkdir()
    (locks / f"local-{_arch()}.txt").write_bytes(b"# hpcenv-lock: x\n# \xff\n")
    done = _cli("lock", "local", "--check", env={"HPCENV_LOCKFILES": str(locks)})
    _one_line(done, 2, "lockfile is not UTF-8")


def _arch() -> str:
    import platform

    return platform.machine()


# --- nesting ----------------------------------------------------------------------------


def test_deep_toml_profile_is_bad_input_and_does_not_break_the_listing(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "deep.toml").write_text("[profile]\ndescription = 'x'\nx = " + "[" * 5000 + "]" * 5000)
    (envs / "fine.toml").write_text('[profile]\ndescription = "a fine one"\n')
    _one_line(_cli("show", str(envs / "deep.toml")), 2, "nested deeper than")
    done = _cli("profiles", "--json", env={"HPCENV_ENVS": str(envs)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert rows["fine"]["ok"] and not rows["deep"]["ok"]
    assert "nested deeper than" in rows["deep"]["error"]
    assert rows["local"]["ok"]  # the shipped profiles still list


def test_a_facts_arch_that_is_not_a_name_is_bad_input(tmp_path: Path) -> None:
    """Was: "torch 2.9.1 has no wheels for CPU arch '5'", naming neither the file nor the key."""
    facts = json.loads((FACTS / "v100-supercloud.json").read_text())
    facts["arch"] = 5
    (tmp_path / "f.json").write_text(json.dumps(facts))
    out = _cli("resolve", "--facts", str(tmp_path / "f.json"), "--torch", "==2.9.1")
    _one_line(out, 2, str(tmp_path / "f.json"), "'arch'", "x86_64")


def test_deep_json_facts_is_bad_input(tmp_path: Path) -> None:
    facts = tmp_path / "f.json"
    facts.write_text("[" * 100000 + "]" * 100000)
    _one_line(_cli("facts", "--facts", str(facts)), 2, "nested deeper than")
    facts.write_text('{"modules": ' + "[" * 40 + '"x"' + "]" * 40 + "}")
    _one_line(_cli("facts", "--facts", str(facts)), 2, str(facts))


def test_uv_lock_with_package_5_is_bad_input(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text('version = 1\nrequires-python = ">=3.10"\npackage = 5\n')
    _one_line(
        _cli("audit", str(lock), "--facts", str(FACTS / "gh200-isambard.json")),
        2,
        str(lock),
    )


def test_a_build_marker_holding_a_non_object_is_no_marker(tmp_path: Path) -> None:
    for text in ("[1, 2]", '"x"', "5", "[" * 5000, "\xff"):
        (tmp_path / build.MARKER).write_text(text, errors="surrogateescape")
        assert build.read_marker(tmp_path) is None


# --- markup -----------------------------------------------------------------------------


def test_markup_in_displayed_values_is_shown_literally(tmp_path: Path) -> None:
    """``[/bold]`` in a description, GPU name, hostname or path crashed rich;
    ``ray[default]`` showed as ``ray``."""
    d = tmp_path / "[red]dir[x]"
    d.mkdir()
    prof = d / "m.toml"
    prof.write_text(
        '[profile]\ndescription = "closing [/bold] tag and [link=x]y"\n'
        '[packages]\ninstall = ["ray[default]>=2.49"]\n'
    )
    done = _cli("show", str(prof))
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "closing [/bold] tag and [link=x]y" in flat and "ray[default]>=2.49" in flat
    facts = json.loads((FACTS / "gh200-isambard.json").read_text())
    facts["hostname"] = "nid[/]01"
    facts["nvidia"]["gpus"][0]["name"] = "GH200 [/bold] [bold red]"
    (tmp_path / "f.json").write_text(json.dumps(facts))
    done = _cli("facts", "--facts", str(tmp_path / "f.json"))
    assert done.returncode == 0, done.stderr
    assert "nid[/]01" in done.stdout and "GH200 [/bold] [bold red]" in done.stdout


def test_console_renders_any_text_literally() -> None:
    import io

    buf = io.StringIO()
    out = report.MaskingConsole(file=buf, width=200, color_system=None)
    for text in ("[/]", "[/bold]", "[bold", "[link=javascript:x]y[/link]", ":smile:"):
        out.print(text)
    assert buf.getvalue().split("\n")[:5] == [
        "[/]",
        "[/bold]",
        "[bold",
        "[link=javascript:x]y[/link]",
        ":smile:",
    ]


# --- rank results -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"status": "pass", "rank": "zero"}, "rank"),
        ({"status": "pass", "details": [1, 2]}, "details"),
        ({"status": "pass", "summary": {"a": 1}}, "summary"),
        ({"status": "pass", "metrics": "fast"}, "metrics"),
        ({"status": ["pass"]}, "status"),
        ({"status": "pass", "rank": True}, "rank"),
    ],
)
def test_rank_json_with_bad_types_is_an_error_naming_the_key(
    data: dict[str, object], key: str
) -> None:
    r = RankResult.from_json(data, rank=3, host="h", where="/r/nccl.rank3.json")
    assert r.status is Status.ERROR and r.rank == 3
    assert f"key '{key}'" in r.summary and "/r/nccl.rank3.json" in r.summary


# --- numbers ----------------------------------------------------------------------------


def test_huge_ranks_is_refused_naming_the_cap_and_the_override() -> None:
    done = _cli("probe", "nccl", "--env", "local", "--ranks", "99999999999999999999")
    _one_line(done, 2, "HPCENV_MAX_RANKS", "CPUs", "GiB memory")
    done = _cli("doctor", "--ranks", "1000")  # before any build
    _one_line(done, 2, "--ranks 1000 is more than")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_timeouts_must_be_finite_and_positive(value: str, hpcenv_home: Path) -> None:
    """``--timeout nan`` disabled the hang guard (every comparison with nan is false)."""
    done = _cli("probe", "imports", "--env", "local", "--timeout", value)
    assert done.returncode == 2 and "not a number of seconds greater than 0" in done.stderr
    if value != "0":  # --wait 0: do not wait for another build
        done = _cli("build", "local", "--wait", value, env={"HPCENV_HOME": str(hpcenv_home)})
        assert done.returncode == 2 and "is not a number of seconds (0 or more)" in done.stderr
        assert not hpcenv_home.exists()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[probes]\nnccl_min_bytes = 4096\nnccl_max_bytes = 1024\n", "larger than nccl_max_bytes"),
        ("[probes]\ntimeout_s = inf\n", "must be a finite number"),
        ("[probes]\ntimeout_s = nan\n", "must be a finite number"),
        ('[platform]\ndriver = "banana"\n', "not an NVIDIA driver version"),
        ("[job]\nscratch_min_gib = inf\n", "must be a finite number"),
        ("[probes]\nnccl_expect_busbw_gbps = -1\n", "must be 0 or more"),
        ("[probes]\nnccl_expect_busbw_gbps = inf\n", "must be a finite number"),
    ],
)
def test_absurd_profile_values_are_refused_when_it_loads(
    tmp_path: Path, body: str, needle: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(body)
    _one_line(_cli("show", str(path)), 2, needle, str(path))


@pytest.mark.parametrize("stem", ["..", "-rf", ".hidden", "a b"])
def test_names_from_file_names_are_validated_like_declared_names(tmp_path: Path, stem: str) -> None:
    """``...toml`` named the profile ``..`` (venvs/..); ``-rf.toml`` made ``hpcenv build -rf``."""
    path = tmp_path / f"{stem}.toml"
    path.write_text('[profile]\ndescription = "x"\n')
    assert main(["show", str(path)]) == 2


def test_parsers_bound_nesting_iteratively() -> None:
    assert fsio.depth([[[]]]) == 3
    with pytest.raises(Exception, match="nested deeper"):
        fsio.parse_json("[" * 40 + "]" * 40, "x")
    assert fsio.parse_json("[" * 30 + "]" * 30, "x") is not None
