"""CLI arguments under fuzzing: whatever argv, hpcenv ends with an exit code and a message,
never a traceback; bad values get exit code 2."""

from __future__ import annotations

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
    assert code in (0, 2, 3, 5), (command, args, code, err)
    if code == 2:
        assert "error" in err
