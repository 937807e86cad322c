"""What runs as you in a shared ``HPCENV_HOME`` is trusted only when nobody else could have
written it (``fsio.untrusted``): a group-writable entry (what an older hpcenv made under
``umask 002``) makes the proof record prove nothing, the bytecode take-over carry nothing,
and the kit copy be made again. One user here, the group's write bit set by hand; the
same cases with two real users are in ``test_two_users.py``."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from hpcenv.build import venv_check
from hpcenv.utils import fsio, paths

TAG = sys.implementation.cache_tag


def _site(venv: Path) -> Path:
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def _plant_pyc(source: Path, evil: str) -> Path:
    """Bytecode of ``evil`` that Python takes for ``source``'s (same mtime and size)."""
    real = source.read_text()
    st = source.stat()
    source.write_text(evil.ljust(len(real) - 1) + "\n")
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    pyc = Path(py_compile.compile(str(source), doraise=True))
    source.write_text(real)
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    return pyc


def test_untrusted_names_the_first_entry_others_may_write(tmp_path: Path) -> None:
    site = _site(tmp_path / "venv")
    (site / "mod.py").write_text("X = 1\n")
    assert fsio.untrusted(tmp_path / "venv") == ""
    (site / "__pycache__").mkdir()
    (site / "__pycache__").chmod(0o775)
    assert fsio.untrusted(tmp_path / "venv") == (
        f"{site / '__pycache__'} is writable by others (drwxrwxr-x)"
    )


def test_a_pyc_planted_in_a_group_writable_pycache_is_not_carried(tmp_path: Path) -> None:
    old, new = _site(tmp_path / "old"), _site(tmp_path / "new")
    (old / "mod.py").write_text("VALUE = 'real'\n")
    os.link(old / "mod.py", new / "mod.py")  # one cache entry, as uv links it
    pyc = _plant_pyc(old / "mod.py", "VALUE = 'evil'")
    pyc.parent.chmod(0o777)  # the group (and others) could have put it there
    run = [sys.executable, "-c", "import mod; print(mod.VALUE)"]
    planted = subprocess.run(run, env={**os.environ, "PYTHONPATH": str(old)},
                             capture_output=True, text=True, check=True)  # fmt: skip
    assert planted.stdout.strip() == "evil"  # Python itself runs it: it is the threat
    assert venv_check.carry_bytecode(tmp_path / "old", tmp_path / "new") == 0
    assert not (new / "__pycache__" / pyc.name).exists()
    done = subprocess.run([*run[:1], "-B", *run[1:]], env={**os.environ, "PYTHONPATH": str(new)},
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "real"


def test_a_proof_record_others_may_write_proves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path))
    record = venv_check.proofs_path()
    assert record is not None
    record.parent.mkdir(mode=0o755, parents=True)
    record.write_text("1 2 3 4 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU\n")
    record.chmod(0o644)
    assert len(venv_check._load_proofs(record)) == 1
    record.chmod(0o664)  # a member of the group could have added that line
    assert venv_check._load_proofs(record) == {}


def test_a_kit_copy_others_could_append_to_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCENV_HOME", str(tmp_path))
    kit = paths.kit_path()
    init = kit / "hpcenv" / "kit" / "__init__.py"
    init.chmod(0o666)  # as a copy made under umask 002 (or 000) left it
    with init.open("a") as fh:
        fh.write("raise SystemExit('planted')\n")
    assert paths.kit_path() == kit
    assert "planted" not in init.read_text()
    assert not init.stat().st_mode & 0o022
    assert kit.name.endswith(f"-{os.getuid()}")  # one copy per user
