"""The sbatch side of a job: its #SBATCH directives, writing, submitting and waiting.

(What runs in the script is rendered in ``hpcenv.job``: ``job/targets.py`` for probes and
builds, ``job/render.py`` for the user's own command.)

Each cluster asks for GPUs its own way (``--gres=gpu:volta:2`` on SuperCloud,
``--gpus=N`` on BRTX, ``--gpus-per-node=4`` on Isambard), loads its own modules
and needs its own environment (NCCL_NET only when the job spans nodes); the
profile says which, and this module turns it into a script. Every value that
comes from a profile or the command line is quoted (``output.shell_quote``) on shell lines
(``export``, ``module load``, the command), and values that would end an
``#SBATCH`` comment line (newlines, control characters) are refused, so a profile
cannot inject commands into a job.

``#SBATCH`` lines are not shell: sbatch splits them at whitespace, ends them at an
unquoted ``#``, and strips quotes and backslashes itself (``_get_argument`` in
sbatch's opt.c; older releases knew only double quotes and ended the line at a
``#`` even inside them, so shlex's single quotes are not portable). So a profile
value (partition, account, time, GRES type) holding whitespace, a quote, a
backslash or ``#`` is refused with the key to fix; paths (log files, working
directory), which may well hold a space, are written as ``"..."`` with ``\\``,
``"``, ``'`` and ``#`` backslash-escaped, which every version reads back unchanged.

Secret-named variables (``redact.is_secret``: HF_TOKEN, WANDB_API_KEY, ...) are never
written into the script, which is printed and kept next to the logs: the script
reads them from the job's environment, which sbatch copies from the submitting
shell (``--export=ALL`` is its default), and stops with a clear message when one is
missing. ``hpcenv sbatch --submit`` puts the profile's values into sbatch's
environment (``secret_env``), so they reach the job without touching the disk.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcenv.kit import registry
from hpcenv.profile.schema import KNOWN_PROBES, Profile, available
from hpcenv.tools import command
from hpcenv.utils import fsio, redact
from hpcenv.utils.errors import (
    BadInput,
    BuildFailed,
    CommandFailed,
    HpcenvError,
    JobFailed,
    ProbeFailed,
)

TARGETS = ("probe", "build", *KNOWN_PROBES)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The longest job name: the log files ``<name>-<job id>.outcome.json`` stay within a
#: file name's 255 bytes.
MAX_JOB_NAME = 200


def check_job_name(name: str) -> str:
    """``name`` when it is one file name component SLURM keeps as it is: it names the job's
    script and logs (``<log_dir>/<name>-%j.out``), so no ``/``, ``.``/``..`` or control
    character (``../../victim`` wrote outside the log directory) and no ``%`` or ``\\``
    (SLURM's filename patterns: ``run%u`` made SLURM write another log than the watchdog
    watched). Refused, not escaped: the name is also the job's name in ``squeue``."""
    bad = (
        not name
        or name in (".", "..")
        or len(name.encode()) > MAX_JOB_NAME
        or any(c in name for c in "/%\\")
        or _CONTROL.search(name)
        or name != name.strip()
    )
    if bad:
        raise BadInput(
            f"--job-name {name!r}: give one file name of at most {MAX_JOB_NAME} bytes without "
            "'/', '%', '\\', control characters or edge spaces, not '.' or '..' (it names the "
            "job's script and logs in [job] log_dir), e.g. --job-name train-7b"
        )
    return name


#: The most of a job's report.json read back (its tail when larger).
MAX_REPORT_BYTES = 64 << 20
#: Seconds between queue polls while waiting for a job.
POLL_S = 1.0


@dataclass(frozen=True, kw_only=True)
class Job:
    """One rendered job: the script text and where its outputs will be."""

    name: str
    script: str
    log_dir: Path
    output_dir: Path
    nodes: int
    notes: tuple[str, ...] = ()  # for the person submitting: warnings, the effective batch
    venv: str = ""  # the venv the job uses ("" when the job says it itself)
    checks: tuple[str, ...] = ()  # what the job checks on its nodes before the command

    def as_json(self, job_id: str | None = None) -> dict[str, object]:
        """The rendered job as ``hpcenv sbatch --json`` prints it (``job_id`` once
        submitted, else null)."""
        return {
            "name": self.name, "script": self.script, "venv": self.venv or None,
            "checks": list(self.checks), "notes": list(self.notes), "nodes": self.nodes,
            "log_dir": str(self.log_dir), "job_id": job_id,
        }  # fmt: skip

    def report_path(self, job_id: str) -> Path:
        return self.output_dir / job_id / "report.json"

    def outcome_path(self, job_id: str) -> Path:
        """What ended a link other than its command (``--hang-timeout``, ``--requeue-bad``):
        a JSON file the job writes beside its logs, read by ``hpcenv sbatch --wait``."""
        return self.log_dir / f"{self.name}-{job_id}.outcome.json"

    def log_paths(self, job_id: str) -> tuple[Path, Path]:
        return (
            self.log_dir / f"{self.name}-{job_id}.out",
            self.log_dir / f"{self.name}-{job_id}.err",
        )


#: Characters sbatch's directive parser gives a meaning to (splits, quotes, escapes, ends).
_SBATCH_SPECIAL = re.compile(r"""[\s"'\\#]""")


def _plain(value: str, what: str) -> str:
    """A value for an ``#SBATCH`` line: no line breaks (they would end the comment)."""
    if _CONTROL.search(value):
        raise BadInput(f"{what} = {value!r} contains a line break or control character; remove it")
    return value


def _directive(option: str, value: str | int, what: str) -> str:
    """``#SBATCH --option=value`` for a plain value (a name, a number, a time)."""
    text = _plain(str(value), what)
    if _SBATCH_SPECIAL.search(text):
        raise BadInput(
            f"{what} = {text!r} cannot go on an #SBATCH line (sbatch splits it at spaces, "
            f"ends it at '#' and strips quotes and backslashes); write a plain value "
            f"without spaces, quotes, backslashes or '#'"
        )
    return f"#SBATCH --{option}={text}"


def _path_directive(option: str, value: Path, what: str) -> str:
    """``#SBATCH --option="path"``: quoted and escaped the way sbatch reads it back."""
    text = _plain(str(value), what)
    escaped = re.sub(r"""(["'\\#])""", r"\\\1", text)
    return f'#SBATCH --{option}="{escaped}"'


#: The sbatch options people pass every day, declared once: the CLI offers each as
#: ``--OPTION VALUE`` (a profile default where it has one), ``directives`` writes it.
PASSTHROUGH: tuple[tuple[str, str], ...] = (
    ("partition", "partition to submit to (default: [slurm] partition)"),
    ("account", "account to charge (default: [slurm] account)"),
    ("qos", "quality of service (default: [slurm] qos)"),
    ("mem", "memory per node, e.g. 200G"),
    ("exclude", "nodes to leave out, e.g. nid[001-002] (what 'probe nccl --pairs' names)"),
    ("nodelist", "nodes to run on"),
    ("constraint", "node features the job needs"),
    ("reservation", "the reservation to run in"),
    ("mail-type", "when SLURM mails you, e.g. END,FAIL"),
    ("mail-user", "who gets the mail"),
)
#: Of those, the ones a profile sets in [slurm] (the command line wins).
PROFILE_DEFAULTS = ("partition", "account", "qos")
_OPTION_NAME = re.compile(r"--[a-z][a-z0-9-]*")


@dataclass(frozen=True, kw_only=True)
class Request:
    """What one job asks SLURM for beyond the profile: GPUs per node (part of a node),
    the daily options (``PASSTHROUGH``, as given) and raw ``--sbatch-arg`` arguments."""

    gpus: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()

    def option(self, name: str) -> str | None:
        return dict(self.options).get(name)


def gpus_per_node(profile: Profile, gpus: int | None = None) -> int:
    """The GPUs a job takes on each node: ``--gpus`` (at most the node's), else the whole
    node's (0 on a profile that asks for none)."""
    have = profile.platform.gpus_per_node or 0
    if gpus is None:
        return have if profile.slurm.gpu_request != "none" else 0
    where = profile.path or profile.name
    if gpus < 1:
        raise BadInput(f"--gpus {gpus}: must be at least 1 (leave it out for the whole node)")
    if profile.slurm.gpu_request == "none":
        raise BadInput(
            f"--gpus {gpus}: {where} asks for no GPUs ([slurm] gpu_request = 'none'); set "
            "gpu_request to how the cluster wants GPUs asked for"
        )
    if have and gpus > have:
        raise BadInput(
            f"--gpus {gpus}: the nodes of {profile.name} have {have} GPUs "
            f"([platform] gpus_per_node in {where}); ask for {have} or fewer"
        )
    return gpus


def request_directives(profile: Profile, request: Request) -> list[str]:
    """The daily options (the command line's, else the profile's defaults) and the raw
    ``--sbatch-arg`` ones, each checked as an ``#SBATCH`` value."""
    where = profile.path or profile.name
    lines = []
    for name, _ in PASSTHROUGH:
        given = request.option(name)
        if given is not None:
            lines.append(_directive(name, given, f"--{name}"))
        elif name in PROFILE_DEFAULTS and getattr(profile.slurm, name):
            value = getattr(profile.slurm, name)
            lines.append(_directive(name, value, f"{where}: [slurm] {name}"))
    for arg in request.args:
        option, eq, value = arg.partition("=")
        if not _OPTION_NAME.fullmatch(option):
            raise BadInput(
                f"--sbatch-arg {arg!r}: give one sbatch option as --name=value or --flag "
                "(e.g. --sbatch-arg=--exclusive, --sbatch-arg=--gres=nvme:1)"
            )
        if refused := _taken(profile, option):
            raise BadInput(f"--sbatch-arg {arg!r}: {refused}")
        lines.append(
            _directive(option[2:], value, f"--sbatch-arg {arg!r}") if eq else f"#SBATCH {option}"
        )
    return lines


#: hpcenv sbatch's own options that write an #SBATCH line: never twice via --sbatch-arg.
_OPTIONS = ("--job-name", "--nodes", "--ntasks-per-node", "--time", "--cpus-per-task")
#: The lines hpcenv writes from the job's log directory and working directory.
_WRITTEN = ("--output", "--error", "--chdir")


#: sbatch's own options that are the start of another one (sbatch(1)): given whole, they
#: are themselves, not an abbreviation (``--mem`` of ``--mem-per-cpu``).
_WHOLE_PREFIXES = ("--mem", "--gpus", "--gres", "--ntasks", "--time", "--wait", "--export", "--bb")


def _owned(profile: Profile, option: str) -> str:
    """The option hpcenv writes that ``option`` is or abbreviates (sbatch, like getopt,
    takes any unique prefix: ``--ntasks-per-nod`` is ``--ntasks-per-node``); else itself."""
    owned = [f"--{n}" for n, _ in PASSTHROUGH] + [*_OPTIONS, *_WRITTEN]
    owned.append(f"--{profile.slurm.gpu_request}")
    if option in owned or option in _WHOLE_PREFIXES:
        return option
    return next((o for o in owned if len(option) > 3 and o.startswith(option)), option)


def _taken(profile: Profile, given: str) -> str:
    """Why ``given`` cannot come through ``--sbatch-arg`` ("" when it can)."""
    option = _owned(profile, given)
    if option != given:
        return (
            f"{given} abbreviates {option}, which hpcenv writes itself (sbatch takes unique "
            f"prefixes); " + (_taken(profile, option) or f"give {option} in full")
        )
    if option.removeprefix("--") in dict(PASSTHROUGH) or option in _OPTIONS:
        return f"hpcenv sbatch has {option} itself; give {option} VALUE directly"
    if option in _WRITTEN:
        return f"hpcenv writes {option} itself ([job] log_dir, the working directory)"
    if option == f"--{profile.slurm.gpu_request}":
        return f"the GPU request is hpcenv's ([slurm] gpu_request = {option[2:]!r}); use --gpus N"
    return ""


def gpu_directives(profile: Profile, nodes: int, gpus: int | None = None) -> list[str]:
    """The GPU request in the syntax the profile's cluster expects: every GPU of each
    node, or ``gpus`` of them (``--gpus``)."""
    how = profile.slurm.gpu_request
    if how == "none":
        gpus_per_node(profile, gpus)  # refuses --gpus on a profile that asks for none
        return []
    where = profile.path or profile.name
    if not profile.platform.gpus_per_node and gpus is None:
        raise BadInput(
            f"{profile.path or profile.name}: [platform] gpus_per_node is not set but "
            f"[slurm] gpu_request = {how!r} needs it; set gpus_per_node"
        )
    per_node = gpus_per_node(profile, gpus)
    if gpus is not None:
        where = "--gpus"
    if how == "gpus-per-node":
        return [_directive("gpus-per-node", per_node, f"{where}: GPUs per node")]
    if how == "gpus" and gpus is not None and nodes > 1:
        # part of each node: a job total (--gpus=8 on 2 nodes) may be placed 6 + 2, while
        # the launchers start --gpus on every node; per node, as the hostfile says
        return [_directive("gpus-per-node", per_node, f"{where}: GPUs per node")]
    if how == "gpus":  # whole nodes: the total can only be placed evenly
        return [_directive("gpus", per_node * nodes, f"{where}: GPUs per node")]
    _directive("gres", profile.slurm.gres_type, f"{where}: [slurm] gres_type")  # checks it
    gres = f"gpu:{profile.slurm.gres_type}:{per_node}"
    return [_directive("gres", gres, f"{where}: [slurm] gres_type")]


#: Targets that run a multi-rank probe: two gloo ranks on a CPU node, like local runs.
MULTI_RANK_TARGETS = (*sorted(registry.MULTI_RANK), "probe")


def tasks_per_node(
    profile: Profile, override: int | None = None, target: str = "", gpus: int | None = None
) -> int:
    """One task per GPU the job takes on a node; on CPU profiles two for multi-rank
    probes, else one."""
    if override is not None:
        if override < 1:
            raise BadInput(f"--ntasks-per-node {override}: must be at least 1")
        return override
    if per_node := gpus_per_node(profile, gpus):
        return per_node
    return 2 if target in MULTI_RANK_TARGETS else 1


def profile_ref(profile: Profile) -> str:
    """How the job names the profile: by name when that finds this very file (envs/),
    else by its absolute path (a profile file given by path, e.g. ``./mine.toml``)."""
    if profile.path is None:
        return profile.name
    found = available().get(profile.name)
    if found is not None and found.resolve() == profile.path.resolve():
        return profile.name
    return str(profile.path.absolute())


def hpcenv_argv(
    profile: Profile, target: str, venv: str | None, *, pairs: bool = False
) -> list[str]:
    """The hpcenv command the job runs (with this Python, so the job sees this hpcenv).

    With ``venv`` (``--env``) the probes still take their settings (sizes, timeouts,
    modules) from the profile: ``--profile`` names it. ``pairs``: the bad-node finder.
    """
    ref = profile_ref(profile)
    if target == "build":
        return [sys.executable, "-m", "hpcenv", "build", ref]
    return probe_argv_for(ref, [] if target == "probe" else [target], venv, pairs=pairs)


def probe_argv_for(
    ref: str, names: Sequence[str], venv: str | None, *, json: bool = True, pairs: bool = False
) -> list[str]:
    """``hpcenv probe NAMES --env ...`` for the profile ``ref`` (``profile_ref``), in
    ``venv`` when given (the profile still gives the settings: ``--profile``); ``pairs``:
    the bad-node finder."""
    settings = ["--profile", ref] if venv else []
    finder = ["--pairs"] if pairs else []
    out = [sys.executable, "-m", "hpcenv", "probe", *names, "--env", venv or ref, *settings]
    return [*out, *finder, "--json"] if json else [*out, *finder]


def logs_dir(profile: Profile, cwd: Path) -> Path:
    """``[job] log_dir``, relative to the job's working directory."""
    log_dir = Path(profile.job.log_dir)
    return (log_dir if log_dir.is_absolute() else cwd / log_dir).absolute()


def directives(
    profile: Profile,
    *,
    name: str,
    nodes: int,
    ntasks_per_node: int,
    time: str | None,
    log_dir: Path,
    cwd: Path,
    extra: Sequence[tuple[str, str | int, str]] = (),
    request: Request | None = None,
) -> list[str]:
    """The ``#SBATCH`` lines: name, nodes, tasks, the request's options (else the
    profile's partition, account and qos), the walltime (``time`` replaces the
    profile's), the GPU request in the profile's syntax, ``extra`` (option, value, what),
    logs and working directory."""
    s = profile.slurm
    where = profile.path or profile.name
    request = request or Request()
    lines = [
        _directive("job-name", name, "job name"),
        _directive("nodes", nodes, "--nodes"),
        _directive("ntasks-per-node", ntasks_per_node, "ntasks"),
        *request_directives(profile, request),
    ]
    if time:
        lines.append(_directive("time", time, "--time"))
    elif s.time:
        lines.append(_directive("time", s.time, f"{where}: [slurm] time"))
    lines += gpu_directives(profile, nodes, request.gpus)
    lines += [_directive(option, value, what) for option, value, what in extra]
    return [
        *lines,
        _path_directive("output", log_dir / f"{name}-%j.out", f"{where}: [job] log_dir"),
        _path_directive("error", log_dir / f"{name}-%j.err", f"{where}: [job] log_dir"),
        _path_directive("chdir", cwd, "working directory"),
    ]


#: The job's output directory must be its own (not a link, nobody else's, writable by it
#: alone) before its report is written there: in a shared log directory a neighbour could
#: have made ``<jobid>/`` first, with a link at ``report.json`` to a file of yours.
OWN_OUT_DIR = (
    '(umask 022 && mkdir -p -- "$out")',
    'if [ -L "$out" ] || [ ! -O "$out" ] || [ -n "$(find "$out" -maxdepth 0 -perm /022)" ]; then',
    "  echo \"hpcenv: $out is not this job's own directory (a link, another user's, or writable"
    ' by others); not writing its report there" >&2; exit 2',
    "fi",
    'rm -f -- "$out/report.json"',
)


def secret_env(
    profile: Profile, *, nodes: int = 1, extra_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The secret-named variables ``render`` leaves out of the script, with their values:
    the environment ``submit`` must give sbatch so that the job gets them."""
    env = {**profile.env_for(nodes=nodes), **(extra_env or {})}
    return {k: v for k, v in env.items() if redact.holds_secret(k, v)}


def write(job: Job, path: Path | None = None) -> Path:
    """Write the script (next to the logs by default), creating the log and output dirs
    first: SLURM will not create the directory of ``--output`` and the job would
    fail silently without a log."""
    for d in (job.log_dir, job.output_dir):
        try:
            fsio.ensure_dir(d, sticky=True)
        except OSError as exc:
            raise BadInput(f"cannot create {d} ({exc.strerror}); fix job.log_dir") from exc
    # a new file renamed into place: a symlink planted at the name is replaced, never
    # written through (nor its target made executable); the mode follows the umask
    return fsio.write_text(path or job.log_dir / f"{job.name}.sbatch", job.script, executable=True)


def submit(script: Path, *, env: Mapping[str, str] | None = None, text: str | None = None) -> str:
    """``sbatch --parsable``; the job id. With ``text`` (the script ``write`` kept at
    ``script``) sbatch reads the script from its stdin, not from the file: the kept copy
    lies in a directory others may write, and a neighbour who renamed their own script
    over it between the write and sbatch's read would run their code as you."""
    argv = ["sbatch", "--parsable"] if text is not None else ["sbatch", "--parsable", str(script)]
    try:
        done = command.run(argv, env=env, timeout=60, stdin_text=text)
    except CommandFailed as exc:
        raise CommandFailed(
            f"sbatch refused {script}: {exc} (check partition, account and GPU request)",
            returncode=exc.returncode,
            output=exc.output,
        ) from exc
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise CommandFailed(f"sbatch printed {done.stdout.strip()!r}, not a job id", returncode=1)
    return job_id


def job_state(job_id: str, *, env: Mapping[str, str] | None = None) -> str | None:
    """The job's state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``...) or None."""
    done = command.run(["scontrol", "show", "job", job_id], env=env, timeout=30, check=False)
    m = re.search(r"JobState=(\S+)", done.stdout)
    if m:
        return m.group(1)
    done = command.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], env=env, timeout=30, check=False
    )
    state = done.stdout.strip().split()[:1]
    return state[0] if done.returncode == 0 and state else None


def exit_code(job_id: str, *, env: Mapping[str, str] | None = None) -> int | None:
    """The job's exit code (``ExitCode=3:0``: the batch script's), while SLURM still
    knows the job; None when it does not say."""
    done = command.run(["scontrol", "show", "job", job_id], env=env, timeout=30, check=False)
    m = re.search(r"\bExitCode=(\d+):(\d+)", done.stdout)
    if not m:
        return None
    code, signal = int(m.group(1)), int(m.group(2))
    return code if code or not signal else 128 + signal


FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


#: States of a job that has not started (or is stopped): its time limit is not running.
NOT_STARTED = (
    "PENDING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
    "SUSPENDED",
)


def wait(
    job_id: str,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    pending_timeout: float | None = None,
) -> str:
    """Poll until the job has ended; its final state.

    ``timeout`` bounds the time the job is seen started, like SLURM's own time limit:
    the hours a busy cluster keeps it PENDING do not count (``pending_timeout``, None
    for no bound, caps those). Raises ``CommandFailed`` (124) when a bound is passed;
    the job keeps running.
    """
    begun = last = time.monotonic()
    ran = 0.0  # seconds seen in a started state
    state: str | None = None
    while True:
        state = job_state(job_id, env=env)
        now = time.monotonic()
        base = state.split()[0] if state else None
        if state is not None and base in FINAL:
            return state
        if state is None:
            q = command.run(["squeue", "-h", "-j", job_id], env=env, timeout=30, check=False)
            if q.returncode == 0 and not q.stdout.strip():
                return "UNKNOWN"
        queued = base is None or base in NOT_STARTED
        if not queued:
            ran += now - last
        last = now
        if ran > timeout:
            raise CommandFailed(
                f"job {job_id} still {state} after {ran:.0f} s running (bound {timeout:g} s); "
                f"check 'squeue -j {job_id}' (it keeps running)",
                returncode=124,
            )
        if queued and pending_timeout is not None and now - begun - ran > pending_timeout:
            raise CommandFailed(
                f"job {job_id} still {state or 'queued'} after {now - begun - ran:.0f} s in the "
                f"queue; check 'squeue -j {job_id}' (it stays queued)",
                returncode=124,
            )
        time.sleep(POLL_S)


def outcome(
    job_id: str, target: str, state: str, report: dict[str, object] | str | None, *, log: Path
) -> HpcenvError | None:
    """The error a finished job stands for, or None when it completed.

    A failed build job is a failed build (exit 4); a probe job whose report says its
    probes failed is a probe failure (5); any other end (TIMEOUT, CANCELLED, NODE_FAIL,
    OUT_OF_MEMORY, PREEMPTED, or a job that died before writing its report) is a failed
    job (9): the probes did not get to say anything.
    """
    if state.startswith("COMPLETED"):
        return None
    what = f"job {job_id} ended {state}"
    if state.startswith("FAILED") and target == "build":
        return BuildFailed(f"{what}: the build failed; see {log}")
    status = report.get("status") if isinstance(report, dict) else None
    if state.startswith("FAILED") and status in ("fail", "error"):
        return ProbeFailed(f"{what}: probes failed (its report above); see {log}")
    return JobFailed(f"{what} before its work was done; see {log}")


def read_report(job: Job, job_id: str) -> dict[str, object] | str | None:
    """The report the job wrote: parsed JSON, or the raw text when it is not JSON; None
    when there is none. Read by the reading rule (``fsio.read_yours``): a report planted
    by someone else, a link or a FIFO is refused naming it (BadInput)."""
    path = job.report_path(job_id)
    data = fsio.read_yours(path, "job report", limit=MAX_REPORT_BYTES)
    if data is None:
        return None
    text = data.decode("utf-8", errors="replace")
    try:
        parsed = fsio.parse_json(text, str(path))
    except BadInput:
        return text
    return parsed if isinstance(parsed, dict) else {"report": parsed}


def job_owner(job_id: str, *, env: Mapping[str, str] | None = None, tries: int = 3) -> str | None:
    """The user SLURM says owns ``job_id`` (``scontrol``, else ``sacct``), or None when
    neither says after ``tries`` asks a poll apart (a busy controller may not answer)."""
    for attempt in range(tries):
        if attempt:
            time.sleep(POLL_S)
        done = command.run(["scontrol", "show", "job", job_id], env=env, timeout=30, check=False)
        if m := re.search(r"\bUserId=([^(\s]+)\(", done.stdout):
            return m.group(1)
        argv = ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "User"]
        done = command.run(argv, env=env, timeout=30, check=False)
        users = done.stdout.split()[:1]
        if done.returncode == 0 and users:
            return users[0]
    return None
