"""Cluster profiles: ``envs/<name>.toml``, validated against one declared schema.

The schema *is* the dataclasses below: every key is declared once, with its type,
default and a one-line doc in the field metadata; validation and ``hpcenv show``
(``--schema``: the table of every key) are derived from them. Errors name the file, the key, the
line where it stands, and the fix, and exit with code 2.

Sections and keys (``hpcenv show --schema`` prints this table from the code)::

    [profile]    name, description, python
    [platform]   arch, gpu, compute_capability, gpus_per_node, gpu_memory_gib, driver,
                 libfabric_provider, nccl_net
    [torch]      version, backend, index_url
    [packages]   install, find_links, offline
    [flash_attn] mode, version
    [fixes]      sitecustomize
    [modules]    load
    [env]        recipe, always (table), multi_node (table)
    [slurm]      partition, gpu_request, gres_type, time, build_time, account
    [job]        scratch, scratch_min_gib, log_dir, gpu_memory_gib, nccl
    [probes]     run, timeout_s, nccl_min_bytes, nccl_max_bytes
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from hpcenv.kit import registry
from hpcenv.models import walltime
from hpcenv.models.facts import Facts, Gpu, NvidiaFacts
from hpcenv.utils import fsio, redact
from hpcenv.utils.errors import BadInput
from hpcenv.utils.output import SHELL_NAME

#: Probes hpcenv ships (``hpcenv.kit.registry``); profiles may only name these.
KNOWN_PROBES = registry.NAMES
KNOWN_FIXES = ("sm90a", "venv_nccl")
ARCHES = ("x86_64", "aarch64", "any")
BACKEND = re.compile(r"^(auto|cpu|cu\d{3})$")
ENV_NAME = SHELL_NAME  # the shell's rule for a variable name (one owner: utils/output)


def key(doc: str, *, default: Any = None, choices: tuple[str, ...] = (), check: Any = None) -> Any:
    """Declare a profile key: its doc, default, allowed values and extra check."""
    meta = {"doc": doc, "choices": choices, "check": check}
    if isinstance(default, dict):  # a fresh table per instance, never a shared one
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


#: A profile name: it names the venv directory and appears in commands (never an option).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _name(value: str) -> str | None:
    """Names become directory names (venvs/<name>): no path separators, no dot-dot."""
    if value == "" or (NAME.fullmatch(value) and ".." not in value):
        return None
    return (
        "must start with a letter or digit and hold only letters, digits, '.', '_' or '-' "
        "(it names the venv directory)"
    )


def _specifier(value: str) -> str | None:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return "is not a version specifier; write e.g. '==2.9.1' or '>=2.9,<2.11'"
    return None if value.strip() else "is empty; write e.g. '==2.9.1'"


def _version(value: str) -> str | None:
    try:
        Version(value)
    except InvalidVersion:
        return "is not a version; write e.g. '3.12'"
    return None


def _cap(value: str) -> str | None:
    return None if value == "" or re.fullmatch(r"\d+\.\d+", value) else "is not like '9.0'"


def _backend(value: str) -> str | None:
    return None if BACKEND.match(value) else "must be 'auto', 'cpu' or a CUDA variant like 'cu126'"


def _probes(value: tuple[str, ...]) -> str | None:
    bad = [p for p in value if p not in KNOWN_PROBES]
    return f"names unknown probe(s) {bad}; known: {', '.join(KNOWN_PROBES)}" if bad else None


def _fixes(value: tuple[str, ...]) -> str | None:
    bad = [p for p in value if p not in KNOWN_FIXES]
    return f"names unknown fix(es) {bad}; known: {', '.join(KNOWN_FIXES)}" if bad else None


def _env_table(value: dict[str, str]) -> str | None:
    bad = [k for k in value if not ENV_NAME.fullmatch(k)]
    return f"has invalid variable name(s) {bad}" if bad else None


def _positive(value: int | float) -> str | None:
    if not math.isfinite(value):
        return "must be a finite number"
    return None if value > 0 else "must be greater than 0"


def _non_negative(value: int | float) -> str | None:
    if not math.isfinite(value):
        return "must be a finite number"
    return None if value >= 0 else "must be 0 or more"


def _driver(value: str) -> str | None:
    if value == "" or re.fullmatch(r"\d+(\.\d+){1,2}", value):
        return None
    return "is not an NVIDIA driver version; write e.g. '565.57.01'"


def _requirements(value: tuple[str, ...]) -> str | None:
    for req in value:
        try:
            parsed = Requirement(req)
        except InvalidRequirement as exc:
            why = str(exc).splitlines()[0] if str(exc) else "unparsable"
            return f"holds {req!r}, which is not a PEP 508 requirement ({why})"
        if parsed.url and redact.URL_USERINFO.search(parsed.url):
            return (
                f"holds a requirement for {parsed.name} with credentials in its URL; a lock "
                "would store them: write the URL without user:password@ and give uv the "
                "credentials in ~/.netrc"
            )
    return None


@dataclass(frozen=True, kw_only=True)
class ProfileSection:
    name: str = key("profile name; defaults to the file name", default="", check=_name)
    description: str = key("one line shown by 'hpcenv profiles'", default="")
    python: str = key("Python version of the built venv", default="3.11", check=_version)


@dataclass(frozen=True, kw_only=True)
class PlatformSection:
    arch: str = key("CPU architecture the profile is for", default="any", choices=ARCHES)
    gpu: str = key("GPU model expected on the nodes (empty: none)", default="")
    compute_capability: str = key(
        "compute capability of that GPU, e.g. '9.0'", default="", check=_cap
    )
    gpus_per_node: int = key("GPUs per node", default=0, check=_non_negative)
    gpu_memory_gib: float = key("memory of each GPU in GiB", default=0.0, check=_non_negative)
    driver: str = key(
        "NVIDIA driver the nodes run (used when planning without facts)",
        default="",
        check=_driver,
    )
    libfabric_provider: str = key(
        "libfabric provider the network needs (cxi on Slingshot)", default=""
    )
    nccl_net: str = key(
        "network NCCL must use across nodes", default="any", choices=("ofi", "ib", "socket", "any")
    )


@dataclass(frozen=True, kw_only=True)
class TorchSection:
    version: str = key("torch version specifier", default=">=2.6", check=_specifier)
    backend: str = key(
        "'auto' lets hpcenv choose; or pin 'cpu' / 'cu126' / ...", default="auto", check=_backend
    )
    index_url: str = key(
        "base of the PyTorch wheel index (variant appended); HPCENV_TORCH_INDEX_URL overrides",
        default="https://download.pytorch.org/whl",
    )


@dataclass(frozen=True, kw_only=True)
class PackagesSection:
    install: tuple[str, ...] = key("other requirements (PEP 508)", default=(), check=_requirements)
    find_links: tuple[str, ...] = key(
        "wheelhouse directories (site mirror, air-gapped nodes); PIP_FIND_LINKS is added",
        default=(),
    )
    offline: bool = key("install from the wheelhouse and uv cache only", default=False)


@dataclass(frozen=True, kw_only=True)
class FlashAttnSection:
    mode: str = key(
        "'auto' decides from the GPUs; or force 'wheel', 'build', 'skip'",
        default="skip",
        choices=("auto", "wheel", "build", "skip"),
    )
    version: str = key("flash-attn version", default="2.8.3", check=_version)


@dataclass(frozen=True, kw_only=True)
class FixesSection:
    sitecustomize: tuple[str, ...] = key(
        "fixes from sitecustomize/ to install", default=(), check=_fixes
    )


@dataclass(frozen=True, kw_only=True)
class ModulesSection:
    load: tuple[str, ...] = key("environment modules to load, in order", default=())


def _recipe(value: str) -> str | None:
    from hpcenv.knowledge import network

    if value == "" or network.get(value):
        return None
    return f"names no network recipe; known: {', '.join(network.names())} (knowledge/network.toml)"


@dataclass(frozen=True, kw_only=True)
class EnvSection:
    recipe: str = key(
        "network recipe (knowledge/network.toml: cxi, efa, verbs, tcp) whose variables "
        "come first; the tables below add to them and win",
        default="",
        check=_recipe,
    )
    always: dict[str, str] = key(
        "variables set in every job and probe", default={}, check=_env_table
    )
    multi_node: dict[str, str] = key(
        "variables set only when a job spans several nodes (NCCL_NET)", default={}, check=_env_table
    )


@dataclass(frozen=True, kw_only=True)
class SlurmSection:
    partition: str = key("partition to submit to (empty: the cluster default)", default="")
    gpu_request: str = key(
        "how the cluster wants GPUs asked for",
        default="none",
        choices=("gpus-per-node", "gpus", "gres", "none"),
    )
    gres_type: str = key("GRES type for gpu_request='gres' (e.g. 'volta')", default="")
    time: str = key(
        "walltime of probe jobs: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
        default="00:20:00",
        check=walltime.problem,
    )
    build_time: str = key(
        "walltime of build jobs: room for a flash-attn source build (~50 min or more on GH200)",
        default="02:00:00",
        check=walltime.problem,
    )
    account: str = key("account to charge (empty: the user's default)", default="")
    qos: str = key("quality of service for jobs (empty: the cluster's default)", default="")


@dataclass(frozen=True, kw_only=True)
class JobSection:
    scratch: str = key("fast node-local scratch, used as TMPDIR (empty: none)", default="")
    scratch_min_gib: float = key(
        "free space the job needs on scratch", default=0.0, check=_non_negative
    )
    log_dir: str = key("directory for job logs", default="logs")
    gpu_memory_gib: float = key(
        "GPU memory the job needs on each GPU", default=0.0, check=_non_negative
    )
    nccl: str = key(
        "libnccl.so.2 torch must load: 'venv' (the venv's, loaded before torch: for a system "
        "NCCL older than torch's), 'system' (first on LD_LIBRARY_PATH), 'auto' (the loader's "
        "choice, not older than the venv's)",
        default="auto",
        choices=("auto", "venv", "system"),
    )


@dataclass(frozen=True, kw_only=True)
class ProbesSection:
    run: tuple[str, ...] = key(
        "probes 'hpcenv probe' runs by default", default=("imports",), check=_probes
    )
    timeout_s: float = key("timeout of each probe", default=300.0, check=_positive)
    nccl_min_bytes: int = key("smallest allreduce size", default=1024, check=_positive)
    nccl_max_bytes: int = key(
        "largest allreduce size on GPU (CPU uses at most 64 MiB)", default=1 << 30, check=_positive
    )
    nccl_expect_busbw_gbps: float = key(
        "bus bandwidth (GB/s) the network should reach at the largest size; drawn as a line "
        "in the HTML report (0: none declared)",
        default=0.0,
        check=_non_negative,
    )


SECTIONS: dict[str, type] = {
    "profile": ProfileSection,
    "platform": PlatformSection,
    "torch": TorchSection,
    "packages": PackagesSection,
    "flash_attn": FlashAttnSection,
    "fixes": FixesSection,
    "modules": ModulesSection,
    "env": EnvSection,
    "slurm": SlurmSection,
    "job": JobSection,
    "probes": ProbesSection,
}


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    path: Path | None
    profile: ProfileSection
    platform: PlatformSection
    torch: TorchSection
    packages: PackagesSection
    flash_attn: FlashAttnSection
    fixes: FixesSection
    modules: ModulesSection
    env: EnvSection
    slurm: SlurmSection
    job: JobSection
    probes: ProbesSection

    def env_for(self, *, nodes: int) -> dict[str, str]:
        """The variables for a run on ``nodes`` nodes (multi-node ones only when > 1)."""
        out = dict(self.env.always)
        if nodes > 1:
            out.update(self.env.multi_node)
        return out


# --- loading ---------------------------------------------------------------------------


def _line_of(text: str, section: str, name: str | None) -> int | None:
    """The line where ``[section]`` (or its ``name = ...``) stands, for error messages."""
    current = None
    section_line = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = re.match(r"^\[\s*([A-Za-z0-9_.\-\"]+)\s*\]", line)
        if header:
            current = header.group(1).replace('"', "")
            if current == section and section_line is None:
                section_line = number
            continue
        if name is None:
            continue
        if current == section and re.match(rf"^\"?{re.escape(name)}\"?\s*=", line):
            return number
        if current is None and re.match(rf"^{re.escape(section)}\.{re.escape(name)}\s*=", line):
            return number
    return section_line


def line_of(text: str, section: str, name: str) -> int | None:
    """The line of ``name = ...`` in ``[section]`` of profile ``text`` (else the section's)."""
    return _line_of(text, section, name)


def _type_name(tp: Any) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        tuple[str, ...]: "a list of strings",
        dict[str, str]: "a table of strings",
    }.get(tp, str(tp))


def _shown(value: Any) -> str:
    """A value as an error message shows it: never a whole table or list (they may hold
    tokens, and a line must stay a line), at most 60 characters of a string."""
    if isinstance(value, dict):
        return f"a table of {len(value)} key(s)"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _coerce(tp: Any, value: Any) -> tuple[bool, Any]:
    """(ok, value converted to the declared type)."""
    if tp is str:
        return isinstance(value, str), value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if tp == tuple[str, ...]:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return ok, tuple(value) if ok else value
    if tp == dict[str, str]:
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return ok, dict(value) if ok else value
    raise TypeError(tp)  # pragma: no cover - a schema bug


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def parse(text: str, where: str, default_name: str = "") -> Profile:
    """Validate profile TOML ``text``; ``where`` (a path) names it in errors.

    The secrets it holds (secret-named ``[env]`` values, URL credentials anywhere) are
    remembered for masking (``redact.remember``) before anything can print them.
    """
    data = fsio.parse_toml(text, where)
    _remember_secrets(data)

    def fail(section: str, name: str | None, problem: str) -> BadInput:
        line = _line_of(text, section, name)
        at = f" (line {line})" if line else ""
        label = f"[{section}] {name}" if name else f"[{section}]"
        return BadInput(f"{where}{at}: {label} {problem}")

    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise fail(unknown[0], None, f"is not a known section; known: {', '.join(SECTIONS)}")
    sections: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        raw = data.get(section, {})
        if not isinstance(raw, dict):
            raise fail(section, None, "must be a table ([section] header)")
        types_ = _field_types(cls)
        extra = sorted(set(raw) - set(types_))
        if extra:
            raise fail(
                section,
                extra[0],
                f"is not a known key; known keys: {', '.join(types_)} (see 'hpcenv show --schema')",
            )
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in raw:
                continue
            ok, value = _coerce(types_[f.name], raw[f.name])
            if not ok:
                raise fail(
                    section,
                    f.name,
                    f"is {_shown(raw[f.name])} but must be {_type_name(types_[f.name])}",
                )
            choices = f.metadata["choices"]
            if choices and value not in choices:
                raise fail(
                    section, f.name, f"= {_shown(value)} must be one of: {', '.join(choices)}"
                )
            check = f.metadata["check"]
            problem = check(value) if check else None
            if problem:
                shown = "" if isinstance(value, (dict, tuple)) else f"= {_shown(value)} "
                raise fail(section, f.name, f"{shown}{problem}")
            values[f.name] = value
        sections[section] = cls(**values)
    name = sections["profile"].name or default_name
    if not name:
        raise fail("profile", "name", 'is missing; add name = "..." under [profile]')
    problem = _name(name)
    if problem:  # a name taken from the file name ('...toml', '-rf.toml')
        raise BadInput(
            f"{where}: the profile name {_shown(name)} (from the file name) {problem}; "
            'rename the file or set name = "..." under [profile]'
        )
    pr = sections["probes"]
    if pr.nccl_min_bytes > pr.nccl_max_bytes:
        raise fail(
            "probes",
            "nccl_min_bytes",
            f"= {pr.nccl_min_bytes} is larger than nccl_max_bytes = {pr.nccl_max_bytes}; swap them",
        )
    sections["profile"] = dataclasses.replace(sections["profile"], name=name)
    sections["env"] = _with_recipe(sections["env"])
    if sections["slurm"].gpu_request == "gres" and not sections["slurm"].gres_type:
        raise fail("slurm", "gres_type", "is needed when gpu_request = 'gres' (e.g. 'volta')")
    return Profile(name=name, path=Path(where) if where else None, **sections)


def _with_recipe(env: EnvSection) -> EnvSection:
    """``[env]`` with its recipe's variables first; the profile's own values win (a
    variable the profile sets in ``always`` is not reset by the recipe's ``multi_node``)."""
    if not env.recipe:
        return env
    from hpcenv.knowledge import network

    recipe = network.get(env.recipe)
    assert recipe is not None  # checked by _recipe
    return dataclasses.replace(
        env,
        always={**recipe.env("always"), **env.always},
        multi_node={
            **{k: v for k, v in recipe.env("multi_node").items() if k not in env.always},
            **env.multi_node,
        },
    )


def declared_facts(p: Profile) -> Facts:
    """Facts of a typical node of the profile's cluster, from its [platform] section.

    Lets a plan or lock be made for the cluster from anywhere (an aarch64 lock on an
    x86 laptop). Keys the profile does not declare stay unknown.
    """
    plat = p.platform
    nvidia = None
    if plat.driver:
        gpus = tuple(
            Gpu(
                index=i,
                name=plat.gpu or "unknown GPU",
                compute_capability=plat.compute_capability or None,
                memory_mib=int(plat.gpu_memory_gib * 1024) or None,
            )
            for i in range(plat.gpus_per_node)
        )
        nvidia = NvidiaFacts(
            driver_version=plat.driver,
            cuda_driver_version=None,
            gpus=gpus,
            source=f"declared by profile {p.name}",
        )
    return Facts(
        arch=None if plat.arch == "any" else plat.arch,
        python=p.profile.python,
        nvidia=nvidia,
        modules=p.modules.load,
        source=f"declared by profile {p.name}",
    )


# --- finding ---------------------------------------------------------------------------


def envs_dirs() -> list[Path]:
    """Where profiles are looked up: $HPCENV_ENVS, ./envs, then the ones hpcenv ships."""
    dirs = []
    if os.environ.get("HPCENV_ENVS"):
        dirs.append(Path(os.environ["HPCENV_ENVS"]))
    dirs.append(Path.cwd() / "envs")
    here = Path(__file__).resolve().parents[1]
    dirs += [here / "_envs", here.parents[1] / "envs"]
    seen: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


def available() -> dict[str, Path]:
    """Profile name -> file, the first directory winning."""
    found: dict[str, Path] = {}
    for d in envs_dirs():
        for p in sorted(d.glob("*.toml")):
            found.setdefault(p.stem, p)
    return found


def _remember_secrets(data: Any) -> None:
    """Every secret in a parsed profile, for masking: ``[env]`` tables by name, and URL
    credentials in any string (an index_url, a requirement)."""
    strings: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    env = data.get("env") if isinstance(data, dict) else None
    for table in env.values() if isinstance(env, dict) else ():
        if isinstance(table, dict):
            redact.remember({k: v for k, v in table.items() if isinstance(v, str)})
    redact.remember(values=strings)


def load_path(path: Path) -> Profile:
    return parse(fsio.read_text(path, "profile"), str(path), default_name=path.stem)


def load(name_or_path: str) -> Profile:
    """A profile by name (``isambard``) or path (``envs/isambard.toml``)."""
    as_path = Path(name_or_path)
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        if not as_path.is_file():
            raise BadInput(f"{name_or_path}: no such profile file")
        return load_path(as_path)
    found = available()
    if name_or_path not in found:
        names = ", ".join(found) or "none found"
        raise BadInput(
            f"unknown profile {name_or_path!r}; available: {names} (or give a path to a .toml file)"
        )
    return load_path(found[name_or_path])


def schema_rows() -> list[tuple[str, str, str, str]]:
    """(section.key, type, default, doc) for every declared key."""
    rows = []
    for section, cls in SECTIONS.items():
        types_ = _field_types(cls)
        for f in dataclasses.fields(cls):
            doc = f.metadata["doc"]
            if f.metadata["choices"]:
                doc += f" ({' | '.join(f.metadata['choices'])})"
            default = "{}" if f.default is dataclasses.MISSING else repr(f.default)
            rows.append((f"{section}.{f.name}", _type_name(types_[f.name]), default, doc))
    return rows


__all__ = ["KNOWN_PROBES", "Profile", "available", "load", "parse", "schema_rows"]
