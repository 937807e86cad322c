"""Secrets never reach logs or reports: values of variables named like TOKEN, SECRET,
PASSWORD, KEY are masked in environment dumps and scrubbed from captured text."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.utils import redact

SECRETS = {
    "HF_TOKEN": "hf_abcdefSECRET123",
    "WANDB_API_KEY": "0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "DB_PASSWORD": "hunter2hunter2",
    "GITHUB_AUTH": "ghp_zzzzzzzz",
}
PLAIN = {"NCCL_DEBUG": "INFO", "FI_PROVIDER": "cxi", "PATH": "/usr/bin"}


def test_env_masks_secret_names_only() -> None:
    masked = redact.env({**SECRETS, **PLAIN})
    assert all(masked[k] == redact.MASK for k in SECRETS)
    assert all(masked[k] == v for k, v in PLAIN.items())


def test_text_scrubs_secret_values() -> None:
    log = "curl -H 'Authorization: Bearer hf_abcdefSECRET123' ... key=0123456789abcdef ok"
    clean = redact.text(log, {**SECRETS, **PLAIN})
    assert "hf_abcdefSECRET123" not in clean and "0123456789abcdef" not in clean
    assert clean.count(redact.MASK) == 2 and "ok" in clean


def test_a_requirement_pin_is_no_assignment() -> None:
    """``tiktoken==0.12.0`` (a package whose name ends in TOKEN) in a plan's install list
    stays as it is; ``GH_TOKEN=abc`` is still masked."""
    clean = redact.text("tiktoken==0.12.0 GH_TOKEN=abcdef0123456789", {})
    assert clean == f"tiktoken==0.12.0 GH_TOKEN={redact.MASK}"


def test_profile_env_is_masked_in_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[env.always]\nHF_TOKEN = "hf_abcdefSECRET123"\nNCCL_DEBUG = "WARN"\n')
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "hf_abcdefSECRET123" not in out and redact.MASK in out and "WARN" in out


def test_show_masks_index_url_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[torch]\nindex_url = "https://alice:s3cr3tpw@mirror.example/whl"\n')
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "s3cr3tpw" not in out and "REDACTED@mirror.example" in out


def test_show_json_masks_secrets_and_url_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[torch]\nindex_url = "https://u:tok123@mirror.example/whl"\n'
        '[env.always]\nHF_TOKEN = "hf_secretvalue"\n'
        'PIP_INDEX_URL = "https://bob:pw999@pypi.example/simple"\n'
    )
    assert main(["show", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    for secret in ("tok123", "hf_secretvalue", "pw999"):
        assert secret not in out
    assert main(["show", str(path)]) == 0
    table = capsys.readouterr().out
    assert "pw999" not in table and "hf_secretvalue" not in table


def test_url_credentials_in_any_variable_are_secret() -> None:
    assert redact.holds_secret("PIP_INDEX_URL", "https://bob:pw999@pypi.example/simple")
    assert not redact.holds_secret("PIP_INDEX_URL", "https://pypi.example/simple")
    assert redact.env({"UV_INDEX_URL": "https://a:b@x/simple"}) == {
        "UV_INDEX_URL": f"https://{redact.MASK}@x/simple"
    }
