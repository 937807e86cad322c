"""Secrets are masked where output leaves hpcenv, whatever field they were planted in.

A secret is the value of a secret-named variable (in this process's environment or in a
profile's ``[env]``) or the credentials of a URL. The fuzzer below plants such secrets
in every field of a profile and a facts file (description, GPU name, hostname, modules,
index URL, find_links, a module name...), runs the read-only commands through the real
CLI entry point, and greps stdout and stderr; the build test greps every file a
(failing) build writes. Masking lives at the exits only (``report``'s consoles,
``commands.print_json``/``print_text``, ``cli.main``'s error line, ``fsio``), and
``test_only_the_exits_print_or_write`` keeps it that way.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcenv.cli import main
from hpcenv.utils import redact
from support import FACTS, REPO
from support.buildkit import require_uv

#: Secrets: long enough to be masked by value, made of characters TOML and JSON keep.
secret_values = st.text(string.ascii_letters + string.digits + "_-", min_size=10, max_size=24).map(
    lambda s: f"sk{s}"
)


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for these characters


def _profile(env_secret: str, url_secret: str, plain: str) -> str:
    """A valid profile with the secrets (and ``plain``, which carries them too) in every
    string field it has."""
    return f"""
[profile]
name = "leaky"
description = {_toml(f"desc {env_secret} {url_secret} {plain}")}
[platform]
gpu = {_toml(f"GPU {env_secret}")}
driver = "565.57.01"
compute_capability = "9.0"
gpus_per_node = 1
libfabric_provider = {_toml(plain)}
[torch]
version = "==2.9.1"
index_url = {_toml(f"https://alice:{url_secret}@mirror.example/whl")}
[packages]
install = ["numpy"]
find_links = [{_toml(f"https://bob:{url_secret}@links.example/{env_secret}")}]
[modules]
load = [{_toml(f"cuda/{env_secret}")}]
[env.always]
WANDB_API_KEY = {_toml(env_secret)}
NCCL_IB_PKEY = "0x8001"
NOTE = {_toml(plain)}
[env.multi_node]
PIP_INDEX_URL = {_toml(f"https://carol:{url_secret}@pypi.example/simple")}
[slurm]
partition = "gpu"
[job]
log_dir = {_toml(f"logs-{plain}")}
"""


def _facts(secret: str) -> dict[str, object]:
    data = json.loads((FACTS / "gh200-isambard.json").read_text())
    data["hostname"] = f"nid-{secret}"
    data["modules"] = [f"mod/{secret}"]
    data["nvidia"]["gpus"][0]["name"] = f"NVIDIA {secret}"
    data["network"]["nccl_net_plugin"] = f"/opt/{secret}/libnccl-net.so"
    return data


COMMANDS = [
    ["show", "{profile}"],
    ["show", "{profile}", "--json"],
    ["plan", "{profile}", "--facts", "{facts}"],
    ["plan", "{profile}", "--facts", "{facts}", "--json"],
    ["plan", "{profile}", "--declared", "--json"],
    ["facts", "--facts", "{facts}"],
    ["facts", "--facts", "{facts}", "--json"],
    ["resolve", "--facts", "{facts}", "--torch", "==2.9.1", "--json"],
    ["sbatch", "{profile}", "imports"],
    ["preflight", "{profile}", "--facts", "{facts}", "--json"],
    ["profiles"],
    ["profiles", "--json"],
    ["lock", "{profile}", "--facts", "{facts}", "--check"],
]


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    env_secret=secret_values,
    url_secret=secret_values,
    host_secret=secret_values,
    argv=st.sampled_from(COMMANDS),
)
def test_fuzz_secrets_in_every_field_never_leave_hpcenv(  # noqa: PLR0917 - hypothesis
    env_secret: str,
    url_secret: str,
    host_secret: str,
    argv: list[str],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tmp = tmp_path_factory.mktemp("leak")
    envs = tmp / "envs"
    envs.mkdir()
    prof = envs / "leaky.toml"
    prof.write_text(_profile(env_secret, url_secret, f"see {host_secret}"))
    facts = tmp / "facts.json"
    facts.write_text(json.dumps(_facts(host_secret)))
    monkeypatch.setenv("HF_TOKEN", host_secret)  # a secret known from the environment only
    monkeypatch.setenv("HPCENV_ENVS", str(envs))
    monkeypatch.setenv("HPCENV_HOME", str(tmp / "home"))
    monkeypatch.setenv("HPCENV_LOCKFILES", str(tmp / "lockfiles"))
    monkeypatch.chdir(tmp)
    args = [a.format(profile=prof, facts=facts) for a in argv]
    with contextlib.suppress(SystemExit):
        main(args)
    out, err = capsys.readouterr()
    for secret in (env_secret, url_secret, host_secret):
        assert secret not in out, f"{args}: secret on stdout"
        assert secret not in err, f"{args}: secret on stderr"
    assert "Traceback" not in err
    if argv[0] == "sbatch":
        assert "export NCCL_IB_PKEY=0x8001" in out  # not a secret: jobs need it


def test_a_validation_error_never_prints_a_whole_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``[env] always = {'HF_TOKEN': 'hf_...', ...} must be a table of strings`` printed
    the token; the message names the key and the type instead."""
    path = tmp_path / "p.toml"
    path.write_text('[env.always]\nHF_TOKEN = "hf_shortish"\nWORKERS = 4\n')
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "hf_shortish" not in err and "WORKERS" not in err
    assert "[env] always is a table of 2 key(s) but must be a table of strings" in err
    assert main(["profiles"]) in (0, 2)
    assert "hf_shortish" not in capsys.readouterr().out


def test_a_requirement_with_url_credentials_is_refused_without_printing_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lock never stores credentials: ``name @ https://user:pw@host/...`` is refused
    when the profile loads, with the fix, and the password is not in the message."""
    path = tmp_path / "p.toml"
    path.write_text(
        '[packages]\ninstall = ["priv @ https://u:pw-1234567@host.example/priv-1.0-py3-none-any.whl"]\n'
    )
    assert main(["plan", str(path), "--declared"]) == 2
    err = capsys.readouterr().err
    assert "pw-1234567" not in err and "~/.netrc" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("WANDB_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("GITHUB_AUTH", True),
        ("DB_PASSWORD", True),
        ("OPENAI_APIKEY", True),
        ("NCCL_IB_PKEY", False),  # an InfiniBand partition key: jobs break without it
        ("KEYTIMEOUT", False),
        ("SSH_AUTH_SOCK", False),
        ("NCCL_SOCKET_IFNAME", False),
    ],
)
def test_secret_names_are_words_not_substrings(name: str, secret: bool) -> None:
    assert redact.is_secret(name) is secret


def test_secret_assignments_are_masked_by_name_however_short() -> None:
    assert redact.text("run with HF_TOKEN=abc NCCL_IB_PKEY=0x1") == (
        "run with HF_TOKEN=REDACTED NCCL_IB_PKEY=0x1"
    )
    script = 'export HF_TOKEN="${HF_TOKEN:?set it}"'  # a reference holds no value
    assert redact.text(script) == script


@pytest.mark.slow
def test_build_files_hold_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build that fails at its lock step (the index is a closed port) writes its log and
    JSON report; neither they nor the error line carry any planted secret."""
    require_uv()
    env_secret, url_secret, host_secret = "skEnvSecret123", "skUrlSecret456", "skHostSecret789"
    envs = tmp_path / "envs"
    envs.mkdir()
    text = _profile(env_secret, url_secret, f"see {host_secret}")
    text = text.replace("https://alice:", "http://alice:").replace(
        "mirror.example/whl", "127.0.0.1:9/whl"
    )
    text = text.replace('version = "==2.9.1"', 'version = "==2.9.1"\nbackend = "cu126"')
    text = text.replace("[platform]\n", '[platform]\narch = "any"\n')
    (envs / "leaky.toml").write_text(text)
    facts = tmp_path / "facts.json"
    data = _facts(host_secret)
    data["arch"] = os.uname().machine
    facts.write_text(json.dumps(data))
    home = tmp_path / "home"
    monkeypatch.setenv("HF_TOKEN", host_secret)
    monkeypatch.setenv("HPCENV_ENVS", str(envs))
    monkeypatch.setenv("HPCENV_HOME", str(home))
    monkeypatch.setenv("HPCENV_LOCKFILES", str(tmp_path / "lockfiles"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    code = main(["build", "leaky", "--facts", str(facts), "--json"])
    out, err = capsys.readouterr()
    assert code == 4, err
    written = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.suffix == ".log" for p in written) and any(p.suffix == ".json" for p in written)
    for secret in (env_secret, url_secret, host_secret):
        assert secret not in out + err
        for p in written:
            assert secret not in p.read_text(errors="replace"), p


#: The modules allowed to print or write files: the exits (and their users of raw bytes).
EXITS = {
    "cli.py",  # the error line
    "utils/fsio.py",  # every file written
    "utils/output.py",  # print_json, print_text
    "ui/report.py",  # the rich consoles
}


def _is_std_stream(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in {("sys", "stdout"), ("sys", "stderr")}
    )


def _bypass(node: ast.AST) -> list[str]:
    """What ``node`` does that only an exit may do: print(), a file write not through
    fsio, a write to sys.stdout/sys.stderr or passing them to a call (``file=``,
    ``json.dump``). Flushing them (before an exec) is not output."""
    if not isinstance(node, ast.Call):
        return []
    f = node.func
    if isinstance(f, ast.Name) and f.id == "print":
        return ["print()"]
    if isinstance(f, ast.Attribute):
        via_fsio = isinstance(f.value, ast.Name) and f.value.id == "fsio"
        if f.attr in {"write_text", "write_bytes"} and not via_fsio:
            return [f"{f.attr}()"]
        if f.attr in {"write", "writelines"} and _is_std_stream(f.value):
            return [f"{ast.unparse(f)}()"]
    passed = [*node.args, *(k.value for k in node.keywords)]
    return [f"{ast.unparse(a)} passed to {ast.unparse(f)}()" for a in passed if _is_std_stream(a)]


def test_only_the_exits_print_or_write() -> None:
    """A new output path cannot bypass masking: outside the exits, nothing in hpcenv
    calls print(), writes sys.stdout/sys.stderr, or writes files itself."""
    root = REPO / "src" / "hpcenv"
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in EXITS or rel.startswith("kit/"):  # the kit runs in target envs
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            found += [f"{rel}:{node.lineno}: {what}" for what in _bypass(node)]
    assert found == []
