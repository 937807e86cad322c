"""What hpcenv reads back from a directory a group shares is yours, and nothing is unbounded
(issue 42: the reading rule, ``fsio.read_yours``, beside round four's writing rule).

The setting is the one README prescribes: a setgid group directory as ``HPCENV_HOME``,
umask 002, and two real users of the group, made for this module (root is needed; they are
removed afterwards). ``a`` is you; ``b`` is the neighbour who plants files, links and FIFOs
in the group-writable ``logs/`` and in a shared ``XDG_CACHE_HOME``. hpcenv runs as ``a``
from a venv both can read (as ``test_two_users.py`` makes it). Each test names its case
of issue 42; cases 07, 08, 09 and 15 (``explain``) are in the explain tests.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hpcenv.slurm.sbatch import OWN_OUT_DIR
from support import REPO, require

SYSTEM_PYTHON = Path("/usr/bin/python3.11")
JOB = "hpcenv-shared-cmd"


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def site() -> Iterator[dict[str, str]]:
    """Two users in one group, a group-shared HPCENV_HOME (setgid, 2775), a venv with
    hpcenv that both can run."""
    require(
        "root",
        os.geteuid() == 0 and bool(shutil.which("useradd")) and bool(shutil.which("setpriv")),
        "creating users needs root, useradd and setpriv",
    )
    require("system-python", SYSTEM_PYTHON.exists(), f"{SYSTEM_PYTHON} is missing")
    uv = shutil.which("uv")
    require("uv", uv is not None, "uv is not on PATH")
    assert uv is not None
    tag = uuid.uuid4().hex[:6]
    group, a, b = f"hpcr{tag}", f"hpcra{tag}", f"hpcrb{tag}"
    root = Path(tempfile.mkdtemp(prefix="hpcenv-shared-reads-"))
    root.chmod(0o755)
    made: list[list[str]] = []
    try:
        assert _run(["groupadd", group]).returncode == 0
        made.append(["groupdel", group])
        for user in (a, b):
            done = _run(["useradd", "-M", "-N", "-g", group, "-d", str(root / user), user])
            assert done.returncode == 0, done.stderr
            made.append(["userdel", user])
            (root / user).mkdir()
            shutil.chown(root / user, user, group)
        shared = root / "shared"
        # a group's home and a group's XDG_CACHE_HOME, its hpcenv/ caches shared as well
        cache = shared / "cache"
        for d in (shared, cache, cache / "hpcenv", cache / "hpcenv" / "wheel-facts"):
            d.mkdir()
            shutil.chown(d, "root", group)
            d.chmod(0o2775)
        venv = root / "venv"
        for argv in (
            [uv, "venv", "-q", "--python", str(SYSTEM_PYTHON), str(venv)],
            [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(REPO)],
        ):
            done = _run(argv, env={**os.environ, "UV_LINK_MODE": "copy"})
            assert done.returncode == 0, done.stderr
        yield {"root": str(root), "shared": str(shared), "a": a, "b": b, "group": group,
               "venv": str(venv)}  # fmt: skip
    finally:
        for argv in reversed(made):
            _run(argv)
        shutil.rmtree(root, ignore_errors=True)


def _as(site: dict[str, str], user: str) -> list[str]:
    return ["setpriv", f"--reuid={site[user]}", f"--regid={site['group']}", "--init-groups"]


def _env(site: dict[str, str], user: str) -> dict[str, str]:
    shared = Path(site["shared"])
    return {
        "HOME": str(Path(site["root"]) / site[user]),
        "PATH": f"{Path(site['root']) / site[user] / 'bin'}:/usr/bin:/bin",
        "HPCENV_HOME": str(shared / "home"),
        "XDG_CACHE_HOME": str(shared / "cache"),
        "LANG": "C.UTF-8",
    }


def _python(
    site: dict[str, str], code: str, *, user: str = "a", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``code`` run as ``user`` by the venv's Python (umask 002, the group's)."""
    python = str(Path(site["venv"]) / "bin" / "python")
    return subprocess.run(
        [*_as(site, user), python, "-c", textwrap.dedent(code)],
        env=_env(site, user), cwd=str(Path(site["root"]) / site[user]), capture_output=True,
        text=True, timeout=timeout, preexec_fn=lambda: os.umask(0o002), check=False,
    )  # fmt: skip


def _hpcenv(
    site: dict[str, str], *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    python = str(Path(site["venv"]) / "bin" / "python")
    return subprocess.run(
        [*_as(site, "a"), python, "-m", "hpcenv", *args],
        env={**_env(site, "a"), **(env or {})}, cwd=str(Path(site["root"]) / site["a"]),
        capture_output=True, text=True, timeout=timeout,
        preexec_fn=lambda: os.umask(0o002), check=False,
    )  # fmt: skip


def _shell(site: dict[str, str], user: str, script: str) -> subprocess.CompletedProcess[str]:
    return _run([*_as(site, user), "/bin/sh", "-c", script], env=_env(site, user))


def _logs(site: dict[str, str]) -> Path:
    """``logs/`` of the shared home, made by ``a``'s hpcenv as any writer of a log makes
    it (a container, group-writable under umask 002)."""
    done = _python(site, "from hpcenv.utils import fsio, paths; fsio.ensure_dir(paths.logs_dir())")
    assert done.returncode == 0, done.stderr
    return Path(site["shared"]) / "home" / "logs"


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


# --- the reading rule itself --------------------------------------------------------------


def test_the_reading_rule_believes_only_your_own_regular_files(site: dict[str, str]) -> None:
    """``fsio.read_yours``: yours (0644) is read; a neighbour's file, a link to yours, one
    of yours the group may write, a FIFO and a file past the bound are each refused in one
    line naming it; nothing there is None."""
    logs = _logs(site)
    b = site["b"]
    mine = f"echo mine > '{logs}/mine' && chmod 644 '{logs}/mine'"
    group = f"echo g > '{logs}/group' && chmod 664 '{logs}/group'"
    big = f"echo 0123456789 > '{logs}/big' && chmod 644 '{logs}/big'"
    assert _shell(site, "a", f"{mine} && {group} && {big}").returncode == 0
    theirs = f"echo theirs > '{logs}/theirs' && ln -s mine '{logs}/link'"
    assert _shell(site, "b", f"{theirs} && mkfifo '{logs}/fifo'").returncode == 0
    code = f"""
        from hpcenv.utils import fsio
        for name in ("mine", "missing", "theirs", "link", "group", "fifo", "big"):
            try:
                print(name, fsio.read_yours(fsio.Path('{logs}') / name, "log", limit=8))
            except fsio.NotYours as exc:
                print(name, "refused:", exc)
        """
    done = _python(site, code, timeout=20)
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said["mine"] == "b'mine\\n'" and said["missing"] == "None"
    assert said["theirs"].startswith(f"refused: {logs}/theirs: log is owned by {b}, not by you")
    assert said["link"].startswith(f"refused: {logs}/link: log is a symlink;")
    assert said["group"].startswith(f"refused: {logs}/group: log is writable by others (-rw-rw")
    assert said["fifo"].startswith(f"refused: {logs}/fifo: log is a FIFO;")
    assert said["big"].startswith(f"refused: {logs}/big: log is larger than 8 bytes;")


def test_shared_containers_carry_the_sticky_bit_so_nobody_swaps_your_script(
    site: dict[str, str],
) -> None:
    """Case 01: ``logs/`` had no sticky bit, so a member renamed their script over yours
    between hpcenv's write and sbatch's read (3 of 3). Now ``logs/`` is sticky (they cannot
    rename over your entries) and sbatch reads the script from its stdin, not the path:
    the stand-in ``sbatch`` below (no cluster can run jobs as these users) records what it
    was given."""
    logs = _logs(site)
    bin_dir = Path(site["root"]) / site["a"] / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = Path(site["root"]) / site["a"] / "sbatch.got"
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\necho "$@" > {record}.argv\ncat > {record}.stdin\necho 4242\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    profile = Path(site["root"]) / site["a"] / "p.toml"  # local's, its logs in the shared home
    text = (REPO / "envs" / "local.toml").read_text()
    profile.write_text(text.replace('log_dir = "logs"', f'log_dir = "{logs}"'))
    profile.chmod(0o644)
    done = _hpcenv(site, "sbatch", str(profile), "--submit", "--job-name", JOB, "--no-gate",
                   "--", "python", "train.py")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(logs.stat().st_mode) == 0o1775  # made 0775 before: sticky now
    kept = logs / f"{JOB}.sbatch"
    assert Path(f"{record}.argv").read_text().split() == ["--parsable"]
    assert Path(f"{record}.stdin").read_text() == kept.read_text()
    b = site["b"]
    swap = f"echo 'touch /tmp/pwned-{b}' > '{logs}/mine-{b}' && mv -f '{logs}/mine-{b}' '{kept}'"
    assert _shell(site, "b", swap).returncode != 0
    assert "pwned" not in kept.read_text()


# --- sbatch --wait: outcome and report files ------------------------------------------------


def _plant_outcome(site: dict[str, str], logs: Path, job_id: str, data: object) -> Path:
    path = logs / f"{JOB}-{job_id}.outcome.json"
    text = json.dumps(data).replace("'", "'\\''")
    assert _shell(site, "b", f"printf '%s' '{text}' > '{path}'").returncode == 0
    return path


def test_a_planted_outcome_is_not_followed_nor_believed(site: dict[str, str]) -> None:
    """Case 02: a member's ``<name>-<jobid>.outcome.json`` saying "requeued as <their
    job>" made ``--wait`` of your FAILED job follow their COMPLETED one and exit 0. Now
    the file is refused (not yours), said in one line, and nothing is followed; and a
    requeue names a job ``--wait`` follows only when SLURM says it is yours (here SLURM
    knows no such job: not followed)."""
    logs = _logs(site)
    path = _plant_outcome(site, logs, "501", {"ended_by": "requeue", "new_job": "502"})
    err = logs / f"{JOB}-501.err"
    assert _shell(site, "b", f"echo 'all went well' > '{err}'").returncode == 0
    code = f"""
        from pathlib import Path
        from hpcenv.commands import sbatch as cmd
        from hpcenv.slurm import survive
        print("requeued_as", survive.requeued_as(Path('{path}')))
        print("data", cmd._ignoring(survive.load_outcome, Path('{path}')))
        print("follow", cmd._follow("502", {{"501"}}))
        print("tail", cmd._tail(Path('{err}')))
        """
    done = _python(site, code, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "requeued_as None", "data None", "follow None", "tail []"
    ]  # fmt: skip
    assert f"{err}: log is owned by {site['b']}" in done.stderr
    said = _one_line(done)
    assert f"{path}: outcome file is owned by {site['b']}, not by you" in said
    assert "job 502 is unknown to SLURM, not to you" in said


def test_outcomes_naming_each_other_are_followed_once(site: dict[str, str]) -> None:
    """Case 03: two outcome files naming each other made ``--wait`` loop for ever; a job
    already followed is never followed again."""
    code = """
        from hpcenv.commands import sbatch as cmd
        print(cmd._follow("601", {"600", "601"}))
        """
    done = _python(site, code, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr
    assert "job 601 was followed already (a cycle); not again" in done.stderr


def test_a_fifo_as_outcome_or_log_never_blocks(site: dict[str, str]) -> None:
    """Case 04: a FIFO as the outcome file or the ``.err`` log hung ``--wait``."""
    logs = _logs(site)
    fifo_out, fifo_err = logs / f"{JOB}-701.outcome.json", logs / f"{JOB}-701.err"
    assert _shell(site, "b", f"mkfifo '{fifo_out}' '{fifo_err}'").returncode == 0
    code = f"""
        from pathlib import Path
        from hpcenv.commands import sbatch as cmd
        from hpcenv.slurm import survive
        print(survive.requeued_as(Path('{fifo_out}')), cmd._tail(Path('{fifo_err}')))
        print(cmd._ignoring(survive.load_outcome, Path('{fifo_out}')))
        """
    done = _python(site, code, timeout=20)
    assert done.returncode == 0 and done.stdout.split() == ["None", "[]", "None"], done.stderr
    assert f"{fifo_out}: outcome file is a FIFO" in _one_line(done)


def test_a_deeply_nested_outcome_is_one_line(site: dict[str, str]) -> None:
    """Case 05: an outcome nested 100,000 deep was a RecursionError traceback."""
    logs = _logs(site)
    path = logs / f"{JOB}-801.outcome.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    shutil.chown(path, site["a"])
    path.chmod(0o644)
    code = f"""
        from pathlib import Path
        from hpcenv.commands import sbatch as cmd
        from hpcenv.slurm import survive
        print(survive.read_outcome(Path('{path}'), "801"), survive.requeued_as(Path('{path}')))
        print(cmd._ignoring(survive.load_outcome, Path('{path}')))
        """
    done = _python(site, code, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["None"] * 3, done.stderr
    err = _one_line(done)
    assert f"{path}: nested deeper than 32 levels" in err and err.count("\n") == 1


def test_a_planted_report_is_refused_and_the_job_keeps_its_own_directory(
    site: dict[str, str],
) -> None:
    """Case 06: a member's ``logs/<jobid>/report.json`` made ``--wait --json`` print
    ``"status": "pass"`` for a failed job. Now it is refused, naming it; and a job whose
    output directory a member made first does not write its report there (the script's
    guard, run here as it runs in the job)."""
    logs = _logs(site)
    out = logs / "901"
    planted = json.dumps({"state": "COMPLETED", "status": "pass"})
    assert _shell(site, "b", f"mkdir -m 777 '{out}' && printf '%s' '{planted}' > "
                  f"'{out}/report.json'").returncode == 0  # fmt: skip
    code = f"""
        from pathlib import Path
        from hpcenv.commands import sbatch as cmd
        from hpcenv.slurm import sbatch
        job = sbatch.Job(name="{JOB}", script="", log_dir=Path('{logs}'),
                         output_dir=Path('{logs}'), nodes=1)
        try:
            print(sbatch.read_report(job, "901"))
        except Exception as exc:
            print("refused")
        print(cmd._ignoring(sbatch.read_report, job, "901"))
        """
    done = _python(site, code, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["refused", "None"], done.stdout
    assert f"{out}/report.json: job report is owned by {site['b']}" in _one_line(done)
    guard = "\n".join([f"out='{out}'", *OWN_OUT_DIR, 'echo written > "$out/report.json"'])
    ran = _run([*_as(site, "a"), "/bin/bash", "-c", guard])
    assert ran.returncode == 2 and "is not this job's own directory" in ran.stderr
    assert json.loads((out / "report.json").read_text()) == {"state": "COMPLETED", "status": "pass"}


def test_a_report_linked_to_your_secret_is_written_fresh_and_private(
    site: dict[str, str],
) -> None:
    """Case 26: ``logs/<jobid>/report.json`` planted as a link to your 0600 credentials:
    ``--wait`` read it through the link, added the explanation and wrote it 0644 where the
    member read it. Now the link is not read; the report is written fresh (a new file, by
    a rename), 0600, and your credentials are untouched."""
    logs = _logs(site)
    secret = Path(site["root"]) / site["a"] / "credentials"
    assert _shell(site, "a", f"umask 077; echo 'password=hunter2hunter2' > '{secret}'"
                  ).returncode == 0  # fmt: skip
    out = logs / "1001"
    assert _shell(site, "b", f"mkdir -m 777 '{out}' && ln -s '{secret}' '{out}/report.json'"
                  ).returncode == 0  # fmt: skip
    log = REPO / "tests" / "data" / "failures" / "cuda_oom.log"
    code = f"""
        from pathlib import Path
        from hpcenv.slurm import failure
        report = Path('{out}/report.json')
        found = failure.explain_job([Path('{log}')], report)
        print(sorted(failure.record(report, found, job_id="1001", state="FAILED")))
        """
    done = _python(site, code, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['explanation', 'job_id', 'state']"
    report = out / "report.json"
    assert not report.is_symlink() and stat.S_IMODE(report.stat().st_mode) == 0o600
    assert "hunter2" not in report.read_text()
    assert secret.read_text() == "password=hunter2hunter2\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert _shell(site, "b", f"cat '{report}'").returncode != 0


# --- the wheel-facts cache ------------------------------------------------------------------


def test_a_wheel_facts_entry_planted_in_a_shared_cache_is_a_miss(site: dict[str, str]) -> None:
    """Case 19: entries in a shared ``XDG_CACHE_HOME`` were read without the owner check
    the data cache has: a planted one turned a CPU torch wheel into ``cu130``. Now an
    entry is believed only when it is yours alone."""
    sha = "ab" * 32
    entry = {"format": 0, "build": "2.13.0+cu130", "cuda": "13.0", "cxx11abi": True,
             "bundles_cudart": True, "ranged": True, "sass": ["7.0", "9.0"], "ptx": [],
             "partial": []}  # fmt: skip
    write = f"""
        import json
        from hpcenv.knowledge import wheels
        from hpcenv.utils import fsio
        entry = {{**{entry!r}, "format": wheels.CACHE_FORMAT}}
        path = wheels.cache_dir() / "{sha}.json"
        fsio.write_bytes(path, json.dumps(entry).encode())
        print(path)
        """
    made = _python(site, write, user="b")
    assert made.returncode == 0, made.stderr
    path = made.stdout.strip()
    assert path.endswith(f"{sha}.json")
    # a miss reads the wheel itself: from a port nobody listens on, so a miss is an error
    read = f"""
        from hpcenv.knowledge import wheels
        from hpcenv.utils.errors import BadInput
        url = "http://127.0.0.1:9/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
        try:
            print(wheels.read_cached(url, sha256="{sha}").build)
        except BadInput:
            print("read the wheel")
        """
    done = _python(site, read)
    assert done.returncode == 0 and done.stdout.strip() == "read the wheel", done.stdout
    own = _python(site, write.replace(sha, "cd" * 32))  # the same facts, yours: believed
    assert own.returncode == 0, own.stderr
    mine = _python(site, read.replace(sha, "cd" * 32))
    assert mine.stdout.strip() == "2.13.0+cu130", mine.stderr


# --- bounded: YAML, FIFOs, numbers, names ---------------------------------------------------


BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [
        f"{n}: &{n} [{','.join(['*' + p] * 9)}]"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    + ["compute_environment: LOCAL_MACHINE", "num_processes: *i"]
)


def test_a_billion_laughs_config_is_one_line(site: dict[str, str]) -> None:
    """Case 10: ten lines of nested aliases as an accelerate config kept ``sbatch``
    running past 60 s. Aliases are refused: one line, exit 2, at once."""
    home = Path(site["root"]) / site["a"]
    config = home / "laughs.yaml"
    config.write_text(BILLION_LAUGHS + "\n")
    config.chmod(0o644)
    done = _hpcenv(site, "sbatch", "local", "--", "accelerate", "launch", "--config_file",
                   str(config), "train.py", timeout=30)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{config} (line 2): accelerate config holds an alias (*a)" in _one_line(done)
    assert done.stderr.count("\n") == 1
    # as a trainer's config (its own format, its to judge): not expanded, the job renders
    trainer = _hpcenv(site, "sbatch", "local", "--", "python", "train.py", str(config),
                      timeout=30)  # fmt: skip
    assert trainer.returncode == 0 and "Traceback" not in trainer.stderr, trainer.stderr


def test_a_fifo_as_the_jobs_script_never_blocks_sbatch(site: dict[str, str]) -> None:
    """Case 11: a FIFO as the job's ``train.py`` hung ``sbatch`` (read for flash_attn
    imports)."""
    home = Path(site["root"]) / site["a"]
    fifo = home / "train.py"
    if not fifo.exists():
        assert _shell(site, "a", f"mkfifo '{fifo}'").returncode == 0
    done = _hpcenv(site, "sbatch", "local", "--", "python", "train.py", timeout=30)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_a_five_thousand_digit_driver_is_one_line(site: dict[str, str]) -> None:
    """Case 14: a 5,000-digit ``driver_version`` in facts was a traceback in resolve,
    plan and explain; numbers in facts are bounded before they are compared."""
    home = Path(site["root"]) / site["a"]
    facts = home / "facts.json"
    node = _hpcenv(site, "facts", "--json")  # this node's facts, with a driver's
    assert node.returncode == 0, node.stderr
    gpu = {"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"}
    nvidia = {"driver_version": "5" * 5000, "gpus": [gpu]}
    facts.write_text(json.dumps({**json.loads(node.stdout), "nvidia": nvidia}))
    facts.chmod(0o644)
    log = home / "job.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n")
    log.chmod(0o644)
    for argv in (
        ["resolve", "--facts", str(facts), "--torch", "2.13", "--offline"],
        ["plan", "local", "--facts", str(facts)],
        ["explain", str(log), "--facts", str(facts)],
    ):
        done = _hpcenv(site, *argv, timeout=60)
        assert done.returncode == 2, (argv, done.stderr)
        err = _one_line(done)
        assert f"{facts}: key 'nvidia.driver_version' is '5555" in err, (argv, err)
        assert err.count("\n") == 1, (argv, err)


def test_a_variable_name_that_is_code_never_reaches_the_script(site: dict[str, str]) -> None:
    """Case 16: a secret-named variable whose *name* held ``}$(touch X)${`` was written
    as ``"${NAME}"`` into the job's script, and bash ran it."""
    home = Path(site["root"]) / site["a"]
    canary = home / "pwned"
    name = f"A_TOKEN}}$(touch {canary})${{"
    done = _hpcenv(site, "sbatch", "local", "--", "python", "t.py", "--key", "s3cr3tvalue42",
                   env={name: "s3cr3tvalue42"})  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert "touch" not in done.stdout and "holds a secret hpcenv cannot refer to" in done.stderr
    assert not canary.exists()


# --- knowledge update from a mirror ---------------------------------------------------------


@pytest.fixture
def mirror() -> Iterator[dict[str, bytes]]:
    """A PyPI JSON API on 127.0.0.1 serving what the test puts in the dict (a hostile
    mirror: ``knowledge update --pypi URL``)."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pages["url"] = f"http://127.0.0.1:{server.server_address[1]}".encode()
    try:
        yield pages
    finally:
        server.shutdown()
        server.server_close()


def test_a_mirror_entry_that_is_not_an_object_is_one_line(mirror: dict[str, bytes]) -> None:
    """Case 18: an index entry that is not an object was an AttributeError traceback."""
    from hpcenv.knowledge.refresh import update
    from hpcenv.utils.errors import BadInput

    url = mirror["url"].decode()
    mirror["/pypi/flash-attn/json"] = json.dumps({"releases": {"2.8.3": ["a-string"]}}).encode()
    with pytest.raises(BadInput) as caught:
        update.missing_flash_attn(["2.8.0"], url)
    assert str(caught.value) == (
        f"{url}/pypi/flash-attn/json: releases['2.8.3'][0] is str, not a file object; "
        "the mirror does not serve PyPI's JSON: check the URL"
    )
    assert caught.value.exit_code == 2


def test_a_yanked_reason_with_a_newline_is_written_as_one_value(tmp_path: Path) -> None:
    """Case 17: the TOML writer escaped only ``\\`` and ``"``: a yanked reason or version
    holding a newline wrote a file that no longer parsed, and the next ``resolve`` died of
    a TOMLDecodeError. Every control character is escaped now, and a file is parsed back
    before it replaces the old one."""
    from hpcenv.knowledge.refresh import toml_out
    from hpcenv.utils import fsio

    hostile = 'bad\n[[wheel]]\nversion = "9.9"\x00\x1b\x7f\t"\\'
    path = tmp_path / "k.toml"
    text = toml_out.render("test", [("wheel", {"version": "2.5.0\n", "yanked": hostile})])
    assert toml_out.write_if_changed(path, text)
    (row,) = fsio.load_toml(path)["wheel"]
    assert row == {"version": "2.5.0\n", "yanked": hostile}
