"""Read a project's hand-written dependency files into one install request.

What research code ships instead of a lock: ``requirements*.txt`` as people write them
(``-r``/``-c`` includes relative to the file, ``-e .``, ``--index-url``,
``--extra-index-url``, ``-f/--find-links``, URL and VCS requirements, markers, hashes,
unpinned and ranged lines), a ``pyproject.toml`` without a lock (PEP 621 dependencies,
optional dependencies, PEP 735 dependency groups), ``setup.py``/``setup.cfg`` (whose
metadata only the build backend knows: uv asks it, as ``uv pip compile setup.py`` does)
and conda's ``environment.yml`` (``dependencies`` mapped to PyPI names with
``knowledge/conda_pypi.toml``, its ``pip:`` section read as requirements, ``python=X.Y`` as
the Python). Each becomes a :class:`Request`: the requirement lines, the indexes the files
name, and what was dropped or noted, said once. ``project_resolve`` then resolves it for a
node with uv. A file is read as what it is, by name and content: a ``setup.py`` is never a
requirements file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from hpcenv.project import containment, read_once, static_meta, uv_lock
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput
from hpcenv.utils.names import canonicalize_name

#: File names read as a project of each kind (a directory is searched in this order).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
CONDA_FILES = ("environment.yml", "environment.yaml")
_CONDA_KNOWLEDGE = Path(__file__).parents[1] / "knowledge" / "conda_pypi.toml"
#: pip options that take a value and change nothing hpcenv judges (noted, then ignored).
_IGNORED_WITH_VALUE = ("--no-binary", "--only-binary", "--trusted-host", "--prefer-binary")
_VCS = re.compile(r"^(git|hg|svn|bzr)\+")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a URL, not a name such as httpx
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, kw_only=True)
class Request:
    """One project's install request, before resolution.

    ``requirements`` are PEP 508 lines (``name @ url`` for URL and VCS requirements);
    ``project_file`` is set instead for a ``setup.py``/``setup.cfg``/``pyproject.toml``
    whose metadata uv reads through the build backend.
    """

    source: str
    kind: str  # "requirements" | "pyproject" | "setup.py" | "environment.yml"
    requirements: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    local: tuple[str, ...] = ()  # absolute paths of ``-e .``/``./pkg`` projects that exist
    project_file: str | None = None
    extras: tuple[str, ...] = ()
    python: str | None = None  # conda's ``python=X.Y``
    python_pin: str | None = None  # a pyproject's ``.python-version`` beside it (uv's pin)
    variant: str | None = None  # the torch build a file asks for (conda ``cudatoolkit=11.3``)
    variant_why: str | None = None
    requires_python: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # every file read (includes too): the cache key's content
    compiled: bool = False  # a file from ``uv pip compile``/``pip-compile``: already resolved
    root: str = ""  # the project's directory: nothing outside it is read
    #: the requirements of the ``local`` projects, read as data (``static_meta``)
    local_requirements: tuple[str, ...] = ()
    #: one line per project file whose requirements only its code knows (``static_meta``):
    #: resolving it runs that code (uv, in a copy), which audit and plan do only when asked
    dynamic: tuple[str, ...] = ()
    #: conda's CUDA constraints (``cuda-version=13.1`` -> ``("cuda-version", "13.1")``):
    #: the CUDA release the environment is built for, judged by ``decide/cuda_packages``
    cuda_constraints: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        """sha256 of everything that decides the resolution (content of every file read)."""
        h = hashlib.sha256()
        for f in self.files:
            h.update(f.encode() + b"\0")
            try:
                h.update(read_once.content(Path(f), "a project file"))
            except (OSError, BadInput):
                h.update(b"<unreadable>")
        for part in (
            *self.requirements,
            "|c",
            *self.constraints,
            "|i",
            self.index_url or "",
            *self.extra_index_urls,
            "|f",
            *self.find_links,
            "|l",
            *self.local,
            *self.local_requirements,
            "|p",
            self.project_file or "",
            *self.extras,
            self.python or "",
            self.variant or "",
        ):
            h.update(part.encode() + b"\0")
        return h.hexdigest()

    def names(self) -> tuple[str, ...]:
        """Canonical names of the requirement lines (URL requirements included)."""
        out = []
        for line in self.requirements:
            try:
                out.append(canonicalize_name(Requirement(line).name))
            except InvalidRequirement:
                continue
        return tuple(dict.fromkeys(out))


def exact_release(spec: SpecifierSet) -> str | None:
    """The one release an exact pin names: ``==2.1.2``, ``==2.1.2+cu121`` -> ``2.1.2``;
    conda's fuzzy ``=1.11.0`` (read as ``==1.11.0.*``: 1.11.0 or 1.11.0.x, and torch never
    published a 1.11.0.x) -> ``1.11.0``; ``==1.11.*`` or a range -> None."""
    specs = list(spec)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    text = specs[0].version
    star = text.endswith(".*")
    text = text.removesuffix(".*")
    try:
        version = Version(text)
    except InvalidVersion:
        return None
    if star and len(version.release) < 3:
        return None
    return version.public


# --- which kind ------------------------------------------------------------------------


def kind_of(path: Path) -> str | None:
    """The kind of a file by its name, then its content (None: not a project file)."""
    name = path.name
    if name in ("pyproject.toml",):
        return "pyproject"
    if name in ("setup.py", "setup.cfg"):
        return "setup.py"
    if name in CONDA_FILES or (name.endswith((".yml", ".yaml")) and _looks_conda(path)):
        return "environment.yml"
    if name.endswith((".txt", ".in")) or name.startswith("requirements"):
        return "requirements"
    return None


def _looks_conda(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:4096]
    except OSError:
        return False
    return re.search(r"^dependencies\s*:", head, re.MULTILINE) is not None


_EXACT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;\\]+)")
_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")


def is_compiled(text: str) -> bool:
    """A requirements file written by a resolver or ``pip freeze``, read as written: a
    resolver's header or annotations, or every line an exact pin and the torch build
    visible in the pins themselves (a local label, or the CUDA runtime wheel a resolver
    adds). A hand-written ``torch==2.6.0`` alone is not: what pip installs for it depends
    on the node, so it is resolved; nor are pins without torch (a dependency may bring it)."""
    head = text[:2048]
    if "autogenerated by" in head or "uv export" in head or "# via " in text:
        return True
    lines = [ln.split("#", 1)[0].strip() for ln in text.replace("\\\n", " ").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("--hash")]
    if not lines or any(ln.startswith("-") for ln in lines):
        return False
    pins = [_EXACT.match(ln) for ln in lines]
    if not all(pins):
        return False
    names: dict[str, str] = {str(canonicalize_name(m.group(1))): m.group(2) for m in pins if m}
    torch = names.get("torch")  # none: a dependency may still bring it (diffusers[torch])
    return torch is not None and ("+" in torch or any(_RUNTIME.match(n) for n in names))


def read(path: Path, *, extras: tuple[str, ...] = (), root: Path | None = None) -> Request:
    """The request of one file (kind by :func:`kind_of`), read inside ``root`` (default: the
    project around it, ``containment.root_of``): a symlink leaving it is refused. Read once
    per file (``read_once``)."""
    root = root or containment.root_of(path)
    pin = read_once.identity(path.parent / ".python-version")
    return read_once.kept(
        "request",
        path,
        (extras, str(root), pin),
        lambda: _read(path, extras=extras, root=root),
        also=lambda request: request.files,
    )


def _read(path: Path, *, extras: tuple[str, ...], root: Path) -> Request:
    if path.is_symlink():
        containment.require_inside(path, root, "the dependency file (a symlink)")
    kind = kind_of(path)
    if kind == "pyproject":
        return read_pyproject(path, extras=extras, root=root)
    if kind == "setup.py":
        return read_setup(path, extras=extras, root=root)
    if kind == "environment.yml":
        return read_conda(path, root=root)
    return read_requirements(path, root=root)


def find_in(directory: Path) -> Path | None:
    """The dependency file of a project directory without a ``uv.lock``, by one
    precedence: ``pyproject.toml`` (with ``[project]``); a conda environment file that
    installs the project itself (``- pip: [-e .]``: it names the project's own
    dependencies and more, so it wins over a bare ``setup.py``); ``setup.py``,
    ``setup.cfg``; ``requirements.txt``; another conda environment file."""
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file() and _has_project_table(pyproject):
        return pyproject
    for name in CONDA_FILES:
        if _installs_itself(directory / name, directory):
            return directory / name
    for name in PROJECT_FILES[1:]:
        if (directory / name).is_file():
            return directory / name
    for name in ("requirements.txt", *CONDA_FILES):
        if (directory / name).is_file():
            return directory / name
    return None


def _metadata_file(directory: Path) -> Path | None:
    """A local project's own package metadata, by :func:`find_in`'s order."""
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file() and _has_project_table(pyproject):
        return pyproject
    return next((directory / n for n in PROJECT_FILES[1:] if (directory / n).is_file()), None)


def passed_over(directory: Path, chosen: Path) -> tuple[str, ...]:
    """The other dependency files of ``directory`` that were not read: a ``uv.lock`` wins
    over all (its ``pyproject.toml`` is read with it), else :func:`find_in`'s choice."""
    own = ("uv.lock", "pyproject.toml") if chosen.name == "uv.lock" else (chosen.name,)
    names = ("uv.lock", *PROJECT_FILES, "requirements.txt", *CONDA_FILES)
    return tuple(n for n in names if (directory / n).is_file() and n not in own)


def precedence_note(directory: Path, chosen: Path) -> str | None:
    """One line naming the file read and the ones passed over (None: there was one)."""
    others = passed_over(directory, chosen)
    if not others:
        return None
    return (
        f"{directory}: read {chosen.name}; passed over {', '.join(others)} (the precedence: "
        "uv.lock, pyproject.toml with [project], an environment file that installs the project, "
        "setup.py/setup.cfg, requirements.txt, environment.yml)"
    )


def _installs_itself(path: Path, directory: Path) -> bool:
    if not path.is_file():
        return False
    try:
        request = read_conda(path, root=directory.resolve())
    except BadInput:
        return False
    return str(directory.resolve()) in request.local


def _has_project_table(path: Path) -> bool:
    try:
        return "project" in read_once.toml(path, "pyproject.toml")
    except BadInput:
        return False


# --- requirements files -----------------------------------------------------------------


@dataclass(kw_only=True)
class _Acc:
    root: Path
    with_local: bool = True
    requirements: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    index_url: str | None = None
    extra: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    local_requirements: list[str] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) with ``\\`` continuations joined and comments removed."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


_INDEX_VARIANT = re.compile(r"/whl/(cpu|cu\d{3}|rocm\d+(?:\.\d+)*)/?$")


def index_variant(urls: tuple[str, ...]) -> tuple[str, str] | None:
    """(variant, the URL that names it) of the first PyTorch variant index among ``urls``
    (``https://download.pytorch.org/whl/cu124`` -> ``cu124``): the build pip installs from
    it, known without reaching it."""
    for url in urls:
        if m := _INDEX_VARIANT.search(url):
            return m.group(1), url
    return None


#: The longest logical line of a requirements file read (hashes continue on more lines).
MAX_LINE = 64 * 1024
#: A word of a line as a POSIX shell splits it: bare runs, '...', "..." and \x, joined.
_WORD = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+""", re.DOTALL)
_PIECE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.DOTALL)


def split_words(line: str, where: str) -> list[str]:
    """``line`` split as ``shlex.split`` does (quotes, backslashes), in linear time
    (``shlex`` builds each word a character at a time: minutes for a 2 MB line)."""
    words: list[str] = []
    pos = 0
    for m in _WORD.finditer(line):
        if line[pos : m.start()].strip():
            break
        words.append("".join(_unquote_piece(p) for p in _PIECE.finditer(m.group())))
        pos = m.end()
    if line[pos:].strip():
        raise BadInput(
            f"{where}: cannot split {_short(line)} (no closing quotation); fix the quoting"
        )
    return words


def _unquote_piece(m: re.Match[str]) -> str:
    single, double, escaped, bare = m.groups()
    if double is not None:
        return re.sub(r'\\(["\\$`])', r"\1", double)
    return single if single is not None else escaped if escaped is not None else bare


def _short(text: str, limit: int = 120) -> str:
    """``text`` quoted for an error line, cut to ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def read_requirements(path: Path, *, root: Path | None = None, with_local: bool = True) -> Request:
    """A requirements file; ``with_local=False``: its ``-e``/``./pkg`` lines left out (the
    file a setup.py reads into its own requirements, where ``-e .`` is the project itself)."""
    acc = _Acc(root=root or containment.root_of(path), with_local=with_local)
    text = _read_requirements_into(path, acc, constraint=False, seen=())
    named = index_variant((*([acc.index_url] if acc.index_url else []), *acc.extra))
    return Request(
        variant=named[0] if named else None,
        variant_why=f"{path.name} installs from {named[1]}" if named else None,
        source=str(path),
        kind="requirements",
        requirements=tuple(dict.fromkeys(acc.requirements)),
        constraints=tuple(dict.fromkeys(acc.constraints)),
        index_url=acc.index_url,
        extra_index_urls=tuple(dict.fromkeys(acc.extra)),
        find_links=tuple(dict.fromkeys(acc.links)),
        local=tuple(dict.fromkeys(acc.local)),
        notes=tuple(acc.notes),
        warnings=tuple(acc.warnings),
        files=tuple(acc.files),
        compiled=is_compiled(text),
        root=str(acc.root),
        local_requirements=tuple(dict.fromkeys(acc.local_requirements)),
        dynamic=tuple(acc.dynamic),
    )


def _read_requirements_into(
    path: Path, acc: _Acc, *, constraint: bool, seen: tuple[Path, ...]
) -> str:
    real = path.resolve()
    if real in seen:
        raise BadInput(f"{path}: includes itself (-r/-c cycle through {seen[-1]})")
    if not path.is_file():
        where = f" (included from {seen[-1]})" if seen else ""
        raise BadInput(f"{path}: no such requirements file{where}")
    text = read_once.text(path, "requirements file")
    acc.files.append(str(real))
    for n, line in _logical_lines(text):
        where = f"{path} (line {n})"
        if len(line) > MAX_LINE:
            raise BadInput(
                f"{where}: {len(line):,} characters long (more than {MAX_LINE:,}); no "
                "requirement or pip option is: fix the file"
            )
        if line.startswith("-"):
            words = split_words(line, where)
            _option(words, path, where, acc, constraint=constraint, seen=(*seen, real))
            continue
        req = line.split(" --hash", 1)[0].split(" --config-settings", 1)[0].strip()
        _requirement(req, path, where, acc, constraint=constraint)
    return text


def _option(
    words: list[str],
    path: Path,
    where: str,
    acc: _Acc,
    *,
    constraint: bool,
    seen: tuple[Path, ...],
) -> None:
    opt, _, inline = words[0].partition("=")
    value = inline or (words[1] if len(words) > 1 else "")
    if opt in ("-r", "--requirement", "-c", "--constraint"):
        if not value:
            raise BadInput(f"{where}: {opt} needs a file name")
        as_constraint = constraint or opt in ("-c", "--constraint")
        include = path.parent / value  # inside the project, or refused before it is read
        containment.require_inside(include, acc.root, "-r/-c include", where)
        _read_requirements_into(include, acc, constraint=as_constraint, seen=seen)
    elif opt in ("-i", "--index-url"):
        acc.index_url = value
    elif opt == "--extra-index-url":
        acc.extra.append(value)
    elif opt in ("-f", "--find-links"):
        local = path.parent / value
        acc.links.append(str(local.resolve()) if "://" not in value and local.exists() else value)
    elif opt in ("-e", "--editable"):
        _requirement(value, path, where, acc, constraint=constraint)
    elif opt == "--no-index":
        acc.note(f"{where}: --no-index: only the find-links are searched")
        acc.index_url = ""
    elif opt in _IGNORED_WITH_VALUE or opt.startswith("--"):
        acc.note(f"{where}: {opt} does not change what is judged; ignored")
    else:
        raise BadInput(f"{where}: unknown option {opt!r} (pip's requirements file options)")


def _requirement(text: str, path: Path, where: str, acc: _Acc, *, constraint: bool) -> None:
    if _is_local(text):
        if not acc.with_local:
            return
        given = path.parent / text.split("[", 1)[0].removeprefix("file:")
        containment.require_inside(given, acc.root, "the local project", where)
        target = given.resolve()
        if (target / "pyproject.toml").is_file() or (target / "setup.py").is_file():
            acc.local.append(str(target))
            _local_requirements(target, acc)
        else:
            acc.warn(
                f"{where}: {text} is not here (no pyproject.toml or setup.py in {target}); "
                "its dependencies are not judged"
            )
        return
    line = _vcs_as_pep508(text) if _VCS.match(text) or _URL.match(text) else text
    if line is None:
        acc.warn(f"{where}: {text}: a URL without #egg=NAME; not judged")
        return
    try:
        Requirement(line)
    except InvalidRequirement as exc:
        why = str(exc).splitlines()[0] if str(exc) else "unreadable"
        raise BadInput(f"{where}: {_short(text)} is not a requirement ({why})") from exc
    (acc.constraints if constraint else acc.requirements).append(line)


def _local_requirements(target: Path, acc: _Acc) -> None:
    """The requirements of a local project (``-e .``), read as data, never built: its
    package metadata (pyproject.toml, setup.py, setup.cfg), never an environment file
    (the one that says ``-e .`` may be what is being read)."""
    found = _metadata_file(target)
    if found is None:
        return
    own = read(found, root=acc.root)
    acc.local_requirements += [*own.requirements, *own.local_requirements]
    acc.dynamic += [d for d in own.dynamic if d not in acc.dynamic]
    acc.files += [f for f in own.files if f not in acc.files]


def _is_local(text: str) -> bool:
    return text.startswith((".", "/", "file:")) and "@" not in text.split("/", 1)[0]


def _vcs_as_pep508(text: str) -> str | None:
    """``git+https://...#egg=name`` -> ``name @ git+https://...``; a wheel URL by its name."""
    if " @ " in text or re.match(r"^[A-Za-z0-9._-]+\s*@", text):
        return text
    egg = _EGG.search(text)
    if egg:
        return f"{egg.group(1)} @ {text.split('#', 1)[0]}"
    tail = text.rsplit("/", 1)[-1].split("#", 1)[0]
    if tail.endswith((".whl", ".tar.gz", ".zip")):
        return f"{canonicalize_name(tail.split('-', 1)[0])} @ {text}"
    return None


# --- pyproject.toml, setup.py -----------------------------------------------------------


def read_pyproject(
    path: Path, *, extras: tuple[str, ...] = (), root: Path | None = None
) -> Request:
    data = read_once.toml(path, "pyproject.toml")
    project = data.get("project")
    root = root or containment.root_of(path)
    if not isinstance(project, dict):
        return read_setup(path, extras=extras, root=root)
    dynamic = project.get("dynamic") or []
    read_files: list[str] = []
    if "dependencies" in dynamic:
        named = _dynamic_files(data)
        if named is None:  # setuptools reads them from setup.py/setup.cfg
            return read_setup(path, extras=extras, root=root)
        reqs, read_files = _dependency_files(named, path, root)
    else:
        reqs = _strings(project.get("dependencies"), f"{path}: [project] dependencies")
    optional = project.get("optional-dependencies") or {}
    for extra in extras:
        if extra not in optional:
            known = ", ".join(sorted(optional)) or "none"
            raise BadInput(f"{path}: no optional dependency group {extra!r} (known: {known})")
    own = canonicalize_name(str(project.get("name", "")))
    for extra in _expand_extras(extras, optional, own):
        reqs += [r for r in _strings(optional[extra], f"{path}: {extra}") if not _names(r, own)]
    notes = []
    package = "build-system" in data
    if not package:
        notes.append(
            f"{path}: no [build-system]: its dependencies are installed, not the project "
            "itself (as uv sync treats it)"
        )
    return Request(
        source=str(path),
        kind="pyproject",
        requirements=tuple(dict.fromkeys(reqs)),
        project_file=str(path.resolve()) if package else None,
        extras=extras,
        requires_python=project.get("requires-python"),
        python_pin=uv_lock.python_pin_of(path.parent),
        notes=tuple(notes),
        files=(str(path.resolve()), *read_files),
        root=str(root),
    )


def _dynamic_files(data: dict[str, Any]) -> list[str] | None:
    """``[tool.setuptools.dynamic] dependencies = {file = [...]}``: the files named."""
    tool = data.get("tool")
    setuptools = tool.get("setuptools") if isinstance(tool, dict) else None
    dyn = setuptools.get("dynamic") if isinstance(setuptools, dict) else None
    deps = dyn.get("dependencies") if isinstance(dyn, dict) else None
    files = deps.get("file") if isinstance(deps, dict) else None
    files = [files] if isinstance(files, str) else files
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return files


def _dependency_files(named: list[str], path: Path, root: Path) -> tuple[list[str], list[str]]:
    """(requirements, files read) of the requirements files a pyproject names, read as data
    inside the project."""
    reqs: list[str] = []
    files: list[str] = []
    for name in named:
        file = path.parent / name
        containment.require_inside(file, root, "[tool.setuptools.dynamic] file", str(path))
        own = read_requirements(file, root=root, with_local=False)
        reqs += list(own.requirements)
        files += list(own.files)
    return reqs, files


def _names(line: str, own: str) -> bool:
    try:
        return bool(own) and canonicalize_name(Requirement(line).name) == own
    except InvalidRequirement:
        return False


def _expand_extras(extras: tuple[str, ...], optional: dict[str, Any], own: str) -> list[str]:
    """The extras selected, with those a self-reference (``ai2-olmo[dev,train]``) adds."""
    out: list[str] = []
    todo = list(extras)
    while todo:
        extra = todo.pop(0)
        if extra in out or extra not in optional:
            continue
        out.append(extra)
        for line in optional[extra] if isinstance(optional[extra], list) else []:
            if isinstance(line, str) and _names(line, own):
                todo += sorted(Requirement(line).extras)
    return out


def read_setup(path: Path, *, extras: tuple[str, ...] = (), root: Path | None = None) -> Request:
    """``setup.py``/``setup.cfg`` (or a ``pyproject.toml`` whose dependencies are dynamic):
    the requirements they declare as data (``static_meta``: setup.cfg, a setup.py's literal
    ``install_requires``), never by running them; when only its code knows them, the request
    says so in ``dynamic`` and uv reads them through the build backend, in a copy, only when
    asked (a build, ``--allow-build``)."""
    root = root or containment.root_of(path)
    directory = path.parent
    files = [path.resolve()]
    for sibling in ("setup.py", "setup.cfg", "pyproject.toml"):
        if (directory / sibling).is_file() and (directory / sibling).resolve() not in files:
            files.append((directory / sibling).resolve())
    project = directory / "setup.py" if path.name != "setup.py" else path
    if not project.is_file():
        project = path
    meta = _setup_metadata(directory, root)
    reqs = list(meta.requirements)
    for req_file in meta.requirement_files:
        containment.require_inside(
            req_file, root, "the requirements file setup.py reads", str(path)
        )
        own = read_requirements(req_file, root=root, with_local=False)
        reqs += list(own.requirements)
        files += [Path(f) for f in own.files if Path(f) not in files]
    for extra in extras:
        lines = meta.extra(extra)
        if lines is None and not meta.dynamic:
            known = ", ".join(sorted(dict(meta.extras))) or "none"
            raise BadInput(f"{path}: no optional dependency group {extra!r} (known: {known})")
        reqs += list(lines or ())
    return Request(
        source=str(path),
        kind="setup.py",
        requirements=tuple(dict.fromkeys(reqs)),
        project_file=str(project.resolve()),
        extras=extras,
        requires_python=meta.requires_python,
        notes=() if meta.dynamic else (f"{path}: its requirements read as data",),
        files=tuple(str(f) for f in files),
        root=str(root),
        dynamic=(meta.dynamic,) if meta.dynamic else (),
    )


def _setup_metadata(directory: Path, root: Path) -> static_meta.Static:
    """setup.py's literal values over setup.cfg's (as setuptools merges them)."""
    cfg_path, py_path = directory / "setup.cfg", directory / "setup.py"
    cfg = None
    if cfg_path.is_file():
        containment.require_inside(cfg_path, root, "setup.cfg")
        cfg = static_meta.of_setup_cfg(cfg_path)
    if not py_path.is_file():
        if cfg is None:
            backend = static_meta.dynamic_line(directory / "pyproject.toml")
            return static_meta.Static(dynamic=backend)
        return cfg
    containment.require_inside(py_path, root, "setup.py")
    py = static_meta.of_setup_py(py_path)
    if py.dynamic or cfg is None:
        return py
    if cfg.dynamic:
        return cfg
    return static_meta.Static(
        requirements=py.requirements or cfg.requirements,
        extras=py.extras or cfg.extras,
        requires_python=py.requires_python or cfg.requires_python,
        requirement_files=py.requirement_files,
    )


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput(f"{where} must be a list of requirement strings")
    return list(value)


# --- conda environment.yml --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CondaNames:
    """``knowledge/conda_pypi.toml``: conda names with another PyPI name, dropped or
    conda-only."""

    renamed: dict[str, str]
    dropped: dict[str, str]  # name or ``prefix*`` -> why
    conda_only: frozenset[str]
    cuda_constraint: frozenset[str] = frozenset()  # cuda-version, cudatoolkit, pytorch-cuda

    def dropped_why(self, name: str) -> str | None:
        for key, why in self.dropped.items():
            if name == key or (key.endswith("*") and name.startswith(key[:-1])):
                return why
        return None


def conda_names() -> CondaNames:
    data = fsio.load_toml(_CONDA_KNOWLEDGE, "conda_pypi.toml")
    renamed = {r["conda"]: r["pypi"] for r in data.get("renamed", [])}
    dropped = {r["conda"]: r["why"] for r in data.get("dropped", [])}
    only = frozenset(r["conda"] for r in data.get("conda_only", []))
    cuda = frozenset(r["conda"] for r in data.get("cuda_constraint", []))
    return CondaNames(renamed=renamed, dropped=dropped, conda_only=only, cuda_constraint=cuda)


def parse_conda_yaml(text: str, where: str) -> dict[str, Any]:
    """A conda environment file, read with PyYAML's safe loader (``fsio.parse_yaml``: no
    Python objects, no code, size and depth bounded), aliases refused (``*name``: a few
    lines that expand without bound; conda files need none); every scalar of
    ``dependencies`` (and its ``pip:`` list) a string, as conda reads them. Other keys
    (``variables:``, ``prefix:``) are read and left alone."""
    data = fsio.parse_yaml(text, where, "conda environment file")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(f"{where}: a conda environment file is a mapping of keys (name:, "
                       "dependencies:), not a list or a value")  # fmt: skip
    deps = data.get("dependencies")
    if isinstance(deps, list):
        data["dependencies"] = [_conda_item(d, where) for d in deps if d is not None]
    return {str(k): v for k, v in data.items()}


def _conda_item(item: Any, where: str) -> str | dict[str, list[str]]:
    """One ``dependencies:`` entry: a spec as a string, or ``pip:`` with its lines."""
    if isinstance(item, dict):
        return {str(k): [str(v) for v in (vs or []) if v is not None]
                if isinstance(vs, list) else [str(vs)] for k, vs in item.items()}  # fmt: skip
    if isinstance(item, list):
        raise BadInput(f"{where}: dependencies: {item!r} is a list inside the list")
    return str(item)


_CONDA_SPEC = re.compile(r"^(?:[\w.-]+::)?([A-Za-z0-9_.-]+)\s*(.*)$")


def conda_to_pep508(spec: str) -> tuple[str, str]:
    """(conda name, PEP 508 version part) of a conda match spec: ``numpy=1.19.2=py38_0`` ->
    ``("numpy", "==1.19.2.*")``; ``pytorch >= 1.13`` -> ``("pytorch", ">=1.13")``."""
    m = _CONDA_SPEC.match(spec.strip())
    if not m:
        raise ValueError(spec)
    name, rest = m.group(1).lower(), m.group(2).strip().replace(" ", "")
    if not rest:
        return name, ""
    if rest.startswith("=") and not rest.startswith("=="):
        version = rest[1:].split("=", 1)[0]
        return name, f"=={version}" if version.endswith("*") else f"=={version}.*"
    if rest.startswith("==") and rest.count("=") > 2:
        rest = "==" + rest[2:].split("=", 1)[0]
    if rest[0].isdigit():
        rest = f"=={rest}" if "*" in rest else f"=={rest}.*"
    return name, rest


def read_conda(path: Path, *, root: Path | None = None) -> Request:
    root = root or containment.root_of(path)
    return read_once.kept(
        "conda", path, (str(root),), lambda: _read_conda(path, root=root), also=_files
    )


def _files(request: Request) -> tuple[str, ...]:
    return request.files


def _read_conda(path: Path, *, root: Path) -> Request:
    data = parse_conda_yaml(read_once.text(path, "conda environment file"), str(path))
    deps = data.get("dependencies")
    if not isinstance(deps, list):
        raise BadInput(f"{path}: no 'dependencies:' list; not a conda environment file")
    names = conda_names()
    acc = _Acc(root=root or containment.root_of(path), files=[str(path.resolve())])
    python: str | None = None
    variant: tuple[str, str] | None = None
    dropped: list[str] = []
    only: list[str] = []
    constraints: list[tuple[str, str]] = []
    for dep in deps:
        if isinstance(dep, dict):
            _conda_pip(dep, path, acc)
            continue
        try:
            name, version = conda_to_pep508(dep)
        except ValueError:
            raise BadInput(f"{path}: dependencies: {dep!r} is not a conda spec") from None
        if name == "python":
            python = _python_of(version)
            continue
        if chosen := conda_variant(name, version, dep):
            variant = variant or chosen
        if name in names.cuda_constraint and (release := _cuda_release(version)):
            constraints.append((name, release))
            if name not in names.dropped:  # cuda-version: not a piece torch brings
                acc.note(f"{path}: {dep}: the environment's CUDA {release}, judged as such")
                continue
        if why := names.dropped_why(name):
            dropped.append(f"{name} ({why})")
            continue
        if name in names.conda_only:
            only.append(dep)
            continue
        acc.requirements.append(f"{names.renamed.get(name, name)}{version}")
    if data.get("channels"):
        channels = data["channels"] if isinstance(data["channels"], list) else [data["channels"]]
        acc.note(
            f"{path}: channels {', '.join(map(str, channels))} ignored: packages come from "
            "PyPI (and the indexes its pip: section names)"
        )
    if dropped:
        acc.note(f"{path}: dropped {'; '.join(dropped)}")
    if only:
        acc.warn(
            f"{path}: conda-only packages without a PyPI twin, not installed: {', '.join(only)} "
            "(install them with the system or modules)"
        )
        acc.note(
            f"{path}: not judged (what they need of the node is in conda's channels, not "
            f"read here): {', '.join(only)}"
        )
    return Request(
        source=str(path),
        kind="environment.yml",
        requirements=tuple(dict.fromkeys(acc.requirements)),
        index_url=acc.index_url,
        extra_index_urls=tuple(acc.extra),
        find_links=tuple(acc.links),
        local=tuple(acc.local),
        python=python,
        variant=variant[0] if variant else None,
        variant_why=f"{path.name} says {variant[1]}" if variant else None,
        notes=tuple(acc.notes),
        warnings=tuple(acc.warnings),
        files=tuple(acc.files),
        root=str(acc.root),
        local_requirements=tuple(dict.fromkeys(acc.local_requirements)),
        dynamic=tuple(acc.dynamic),
        cuda_constraints=tuple(dict.fromkeys(constraints)),
    )


def _cuda_release(version: str) -> str | None:
    """The CUDA release (``"13.1"``) a conda constraint's version part names: ``==13.1.*``,
    ``>=13.0,<=13.1`` (the lowest it admits: its major is the env's); None: none named."""
    m = re.search(r"(\d+)\.(\d+)", version)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def _conda_pip(dep: dict[str, Any], path: Path, acc: _Acc) -> None:
    """An environment file's ``- pip:`` section, read as requirements lines."""
    for sub, lines in dep.items():
        if sub != "pip":
            raise BadInput(f"{path}: dependencies: '{sub}:' is not known (only 'pip:')")
        for line in lines:
            where = f"{path} (pip: {line})"
            if line.startswith("-"):
                words = split_words(line, where)
                _option(words, path, where, acc, constraint=False, seen=())
            else:
                _requirement(line, path, where, acc, constraint=False)


#: conda packages whose version is the CUDA of the torch build conda installs
_CUDA_SELECTORS = ("cudatoolkit", "pytorch-cuda")
_BUILD_CUDA = re.compile(r"(?:^|[_=])cuda(\d+)\.(\d+)(?:[_.]|$)")


def conda_variant(name: str, version: str, spec: str) -> tuple[str, str] | None:
    """(torch variant, the spec that chose it) of one conda dependency: ``cudatoolkit=11.3``
    and ``pytorch-cuda=12.1`` select the build of that CUDA (``cu113``, ``cu121``, the
    variants of ``knowledge/torch_leads.toml``); a pytorch build string
    ``py3.8_cuda11.3_cudnn8.2.0_0`` or ``*cpu*`` names it too. None: this one says nothing."""
    if name in _CUDA_SELECTORS:
        m = re.fullmatch(r"==(\d+)\.(\d+)(?:\.\d+)*(?:\.\*)?", version)
        return (f"cu{m.group(1)}{m.group(2)}", spec.strip()) if m else None
    if name != "pytorch":
        return None
    build = spec.strip().split("=")[-1] if spec.count("=") >= 2 else ""
    if m := _BUILD_CUDA.search(build):
        return f"cu{m.group(1)}{m.group(2)}", spec.strip()
    if re.search(r"(?:^|_)cpu(?:_|$)", build):
        return "cpu", spec.strip()
    return None


def _python_of(version: str) -> str | None:
    """``==3.10.*`` -> ``3.10``; ``>=3.8`` -> None (a floor is not a choice)."""
    m = re.fullmatch(r"==(\d+\.\d+)(?:\.\d+)?(?:\.\*)?", version)
    return m.group(1) if m else None


__all__ = [
    "Request",
    "conda_names",
    "conda_to_pep508",
    "conda_variant",
    "exact_release",
    "find_in",
    "is_compiled",
    "kind_of",
    "parse_conda_yaml",
    "passed_over",
    "precedence_note",
    "read",
]
