"""Profiles: every shipped profile validates; bad input is one line naming file, key,
line and fix, exit code 2, never a traceback (also under hypothesis fuzzing)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import main
from hpcenv.profile import schema as profile
from hpcenv.utils.errors import BadInput
from support import REPO

SHIPPED = sorted((REPO / "envs").glob("*.toml"))


def test_four_cluster_profiles_ship() -> None:
    assert {p.stem for p in SHIPPED} >= {"isambard", "brtx", "supercloud", "local"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_profile_validates(path: Path) -> None:
    p = profile.load_path(path)
    assert p.name == path.stem == p.profile.name
    assert set(p.probes.run) <= set(profile.KNOWN_PROBES)


def test_isambard_is_the_gh200_slingshot_profile() -> None:
    p = profile.load("isambard")
    assert (p.platform.arch, p.platform.compute_capability, p.platform.gpus_per_node) == (
        "aarch64",
        "9.0",
        4,
    )
    assert p.modules.load == ("PrgEnv-cray", "cuda/12.6", "brics/aws-ofi-nccl/1.8.1")
    assert "sm90a" in p.fixes.sitecustomize
    assert p.env_for(nodes=1)["FI_PROVIDER"] == "cxi"
    assert "NCCL_NET" not in p.env_for(nodes=1)
    assert p.env_for(nodes=2)["NCCL_NET"] == "AWS Libfabric"


def test_cluster_conventions() -> None:
    brtx, sc = profile.load("brtx"), profile.load("supercloud")
    assert (brtx.slurm.partition, brtx.job.scratch, brtx.platform.compute_capability) == (
        "brtx6",
        "/srv/local1",
        "7.5",
    )
    assert (sc.slurm.gpu_request, sc.slurm.gres_type, sc.platform.gpus_per_node) == (
        "gres",
        "volta",
        2,
    )
    assert brtx.flash_attn.mode == sc.flash_attn.mode == "skip"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('[torch]\nversion = "banana"\n', ["[torch] version", "line 2", "specifier"]),
        ('[torch]\nversoin = "==2.9.1"\n', ["versoin", "not a known key", "line 2"]),
        ('[tourch]\nversion = "==2.9.1"\n', ["[tourch]", "known section"]),
        ('[probes]\nrun = ["imports", "nccl-tests"]\n', ["nccl-tests", "known:"]),
        ('[platform]\ngpus_per_node = "4"\n', ["gpus_per_node", "integer"]),
        ('[platform]\narch = "ppc64le"\n', ["arch", "one of"]),
        ('[torch]\nbackend = "cuda12"\n', ["backend", "cu126"]),
        ('[env.always]\n"BAD-NAME" = "1"\n', ["BAD-NAME"]),
        ('[env.always]\n"NCCL_NET\\n" = "1"\n', ["NCCL_NET\\n"]),  # '$' passed a newline
        ('[slurm]\ngpu_request = "gres"\n', ["gres_type"]),
        ("[torch\nversion=1\n", ["invalid TOML", "line 1"]),
    ],
)
def test_bad_profile_one_line_exit_2(
    tmp_path: Path, text: str, needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcenv: error: ") and err.count("\n") == 1
    assert str(path) in err
    for needle in needles:
        assert needle in err


def test_unknown_profile_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "isambrad"]) == 2
    assert "available: " in capsys.readouterr().err


def test_profiles_and_schema_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--json"]) == 0
    assert main(["show", "--schema"]) == 0
    out = capsys.readouterr().out
    assert "torch.version" in out and "slurm.gpu_request" in out


# --- fuzzing ---------------------------------------------------------------------------

toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(string.printable, max_size=12),
)
toml_values = st.one_of(
    toml_scalars,
    st.lists(toml_scalars, max_size=3),
    st.dictionaries(
        st.text(string.ascii_letters, min_size=1, max_size=6), st.text(max_size=5), max_size=3
    ),
)
known_keys = [(s, k) for s, cls in profile.SECTIONS.items() for k in cls.__dataclass_fields__]


def _toml_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_literal(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f'"{k}" = {_toml_literal(v)}' for k, v in value.items()) + "}"


def entries_name(entries: list[tuple[tuple[str, str], object]]) -> str:
    """The profile name the entries set (the first one TOML accepted), or ''."""
    names = [v for (s, k), v in entries if (s, k) == ("profile", "name")]
    return str(names[0]) if names else ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(known_keys), toml_values), max_size=6))
def test_fuzz_typed_values_never_traceback(entries: list[tuple[tuple[str, str], object]]) -> None:
    lines: dict[str, list[str]] = {}
    for (section, key), value in entries:
        lines.setdefault(section, []).append(f"{key} = {_toml_literal(value)}")
    text = "".join(f"[{s}]\n" + "\n".join(dict.fromkeys(v)) + "\n" for s, v in lines.items())
    try:
        p = profile.parse(text, "fuzz.toml", "fuzz")
    except BadInput as exc:
        message = str(exc)
        assert message.startswith("fuzz.toml") and "\n" not in message
    else:
        assert p.name == p.profile.name == (entries_name(entries) or "fuzz")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text_never_traceback(text: str) -> None:
    try:
        profile.parse(text, "fuzz.toml", "fuzz")
    except BadInput as exc:
        assert str(exc).startswith("fuzz.toml")


def test_a_bad_requirement_is_one_line() -> None:
    """packaging's InvalidRequirement spans lines (a caret under the spot): one line here."""
    with pytest.raises(BadInput) as exc:
        profile.parse('[packages]\ninstall = [""]\n', "fuzz.toml", "fuzz")
    assert "\n" not in str(exc.value)
    assert "is not a PEP 508 requirement (Expected package name" in str(exc.value)
