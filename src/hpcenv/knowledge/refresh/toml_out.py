"""Writing the generated knowledge files: a small, deterministic TOML writer (the shapes
these files use), written only when the content changed, never through a symlink.
``update`` (torch) and ``vllm`` both write through it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput


@dataclass(frozen=True, kw_only=True)
class Written:
    path: Path
    changed: bool
    rows: int


def data_dir() -> Path:
    """The directory of the knowledge files (this package's)."""
    return Path(__file__).resolve().parents[1]


#: TOML's short escapes; every other control character is written ``\\uXXXX``.
_ESCAPES = {
    '"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
}  # fmt: skip


def _string(v: str) -> str:
    """``v`` as a TOML basic string: every control character escaped (a yanked reason or
    version with a newline from a mirror stays one value); a lone surrogate, which no TOML
    string can hold, is refused naming the value."""
    out = []
    for c in v:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        elif 0xD800 <= ord(c) <= 0xDFFF:
            raise BadInput(f"{v[:80]!r}: holds a lone surrogate, which TOML cannot write")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v)
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
    fsio.parse_toml(text, f"{path} (as it would be written)")  # parsed back before it replaces
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    fsio.write_bytes(path, text.encode("utf-8"))  # temp + rename, never through a symlink
    return True
