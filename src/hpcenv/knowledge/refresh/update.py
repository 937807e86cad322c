"""Regenerate the generated knowledge files from the artifacts; check they are current.

``update`` lists torch's Linux wheels on PyPI (and, when given, a PyTorch index or site
mirror), reads one wheel per (release, variant, CPU arch) with ``wheels.read_cached``
and writes

- ``torch_pypi.toml``: per (release, CPU arch), the build PyPI carries and its GPU code;
- ``torch_index.toml``: per (release, CPU arch), the variants the index publishes, and
  per (release, variant, CPU arch) the GPU code of the index's wheel (only with an index).

Every row's ``source`` is the URL it was read from with the sha256 of the wheel (the
index's published hash) or of the listing page. The output is a pure function of what
was read (sorted, no timestamps), so unchanged inputs give byte-identical files and a
file whose content did not change is not rewritten. Hand-kept leads (``torch_leads.toml``)
are never touched here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.version import Version

from hpcenv.knowledge import listing, wheels
from hpcenv.knowledge.listing import WheelFile
from hpcenv.knowledge.refresh.toml_out import Written, data_dir, render, write_if_changed
from hpcenv.utils.errors import BadInput

DEFAULT_PYPI = "https://pypi.org"
OLDEST = "1.8"  # the oldest torch minor the data covers (the first with CUDA 11 wheels)
PYPI_FILE = "torch_pypi.toml"
INDEX_FILE = "torch_index.toml"
FIX = "hpcenv knowledge update"

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


#: Told each phase of reads before it starts: what is read, how many (None: not known).
Expect = Callable[[str, "int | None"], None]


def _no_expect(_what: str, _count: int | None) -> None:
    pass


# --- rows ---------------------------------------------------------------------------------


def python_of(tag: str) -> str:
    """``cp311`` -> ``3.11``, ``cp313t`` -> ``3.13t``."""
    digits = tag.removeprefix("cp")
    free = "t" if digits.endswith("t") else ""
    digits = digits.removesuffix("t")
    return f"{digits[0]}.{digits[1:]}{free}" if digits.isdigit() else tag


def _sorted_caps(counts: dict[str, Any]) -> dict[str, Any]:
    def key(cap: str) -> tuple[int, int, str]:
        num = cap.rstrip("af")
        major, _, minor = num.partition(".")
        return int(major), int(minor or 0), cap[len(num) :]

    return {k: counts[k] for k in sorted(counts, key=key)}


def _tag_order(tag: str) -> tuple[Version, str]:
    python = python_of(tag.split("-", 1)[0])
    try:
        return Version(python.rstrip("t")), tag
    except ValueError:
        return Version("0"), tag


def source_of(w: WheelFile) -> str:
    return f"{w.url}#sha256={w.sha256}" if w.sha256 else w.url


def wheel_row(group: list[WheelFile], facts: wheels.WheelFacts) -> dict[str, object]:
    first = group[0]
    pythons = sorted({python_of(w.python) for w in group}, key=lambda p: Version(p.rstrip("t")))
    return {
        "version": first.version,
        "arch": first.arch,
        "variant": facts.variant,
        "build": facts.build,
        "cuda": facts.cuda,
        "cxx11abi": facts.cxx11abi,
        "bundles_cudart": facts.bundles_cudart,
        "pythons": pythons,
        "requires_python": first.requires_python,
        "tags": sorted({t for w in group for t in w.tags}, key=_tag_order),
        "sass": list(facts.sass),
        "ptx": list(facts.ptx),
        "partial": list(facts.partial),
        "sass_entries": _sorted_caps(facts.sass_entries),
        "ptx_entries": _sorted_caps(facts.ptx_entries),
        "ptx_isa": _sorted_caps(facts.ptx_isa),
        "source": source_of(first),
    }


def _groups(
    files: Iterable[WheelFile], *, oldest: str, by_variant: bool
) -> dict[tuple[str, str, str], list[WheelFile]]:
    """(version, arch, variant or '') -> its wheels, first one the wheel to read."""
    floor = Version(oldest)
    out: dict[tuple[str, str, str], list[WheelFile]] = defaultdict(list)
    for w in files:
        if w.yanked or Version(w.version) < floor:
            continue
        out[(w.version, w.arch, (w.variant or "") if by_variant else "")].append(w)
    for group in out.values():
        group.sort(key=lambda w: w.filename)
    return out


def _ordered(keys: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    arch_order = {a: i for i, a in enumerate(listing.ARCHES)}
    return sorted(keys, key=lambda k: (Version(k[0]), arch_order[k[1]], k[2]))


PYPI_HEADER = """\
torch on PyPI: per (release, CPU arch), the build `pip install torch` gets there and the GPU
code in its torch/lib/libtorch_cuda.so, read from the wheels through HTTP range requests:
`sass`/`ptx` the compute capabilities the library was built for (machine code; PTX for the
driver's JIT), `partial` those with only a few special kernels (not coverage; the rule is
hpcenv.kit.coverage's), `*_entries` the fatbin entry counts behind that, `ptx_isa` the PTX
ISA version per PTX arch.
GENERATED by `hpcenv knowledge update`; do not edit (rerun the command). Read from:
{page}
`source` is the wheel read (URL#sha256 as PyPI publishes it); `pythons` lists every
CPython tag PyPI has for that release and arch.
"""

INDEX_HEADER = """\
torch on a PyTorch index ({base}): per (release, CPU arch), the variants it publishes
(`platform`, source: the listing page and its sha256), and per (release, variant, CPU arch)
the build and GPU code of one of its wheels (`wheel`, source: URL#sha256).
GENERATED by `hpcenv knowledge update --index URL`; do not edit (rerun the command).
"""


def update_pypi(
    pypi: str = DEFAULT_PYPI,
    *,
    out: Path | None = None,
    oldest: str = OLDEST,
    log: Log = _quiet,
    expect: Expect = _no_expect,
) -> Written:
    """Regenerate ``torch_pypi.toml`` from PyPI (or a stand-in at ``pypi``)."""
    found = listing.pypi_files(pypi)
    groups = _groups(found.files, oldest=oldest, by_variant=False)
    expect("torch wheels on PyPI", len(groups))
    rows = []
    for key in _ordered(groups):
        group = groups[key]
        log(f"reading torch {key[0]} {key[1]}: {group[0].filename}")
        facts = wheels.read_cached(group[0].url, sha256=group[0].sha256)
        rows.append(("wheel", wheel_row(group, facts)))
    if not rows:
        raise BadInput(f"{found.pages[0]} lists no Linux torch wheel of {oldest} or newer")
    path = (out or data_dir()) / PYPI_FILE
    text = render(PYPI_HEADER.format(page=found.pages[0].split("#")[0]), rows)
    return Written(path=path, changed=write_if_changed(path, text), rows=len(rows))


def update_index(
    base: str,
    *,
    variants: Iterable[str] = (),
    out: Path | None = None,
    oldest: str = OLDEST,
    log: Log = _quiet,
    expect: Expect = _no_expect,
) -> Written:
    """Regenerate ``torch_index.toml`` from the PyTorch index or mirror at ``base``."""
    found = listing.index_files(base, variants)
    groups = _groups(found.files, oldest=oldest, by_variant=True)
    platforms: dict[tuple[str, str], set[str]] = defaultdict(set)
    for version, arch, variant in groups:
        platforms[(version, arch)].add(variant or "cpu")
    pages = "; ".join(found.pages)
    rows: list[tuple[str, dict[str, object]]] = []
    for version, arch, _ in _ordered((v, a, "") for v, a in platforms):
        rows.append(
            (
                "platform",
                {
                    "version": version,
                    "arch": arch,
                    "variants": sorted(platforms[(version, arch)], key=_variant_order),
                    "source": pages,
                },
            )
        )
    expect("torch wheels on the index", len(groups))
    for key in _ordered(groups):
        group = groups[key]
        log(f"reading torch {key[0]} {key[2]} {key[1]}: {group[0].filename}")
        facts = wheels.read_cached(group[0].url, sha256=group[0].sha256)
        row = wheel_row(group, facts)
        label = key[2] or "cpu"
        if facts.variant != label:
            raise BadInput(
                f"{group[0].url}: labelled {label} but its torch/version.py says CUDA "
                f"{facts.cuda} ({facts.variant}); the index is inconsistent"
            )
        rows.append(("wheel", row))
    if not rows:
        raise BadInput(f"{base} lists no Linux torch wheel of {oldest} or newer")
    path = (out or data_dir()) / INDEX_FILE
    text = render(INDEX_HEADER.format(base=base.rstrip("/")), rows)
    return Written(path=path, changed=write_if_changed(path, text), rows=len(rows))


def _variant_order(v: str) -> tuple[int, int]:
    return (0, 0) if v == "cpu" else (1, int(v[2:]) if v[2:].isdigit() else 0)


# --- check ---------------------------------------------------------------------------------


def missing_releases(
    known: Iterable[str], pypi: str = DEFAULT_PYPI, oldest: str = OLDEST
) -> list[str]:
    """Releases (>= ``oldest``) with a Linux wheel on PyPI that ``known`` lacks, ascending."""
    found = listing.pypi_files(pypi)
    have = set(known)
    floor = Version(oldest)
    return [v for v in listing.versions(found.files) if Version(v) >= floor and v not in have]


__all__ = ["DEFAULT_PYPI", "FIX", "Written", "missing_releases", "render", "update_index",
           "update_pypi", "write_if_changed"]  # fmt: skip


# --- everything, and the freshness check ---------------------------------------------------


def update_all(
    *,
    pypi: str = DEFAULT_PYPI,
    index: str | None = None,
    out: Path | None = None,
    vllm: bool = True,
    log: Log = _quiet,
    expect: Expect = _no_expect,
) -> list[Written]:
    """``hpcenv knowledge update``: torch from PyPI, torchvision/torchaudio's pairs from their
    wheels, vLLM from its sdists, and an index. ``expect(what, count)`` is told each phase
    before its reads (each read is a ``log`` line); ``count`` None where it is not known
    up front."""
    from hpcenv.knowledge.refresh import companions
    from hpcenv.knowledge.refresh import vllm as vllm_data

    done = [update_pypi(pypi, out=out, log=log, expect=expect)]
    expect("torchvision/torchaudio wheels", None)
    paired = companions.update_companions(pypi, out=out, log=log)
    if paired is not None:
        done.append(paired)
    if vllm:
        expect("vLLM sdists", None)
        done.append(vllm_data.update_vllm(pypi, out=out, log=log))
    if index:
        hint = {"cpu"} | {f"cu{t.version.replace('.', '')}" for t in load_toolkits()}
        done.append(update_index(index, variants=sorted(hint), out=out, log=log, expect=expect))
    return done


def load_toolkits() -> tuple[Any, ...]:
    from hpcenv import knowledge

    return knowledge.load().toolkits


def _pypi_releases(project: str, pypi: str) -> dict[str, list[dict[str, Any]]]:
    """``releases`` of ``<pypi>/pypi/<project>/json``; {} where a mirror lacks the project."""

    from hpcenv.knowledge import remote

    url = f"{pypi.rstrip('/')}/pypi/{project}/json"
    try:
        data = remote.parse_json(url, remote.fetch(url))
    except BadInput as exc:
        if "HTTP 404" in str(exc):  # a mirror without the project has nothing newer
            return {}
        raise
    from hpcenv.knowledge.listing import file_entries

    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        return {}
    return {
        str(v): file_entries(url, files, f"releases[{str(v)[:40]!r}]")
        for v, files in releases.items()
    }


def _final(version: str) -> Version | None:
    try:
        v = Version(version)
    except ValueError:
        return None
    return None if v.is_prerelease or v.is_devrelease else v


def newer_vllm(known: Iterable[str], pypi: str = DEFAULT_PYPI) -> list[str]:
    """vLLM releases with an sdist on PyPI newer than every release in ``known``."""
    newest = max((Version(v) for v in known), default=Version("0"))
    out = []
    for version, files in _pypi_releases("vllm", pypi).items():
        v = _final(version)
        has_sdist = any(f.get("packagetype") == "sdist" and not f.get("yanked") for f in files)
        if v is not None and v > newest and has_sdist:
            out.append(version)
    return sorted(out, key=Version)


def missing_flash_attn(known: Iterable[str], pypi: str = DEFAULT_PYPI) -> list[str]:
    """flash-attn releases on PyPI (final, a file not yanked) from the oldest in ``known``
    on that ``known`` lacks: packages.toml's wheel list must have a row for each."""
    have = {Version(v) for v in known}
    oldest = min(have, default=Version("0"))
    out = []
    for version, files in _pypi_releases("flash-attn", pypi).items():
        v = _final(version)
        if v is None or v < oldest or v in have:
            continue
        if any(not f.get("yanked") for f in files):
            out.append(version)
    return sorted(out, key=Version)


def missing_companions(known: Iterable[tuple[str, str]], pypi: str = DEFAULT_PYPI) -> list[str]:
    """torchvision/torchaudio releases on PyPI with a wheel not yanked that ``known`` ((name,
    version) read into torch_companions.toml) lacks: ``name version``, ascending."""
    from hpcenv.knowledge.companions import NAMES
    from hpcenv.knowledge.refresh.companions import pick_wheel

    have = set(known)
    out = []
    for name in NAMES:
        found = [
            v
            for v, files in _pypi_releases(name, pypi).items()
            if _final(v) is not None
            and (name, v) not in have
            and not isinstance(pick_wheel(files or []), str)
        ]
        out += [f"{name} {v}" for v in sorted(found, key=Version)]
    return out


def check(pypi: str = DEFAULT_PYPI) -> str:
    """One line saying the data is current; ``Stale`` (exit 7) naming what PyPI has beyond it."""
    from hpcenv import knowledge
    from hpcenv.utils.errors import Stale

    know = knowledge.load()
    pypi_torch = [r.version for r in know.releases if any(p.pypi for p in r.platforms.values())]
    torch = missing_releases(pypi_torch, pypi)
    vllm = newer_vllm(know.vllm_versions, pypi)
    flash = [w.version for w in know.flash_attn.wheels]
    fa = missing_flash_attn(flash, pypi)
    pairs = missing_companions(((r.name, r.version) for r in know.companions.released), pypi)
    if torch or vllm or fa or pairs:
        parts = []
        if torch:
            parts.append(f"torch {', '.join(torch)}")
        if pairs:
            parts.append(", ".join(pairs))
        if vllm:
            parts.append(f"vllm {', '.join(vllm)}")
        if fa:
            parts.append(f"flash-attn {', '.join(fa)}")
        fixes = []
        if torch or vllm or pairs:
            fixes.append(f"run '{FIX}' (or 'nox -s knowledge') and commit the regenerated files")
        if fa:
            fixes.append(
                "add a [[flash_attn.wheels]] row for each flash-attn release to "
                "src/hpcenv/knowledge/packages.toml (hand-kept: the build_wheels matrix of "
                ".github/workflows/publish.yml at its release tag)"
            )
        raise Stale(
            f"PyPI ({pypi}) has {' and '.join(parts)}, which hpcenv's data lacks; "
            f"{'; '.join(fixes)}"
        )
    newest_vllm = max(know.vllm_versions, key=Version)
    return (
        f"hpcenv's data is current with PyPI ({pypi}): torch {pypi_torch[0]} to "
        f"{pypi_torch[-1]} ({len(pypi_torch)} releases), torchvision/torchaudio paired "
        f"({len(know.companions.released)} releases read), vllm up to {newest_vllm}, "
        f"flash-attn {flash[0]} to {flash[-1]} ({len(flash)} releases)"
    )
