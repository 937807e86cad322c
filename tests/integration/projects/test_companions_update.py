"""``hpcenv knowledge update`` writes torch_companions.toml from the companions' own wheels:
a stand-in PyPI on 127.0.0.1 (tests/support/torch_standin.py) serves torch's wheels and
torchvision/torchaudio's project JSON and wheels, each wheel a real zip whose
``*.dist-info/METADATA`` says which torch it requires (as PyPI's do); only its central
directory and that member are read, by range."""

from __future__ import annotations

import json
import random
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcenv.cli import main
from hpcenv.knowledge import companions as read_model
from hpcenv.knowledge.refresh import companions, update
from hpcenv.utils.errors import BadInput
from support.torch_standin import StandIn, torch_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: (package, version, the Requires-Dist torch line or None, yanked reason or None)
RELEASES = [
    ("torchvision", "0.24.1", "torch (==2.9.1)", None),
    ("torchvision", "0.29.0", "torch (==2.14.0)", None),
    ("torchvision", "0.29.2", "torch (>=2.14.0)", None),
    ("torchvision", "0.15.0", "torch (==2.0.0)", "Contains an incorrect torch dependency"),
    ("torchaudio", "2.9.1", "torch==2.9.1", None),
    ("torchaudio", "2.11.0", None, None),  # its METADATA names no torch, as PyPI's does
]


def _companion_wheel(folder: Path, package: str, version: str, requires: str | None) -> Path:
    path = folder / f"{package}-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    meta = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    meta += "Requires-Dist: numpy\n" + (f"Requires-Dist: {requires}\n" if requires else "")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{package}/_C.so", random.Random(version).randbytes(2 * 1024 * 1024))
        zf.writestr(f"{package}-{version}.dist-info/METADATA", meta + "\nA description.\n")
    return path


def _serve_companions(
    s: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    more: tuple[tuple[str, str, str | None, str | None], ...] = (),
) -> None:
    pages: dict[str, dict[str, list[dict[str, object]]]] = {}
    for package, version, requires, yanked in (*RELEASES, *more):
        w = _companion_wheel(s.files, package, version, requires)
        pages.setdefault(package, {})[version] = [
            {
                "filename": w.name,
                "url": f"../../files/{w.name}",  # relative, as PyPI's are here
                "digests": {"sha256": s.sha256(w)},
                "packagetype": "bdist_wheel",
                "size": w.stat().st_size,
                "upload_time_iso_8601": "2026-10-28T15:21:31Z",
                "yanked": yanked is not None,
                "yanked_reason": yanked,
            }
        ]
    served = s.page

    def page(path: str, accept: str) -> bytes | None:
        for package, releases in pages.items():
            if path == f"/pypi/{package}/json":
                return json.dumps({"info": {"name": package}, "releases": releases}).encode()
        return served(path, accept)

    monkeypatch.setattr(s, "page", page)


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # each test reads afresh
    s = StandIn(tmp_path / "standin")
    for version in ("2.9.1", "2.13.0", "2.14.0", "2.15.0"):
        s.add_pypi(torch_wheel(s.files, version, cuda=None))
    yield s.start()
    s.stop()


def test_update_pairs_each_torch_from_the_companions_metadata(
    standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve_companions(standin, monkeypatch)
    written = companions.update_companions(standin.url, out=tmp_path)
    assert written is not None and written.changed and written.rows == 4
    data = tomllib.loads(written.path.read_text())
    pairs = read_model.build(data)
    got = {
        p.torch: tuple(c.version if (c := p.companion(n)) else None for n in read_model.NAMES)
        for p in pairs.pairs
    }
    assert got == {
        "2.9.1": ("0.24.1", "2.9.1"),
        "2.13.0": (None, None),
        "2.14.0": ("0.29.0", None),  # the exact pin over 0.29.2's range
        "2.15.0": ("0.29.2", None),  # admitted by torch>=2.14.0
    }
    row = pairs.pairing("2.13.0")
    assert row is not None
    assert (row.reason("torchvision") or "").startswith("none published for torch 2.13.0")
    assert "torchaudio 2.11.0, names no torch at all" in (row.reason("torchaudio") or "")
    vision = pairs.pairing("2.9.1").companion("torchvision")  # type: ignore[union-attr]
    wheel = standin.files / "torchvision-0.24.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert vision is not None
    assert vision.source == f"{standin.url}/files/{wheel.name}#sha256={standin.sha256(wheel)}"
    assert data["left_out"] == [
        {
            "package": "torchvision",
            "version": "0.15.0",
            "reason": "every wheel is yanked on PyPI (Contains an incorrect torch dependency)",
        }
    ]
    assert pairs.release("torchaudio", "2.11.0").requires is None  # type: ignore[union-attr]
    # read by range: no wheel fetched whole, and a warm rerun reads none and changes nothing
    assert standin.served.full_gets(".whl") == 0
    before = standin.served.count(".whl")
    again = companions.update_companions(standin.url, out=tmp_path)
    assert again is not None and not again.changed
    assert standin.served.count(".whl") == before


def test_pep_658_metadata_files_on_one_kept_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: where the index serves ``<wheel>.metadata`` (PEP 658/714), each METADATA is
    that one small answer, no wheel byte read; every request of the run shares one kept
    connection (the stand-in speaks HTTP/1.1 here). Before: a range request per part of the
    zip (its tail, the member), a connection each."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    s = StandIn(tmp_path / "standin")
    s.keep_alive = s.metadata = True
    s.add_pypi(torch_wheel(s.files, "2.9.1", cuda=None))
    s.start()
    try:
        _serve_companions(s, monkeypatch)
        written = companions.update_companions(s.url, out=tmp_path)
        assert written is not None
        pairs = read_model.build(tomllib.loads(written.path.read_text()))
        assert pairs.pairing("2.9.1").companion("torchvision").version == "0.24.1"  # type: ignore[union-attr]
        assert s.served.count(".whl") == 0  # no wheel read: their .metadata files
        assert s.served.count(".whl.metadata") == 5  # the releases not yanked
        assert len(set(s.served.clients)) == 1, s.served.clients
    finally:
        s.stop()


def test_an_index_without_metadata_files_is_asked_once(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """PyPI's mirror here serves no ``.metadata``: asked once per host, then the wheels'
    METADATA members are read by range (the tail kept: two requests for a small wheel at
    most)."""
    _serve_companions(standin, monkeypatch)
    companions.update_companions(standin.url, out=tmp_path)
    assert standin.served.count(".whl.metadata") == 1
    assert 0 < standin.served.count(".whl") <= 2 * 5


def test_a_mirror_without_the_companions_leaves_the_file(standin: StandIn, tmp_path: Path) -> None:
    assert companions.update_companions(standin.url, out=tmp_path) is None
    assert not (tmp_path / companions.COMPANIONS_FILE).exists()
    done = update.update_all(pypi=standin.url, out=tmp_path, vllm=False)
    assert [w.path.name for w in done] == ["torch_pypi.toml"]


def test_check_names_a_companion_release_the_data_lacks(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # every release the stand-in serves is in hpcenv's own data: current
    _serve_companions(standin, monkeypatch)
    assert main(["knowledge", "check", "--pypi", standin.url]) == 0
    assert "torchvision/torchaudio paired" in capsys.readouterr().out
    # a torchaudio for torch 2.12 appears: the pairing data is stale, exit 7 in one line
    _serve_companions(standin, monkeypatch, (("torchaudio", "2.12.0", "torch==2.12.0", None),))
    assert main(["knowledge", "check", "--pypi", standin.url]) == 7
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torchaudio 2.12.0" in err and "knowledge update" in err


def test_an_index_whose_sha256_is_a_path_writes_nothing_outside_the_cache(
    standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache of read METADATA is named by the index's sha256: a hostile or broken
    index's ``../../../victim`` made ``<cache>/../../../victim.json`` (outside the cache,
    any ``*.json`` of yours) the file read and written. Now one line, exit 2."""
    _serve_companions(standin, monkeypatch)
    served = standin.page

    def page(path: str, accept: str) -> bytes | None:
        body = served(path, accept)
        if path == "/pypi/torchvision/json" and body is not None:
            data = json.loads(body)
            for files in data["releases"].values():
                for f in files:
                    f["digests"]["sha256"] = "../../../victim"
            return json.dumps(data).encode()
        return body

    monkeypatch.setattr(standin, "page", page)
    assert main(["knowledge", "update", "--pypi", standin.url, "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "victim.json").exists()
    assert not [p for p in tmp_path.rglob("*.json") if not p.is_relative_to(tmp_path / "cache")]


def test_a_metadata_member_inflating_past_the_bound_is_one_line(standin: StandIn) -> None:
    """A METADATA of 100 MB (deflated to ~100 KB: a zip bomb) was inflated whole."""
    wheel = standin.files / "torchvision-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        meta = "Metadata-Version: 2.1\nName: torchvision\nRequires-Dist: torch==2.9.1\n"
        zf.writestr("torchvision-9.9.9.dist-info/METADATA", meta + " " * (100 << 20))
    with pytest.raises(BadInput, match=r"METADATA is \d+ bytes; not a METADATA file"):
        companions.read_requires(f"{standin.url}/files/{wheel.name}", sha256=None)


@pytest.mark.parametrize("page", ["/pypi/torch/json", "/pypi/torchvision/json"])
def test_json_nested_past_the_bound_from_the_index_is_one_line(
    standin: StandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    page: str,
) -> None:
    """A hostile index's ``[[[[...`` was a RecursionError (a traceback) in ``json.loads``;
    every JSON answer is parsed as every JSON input is (``remote.parse_json``)."""
    _serve_companions(standin, monkeypatch)
    served = standin.page

    def deep(path: str, accept: str) -> bytes | None:
        return b"[" * 200_000 if path == page else served(path, accept)

    monkeypatch.setattr(standin, "page", deep)
    assert main(["knowledge", "update", "--pypi", standin.url, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]  # after the 'reading ...' progress lines
    assert last.startswith("hpcenv: error: ") and page in last and "nested deeper" in last
    assert "Traceback" not in err, err
