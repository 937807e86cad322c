"""``lock PROFILE --project --output`` of a project whose requirements name an index with
credentials: the lock refers to the environment variable that holds them (uv and pip expand
``${VAR}`` in a requirements file), never the secret and never a masked URL
(``https://REDACTED@host``, which no one can install from); with no such variable, exit 2
naming the fix and no file. The index is a real HTTP listener on 127.0.0.1 answering 404
(uv asks it for every name: unsafe-best-match)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.build import lockfiles
from hpcenv.utils.errors import BadInput
from support.buildkit import hpcenv, require_local_build

SECRET = "s3cret-t0ken-value"


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_lock_refers_to_the_variable_holding_the_credentials(tmp_path: Path, index: str) -> None:
    require_local_build()
    project = tmp_path / "p"
    project.mkdir()
    (project / "requirements.txt").write_text(
        f"--extra-index-url http://user:{SECRET}@{index}/simple\nsix\n"
    )
    out = tmp_path / "lock.txt"
    env = {"HPCENV_HOME": str(tmp_path / "home")}
    done = hpcenv("lock", "local", "--project", str(project), "--output", str(out), env=env)
    assert done.returncode == 2 and not out.exists(), done.stderr
    assert "never holds a secret" in done.stderr and "~/.netrc" in done.stderr
    assert SECRET not in done.stderr + done.stdout and "Traceback" not in done.stderr
    done = hpcenv("lock", "local", "--project", str(project), "--output", str(out),
                  env={**env, "MY_INDEX_TOKEN": SECRET})  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert f"--extra-index-url http://user:${{MY_INDEX_TOKEN}}@{index}/simple\n" in text
    assert SECRET not in text and "REDACTED" not in text


def test_references_for_a_whole_url_userinfo_or_password() -> None:
    url = "https://me:pw123456@mirror.example/simple"
    text = f"--index-url {url}\n--extra-index-url https://REDACTED@mirror.example/simple\n"
    whole = lockfiles.credentials_as_references(text, [url], {"IDX": url})
    assert whole == "--index-url ${IDX}\n--extra-index-url ${IDX}\n"
    info = lockfiles.credentials_as_references(text, [url], {"CREDS": "me:pw123456"})
    assert info.count("https://${CREDS}@mirror.example/simple") == 2
    with pytest.raises(BadInput, match=r"mirror\.example with its credentials") as err:
        lockfiles.credentials_as_references(text, [url], {})
    assert "pw123456" not in str(err.value)
