"""CLI arguments under fuzzing: whatever argv, hpcenv ends with an exit code and a message,
never a traceback; bad values get exit code 2."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import build_parser, main

COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
SAFE = [
    c
    for c in COMMANDS
    if c in {"facts", "profiles", "show", "resolve", "plan", "audit", "preflight", "sbatch"}
]
words = st.one_of(
    st.sampled_from(
        [
            "--json",
            "--facts",
            "--torch",
            "--schema",
            "isambard",
            "local",
            "nope",
            "==2.9.1",
            ">=banana",
            "/nonexistent.json",
            "--backend",
            "cu999",
            "-x",
            "--nodes",
            "0",
            "-1",
            "nccl",
        ]
    ),
    st.text(max_size=12),
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(command=st.sampled_from(SAFE), args=st.lists(words, max_size=5))
def test_fuzz_argv_never_traceback(
    command: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if "--submit" in args or "--wait" in args:
        return
    try:
        code = main([command, *args])
    except SystemExit as exc:  # argparse: usage line + error line, exit 2
        code = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # 8: `preflight PROFILE` on this machine, which is not that profile's node (README's
    # exit codes): an answer, not a crash
    allowed = (0, 2, 3, 5, 8) if command == "preflight" else (0, 2, 3, 5)
    assert code in allowed, (command, args, code, err)
    if code == 2:
        assert "error" in err


# --- the hardening classes: bytes, nesting, markup
# (secrets: tests/integration/safety/test_secrets_at_exits.py)


def _outcome(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _nested(depth: int, kind: str) -> str:
    return kind[0] * depth + kind[1] * depth


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.builds(
            lambda d, k: k.encode() + _nested(d, "[]").encode(),
            st.integers(1, 3000),
            st.sampled_from(["x = ", "[profile]\ndescription = 'd'\nx = "]),
        ),
        st.builds(lambda d: _nested(d, "[]").encode(), st.integers(1, 3000)),
        st.builds(lambda d: ('{"a":' * d + "1" + "}" * d).encode(), st.integers(1, 3000)),
    ),
    command=st.sampled_from(
        [["show", "{f}"], ["facts", "--facts", "{f}"], ["plan", "local", "--facts", "{f}"]]
    ),
)
def test_fuzz_file_bytes_and_nesting_are_one_line(
    data: bytes,
    command: list[str],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Any bytes, and TOML/JSON nested thousands deep, as a profile or facts file: a
    result or one line naming the file (exit 2), never a traceback."""
    path = tmp_path_factory.mktemp("bytes") / ("p.toml" if command[0] == "show" else "f.json")
    path.write_bytes(data)
    code, _, err = _outcome([a.format(f=path) for a in command], capsys)
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and str(path) in err, err


markup = st.lists(
    st.sampled_from(["[", "]", "/", "bold", "red", "[/]", "[/bold]", "[link=x]", ":", "x"]),
    min_size=1,
    max_size=12,
).map("".join)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=markup)
def test_fuzz_markup_in_displayed_values_is_shown_literally(
    text: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rich markup in a description, GPU name and hostname never crashes a table and is
    shown as written (``report``'s consoles parse no markup)."""
    import json

    from support import FACTS

    tmp = tmp_path_factory.mktemp("markup")
    prof = tmp / "m.toml"
    prof.write_text(f"[profile]\ndescription = {json.dumps(text)}\n")
    code, out, _ = _outcome(["show", str(prof)], capsys)
    flat = re.sub(r"[\s│]", "", out)  # a long cell wraps inside its column
    assert code == 0 and re.sub(r"\s", "", text) in flat
    facts = json.loads((FACTS / "gh200-isambard.json").read_text())
    facts["hostname"] = text
    facts["nvidia"]["gpus"][0]["name"] = text
    path = tmp / "f.json"
    path.write_text(json.dumps(facts))
    code, out, _ = _outcome(["facts", "--facts", str(path)], capsys)
    assert code == 0 and re.sub(r"\s", "", text) in re.sub(r"[\s│]", "", out)
