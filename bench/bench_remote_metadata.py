"""Reading one wheel's METADATA from PyPI: requests, connections, bytes and seconds.

Three ways, interleaved per round and per wheel (the machine and the network are shared and
noisy): ``baseline``, main's ``knowledge/remote.py`` (git archive of ``--baseline``, a new
connection per range request through urllib); ``ranges``, this tree's range reader on one
kept connection per host; ``pep658``, this tree's ``fetch_metadata`` (the index's
``<wheel>.metadata`` file). Each way opens its connection afresh for each wheel (kept
connections closed first), as a fresh ``hpcenv knowledge update`` would. The wheels are
torchvision's Linux x86_64 wheels of ``--releases`` (the smallest of each release, as
``knowledge/refresh/companions.pick_wheel`` picks), each METADATA checked to be the same
text three ways. Prints min/median/max per way as JSON.

    .venv/bin/python bench/bench_remote_metadata.py [--rounds 5] [--baseline main]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import statistics
import sys
import tempfile
import time
import urllib.parse
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from _timing import export_rev

from hpcenv.knowledge import remote
from hpcenv.knowledge.refresh.companions import pick_wheel

RELEASES = ("0.24.1", "0.23.0", "0.22.1")
LIMIT = 4 * 1024 * 1024


def _module(src: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "baseline_remote", src / "hpcenv" / "knowledge" / "remote.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _by_ranges(module: Any, url: str) -> tuple[bytes, int, int]:
    raw = module.RangeFile(url)
    with io.BufferedReader(raw, buffer_size=64 * 1024) as buffered, zipfile.ZipFile(buffered) as zf:
        (name,) = [
            n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        text = zf.read(name)
    return text, raw.requests, raw.bytes_read


def baseline(module: Any, url: str) -> dict[str, Any]:
    text, requests, read = _by_ranges(module, url)
    return {"text": text, "requests": requests, "connections": requests, "bytes": read}


def ranges(url: str) -> dict[str, Any]:
    remote.close_connections()
    before = _copy(remote.counts())
    text, requests, _ = _by_ranges(remote, url)
    return {"text": text, **_since(before), "requests": requests}


def pep658(url: str) -> dict[str, Any]:
    remote.close_connections()
    before = _copy(remote.counts())
    text = remote.fetch_metadata(url, limit=LIMIT)
    if text is None:  # this index serves none: what the fallback costs is what ranges cost
        return {"text": None, **_since(before)}
    return {"text": text, **_since(before)}


def _copy(c: remote.Counts) -> remote.Counts:
    return remote.Counts(requests=c.requests, connections=c.connections, bytes=c.bytes)


def _since(before: remote.Counts) -> dict[str, int]:
    now = remote.counts()
    return {
        "requests": now.requests - before.requests,
        "connections": now.connections - before.connections,
        "bytes": now.bytes - before.bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--package", default="torchvision")
    parser.add_argument("--releases", nargs="+", default=list(RELEASES))
    args = parser.parse_args()
    page = f"https://pypi.org/pypi/{args.package}/json"
    data = remote.parse_json(page, remote.fetch(page))
    urls = []
    for release in args.releases:
        chosen = pick_wheel(data["releases"][release])
        assert not isinstance(chosen, str), chosen
        urls.append(urllib.parse.urljoin(page, str(chosen["url"])))
    with tempfile.TemporaryDirectory() as tmp:
        old = _module(export_rev(args.baseline, Path(tmp)))
        ways = {"baseline": lambda u: baseline(old, u), "ranges": ranges, "pep658": pep658}
        served = remote.fetch_metadata(urls[0], limit=LIMIT) is not None
        if not served:  # this index has no .metadata files: nothing to time
            del ways["pep658"]
        seconds: dict[str, list[float]] = {w: [] for w in ways}
        cost: dict[str, dict[str, int]] = {}
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for url in urls:
                texts = set()
                for way in order:
                    start = time.perf_counter()
                    got = ways[way](url)
                    seconds[way].append(time.perf_counter() - start)
                    if (text := got.pop("text")) is not None:
                        texts.add(text)
                    cost[way] = got  # the same every round: one wheel's
                if len(texts) != 1:
                    sys.exit(f"{url}: the METADATA differs between the ways")
    out = {
        "wheels": urls,
        "pep658_served": served,
        "rounds": args.rounds,
        "per_wheel": {
            way: {
                **cost[way],
                "median_s": round(statistics.median(s), 4),
                "min_s": round(min(s), 4),
                "max_s": round(max(s), 4),
            }
            for way, s in seconds.items()
        },
    }
    base = statistics.median(seconds["baseline"])
    out["speedup_vs_baseline"] = {
        way: round(base / statistics.median(s), 2) for way, s in seconds.items()
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
