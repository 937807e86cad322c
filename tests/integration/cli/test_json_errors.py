"""``--json`` prints one JSON object on every outcome of every command that takes it: an
error is ``{"command", "ok": false, "error", "exit_code"}`` on stdout (the one line on
stderr stays), unless the command printed its own (audit's verdict)."""

from __future__ import annotations

import json

import pytest

from hpcenv.cli import main


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["plan", "no-such-profile"], 2),
        (["build", "no-such-profile"], 2),
        (["lock", "no-such-profile"], 2),
        (["facts", "--facts", "/nonexistent/facts.json"], 2),
    ],
)
def test_an_error_is_json_too(
    argv: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--json"]) == code
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["command"], out["ok"], out["exit_code"]) == (argv[0], False, code)
    assert out["error"] and "error:" in captured.err


def test_a_command_that_printed_its_own_json_is_not_repeated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", "/nonexistent/uv.lock", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)  # one object: json.loads refuses two
    assert out["source"] == "/nonexistent/uv.lock" and out["exit_code"] == 2
