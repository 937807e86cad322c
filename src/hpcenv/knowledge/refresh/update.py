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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from hpcenv.knowledge import listing, wheels
from hpcenv.knowledge.listing import WheelFile
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput

DEFAULT_PYPI = "https://pypi.org"
OLDEST = "2.1"  # the oldest torch minor the data covers
PYPI_FILE = "torch_pypi.toml"
INDEX_FILE = "torch_index.toml"
FIX = "hpcenv knowledge update"

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def data_dir() -> Path:
    """The directory of the knowledge files (this package's)."""
    return Path(__file__).resolve().parents[1]


# --- a small, deterministic TOML writer (the shapes these files use) ---------------------


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{_value(str(k))} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def render(header: str, tables: Iterable[tuple[str, dict[str, object]]]) -> str:
    """``header`` (comment lines) then ``[[name]]`` tables; None values are left out."""
    lines = [f"# {line}".rstrip() for line in header.strip().splitlines()]
    for name, row in tables:
        lines += ["", f"[[{name}]]"]
        lines += [f"{k} = {_value(v)}" for k, v in row.items() if v is not None]
    return "\n".join(lines) + "\n"


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` atomically unless ``path`` already holds it; True when written.

    Refuses to write through a symlink (hpcenv never makes these files links).
    """
    if path.is_symlink():
        raise BadInput(f"{path} is a symlink; hpcenv writes its knowledge files only in place")
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    fsio.write_bytes(path, text.encode("utf-8"))  # temp + rename, never through a symlink
    return True


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


@dataclass(frozen=True, kw_only=True)
class Written:
    path: Path
    changed: bool
    rows: int


def update_pypi(
    pypi: str = DEFAULT_PYPI, *, out: Path | None = None, oldest: str = OLDEST, log: Log = _quiet
) -> Written:
    """Regenerate ``torch_pypi.toml`` from PyPI (or a stand-in at ``pypi``)."""
    found = listing.pypi_files(pypi)
    groups = _groups(found.files, oldest=oldest, by_variant=False)
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
) -> list[Written]:
    """``hpcenv knowledge update``: torch from PyPI, vLLM from its sdists, and an index."""
    from hpcenv.knowledge.refresh import vllm as vllm_data

    done = [update_pypi(pypi, out=out, log=log)]
    if vllm:
        done.append(vllm_data.update_vllm(pypi, out=out, log=log))
    if index:
        hint = {"cpu"} | {f"cu{t.version.replace('.', '')}" for t in load_toolkits()}
        done.append(update_index(index, variants=sorted(hint), out=out, log=log))
    return done


def load_toolkits() -> tuple[Any, ...]:
    from hpcenv import knowledge

    return knowledge.load().toolkits


def newer_vllm(known: Iterable[str], pypi: str = DEFAULT_PYPI) -> list[str]:
    """vLLM releases with an sdist on PyPI newer than every release in ``known``."""
    import json

    from hpcenv.knowledge import remote

    url = f"{pypi.rstrip('/')}/pypi/vllm/json"
    try:
        data = json.loads(remote.fetch(url))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{url}: invalid JSON ({exc.msg})") from exc
    except BadInput as exc:
        if "HTTP 404" in str(exc):  # a mirror without vLLM has nothing newer
            return []
        raise
    newest = max((Version(v) for v in known), default=Version("0"))
    out = []
    for version, files in (data.get("releases") or {}).items():
        try:
            v = Version(version)
        except ValueError:
            continue
        has_sdist = any(f.get("packagetype") == "sdist" and not f.get("yanked") for f in files)
        if v > newest and not v.is_prerelease and not v.is_devrelease and has_sdist:
            out.append(version)
    return sorted(out, key=Version)


def check(pypi: str = DEFAULT_PYPI) -> str:
    """One line saying the data is current; ``Stale`` (exit 7) naming what PyPI has beyond it."""
    from hpcenv import knowledge
    from hpcenv.utils.errors import Stale

    know = knowledge.load()
    pypi_torch = [r.version for r in know.releases if any(p.pypi for p in r.platforms.values())]
    torch = missing_releases(pypi_torch, pypi)
    vllm = newer_vllm(know.vllm_versions, pypi)
    if torch or vllm:
        parts = []
        if torch:
            parts.append(f"torch {', '.join(torch)}")
        if vllm:
            parts.append(f"vllm {', '.join(vllm)}")
        raise Stale(
            f"PyPI ({pypi}) has {' and '.join(parts)}, which hpcenv's data lacks; run "
            f"'{FIX}' (or 'nox -s knowledge') and commit the regenerated files"
        )
    newest_vllm = max(know.vllm_versions, key=Version)
    return (
        f"hpcenv's data is current with PyPI ({pypi}): torch {pypi_torch[0]} to "
        f"{pypi_torch[-1]} ({len(pypi_torch)} releases), vllm up to {newest_vllm}"
    )
