"""Terminal output several commands share: the two consoles, the facts, profile, probe
result and stage tables, and the status styles. A table only one command prints (plan,
resolve, preflight, archs, audit) is in that command's module; scripts get JSON from the
commands themselves; JUnit XML is written by ``junit.py``.

The two consoles are the printers' exits, and they do two things once, for every
string that reaches them (table cells, titles, messages):

- **no markup**: rich markup is off, so a value is always shown as it is (a GPU named
  ``[/bold]`` cannot crash a table, ``ray[default]`` stays ``ray[default]``); styles
  come from ``styled`` / ``Text`` and ``style=`` arguments, never from text;
- **masking**: every text is masked (``redact.text``) before it is laid out, so a
  secret cannot reach the terminal, not even split over two lines of a table cell.

Table cells fold rather than end in an ellipsis: a long value is shown whole. When the
output is not a terminal (a job log), the probe and stage reports are laid out one line
per probe or stage with details indented beneath, unwrapped (``for_log``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from hpcenv.kit import registry
from hpcenv.models import sweep
from hpcenv.models.facts import Facts
from hpcenv.utils import redact
from hpcenv.utils.output import visible


class MaskingConsole(Console):
    """A rich console that never parses markup and masks every text it renders."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, highlight=False, emoji=False, **kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if isinstance(renderable, Table):  # a long value wraps, never ends in "..."
            for column in renderable.columns:
                if column.overflow == "ellipsis":
                    column.overflow = "fold"
        if isinstance(renderable, str):
            renderable = visible(redact.text(renderable))
        elif isinstance(renderable, Text):
            masked = visible(redact.text(renderable.plain))
            if masked != renderable.plain:
                renderable = Text(masked, style=renderable.style, justify=renderable.justify)
        return super().render(renderable, options)


console = MaskingConsole()
err_console = MaskingConsole(stderr=True)


class BuildProgress:
    """A build's steps on stderr (``hpcenv.build.builder.Progress``), through
    ``ui/progress.py``: a spinner with the elapsed time on a terminal, then a ✓ line; in a
    log a line as each step starts and ends, and one per interval while a long one (a
    flash-attn compile) runs."""

    @contextlib.contextmanager
    def running(self, what: str) -> Iterator[None]:
        from hpcenv.ui import progress

        with progress.Progress(err_console, transient=True) as shown:
            shown.task(what)
            yield

    def finished(self, what: str, seconds: float) -> None:
        if err_console.is_terminal:  # a log had the step's last line already
            err_console.print(
                Text("✓", style="green"), what, Text(f"({seconds:.1f} s)", style="dim")
            )


def styled(value: object, style: str) -> Text:
    """``value`` as text in ``style`` (never parsed as markup)."""
    return Text(str(value), style=style)


def _fmt(value: Any) -> str | Text:
    if value is None:
        return styled("unknown", "dim")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else styled("none", "dim")
    return str(value)


def _plain(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def print_facts(facts: Facts, out: Console | None = None) -> None:
    out = out or console
    table = Table(
        title=f"facts: {facts.hostname or '?'} ({facts.source or 'this host'})",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("arch", _fmt(facts.arch))
    table.add_row("glibc", _fmt(facts.glibc))
    table.add_row("python", _fmt(facts.python))
    table.add_row("cpus", _fmt(facts.cpus))
    table.add_row("memory", f"{facts.memory_gib} GiB" if facts.memory_gib else _fmt(None))
    nv = facts.nvidia
    if nv is None:
        table.add_row("nvidia", "no NVIDIA driver")
    else:
        table.add_row(
            "driver",
            f"{nv.driver_version} (CUDA <= {_plain(nv.cuda_driver_version)}, "
            f"from {nv.source or '?'})",
        )
        for g in nv.gpus:
            mem = f"{g.memory_mib} MiB" if g.memory_mib is not None else "? MiB"
            cell = Text(f"{g.name}, sm {g.compute_capability or 'unknown'}, {mem}")
            if g.ecc_uncorrected:
                cell.append(f", {g.ecc_uncorrected} uncorrected ECC", style="red")
            table.add_row(f"gpu {g.index}", cell)
    sl = facts.slurm
    table.add_row(
        "slurm",
        "not in an allocation"
        if sl is None
        else f"job {sl.job_id} on {_plain(list(sl.hosts) or sl.nodelist)}, "
        f"{_plain(sl.ntasks)} tasks, gpus {_plain(sl.gpus)}",
    )
    net = facts.network
    table.add_row(
        "libfabric",
        "fi_info not found" if net.libfabric_providers is None else _fmt(net.libfabric_providers),
    )
    table.add_row(
        "nccl net plugin",
        _fmt(net.nccl_net_plugin) if net.nccl_net_plugin else styled("none found", "dim"),
    )
    table.add_row("modules", _fmt(facts.modules))
    for warning in facts.warnings:
        table.add_row(styled("warning", "yellow"), styled(warning, "yellow"))
    out.print(table)


def print_profiles(rows: Iterable[Mapping[str, Any]], out: Console | None = None) -> None:
    out = out or console
    table = Table(title="profiles", title_justify="left")
    for col in ("name", "valid", "description / error", "file"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["name"],
            styled("yes", "green") if r["ok"] else styled("no", "red"),
            r["description"] if r["ok"] else styled(r["error"], "red"),
            r["path"],
        )
    out.print(table)


def print_schema(rows: Sequence[tuple[str, str, str, str]], out: Console | None = None) -> None:
    out = out or console
    table = Table(title="profile keys (envs/<name>.toml)", title_justify="left")
    for col in ("key", "type", "default", "meaning"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    out.print(table)


def print_profile(p: Any, out: Console | None = None) -> None:
    """One validated profile, section by section (secret-named env values masked whole)."""
    out = out or console
    table = Table(title=f"profile {p.name} ({p.path})", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for section in (
        "profile",
        "platform",
        "torch",
        "packages",
        "flash_attn",
        "fixes",
        "modules",
        "slurm",
        "job",
        "probes",
    ):
        for k, v in vars(getattr(p, section)).items():
            table.add_row(f"{section}.{k}", _fmt(v) if v not in ("", ()) else styled("-", "dim"))
    for scope in ("always", "multi_node"):
        for k, v in redact.env(getattr(p.env, scope)).items():  # by name, however short
            table.add_row(f"env.{scope}.{k}", v)
    out.print(table)


# --- probe results ----------------------------------------------------------------------

STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red bold", "skip": "yellow"}


def status_text(status: str) -> Text:
    """A status word in its colour."""
    return styled(status, STATUS_STYLE.get(status, ""))


def _metric(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def probe_metrics_text(name: str, metrics: Mapping[str, Any]) -> str:
    info = registry.get(name)
    keys = [k for k in (info.key_metrics if info else ()) if k in metrics]
    return ", ".join(f"{k}={_metric(metrics[k])}" for k in keys)


def for_log(out: Console) -> bool:
    """``out`` is not a terminal (a job log, a pipe): reports are laid out one line per
    probe or check with details indented beneath, never squeezed into a table."""
    return not out.is_terminal


def print_log(out: Console, title: str, items: Iterable[tuple[str, Sequence[str]]]) -> None:
    """``title``, then each item's line and its details indented beneath, unwrapped."""
    out.print(title, soft_wrap=True)
    for line, details in items:
        out.print(f"  {line}", soft_wrap=True)
        for d in details:
            out.print(f"      {d}", soft_wrap=True)


def _probe_log_items(results: Sequence[Any]) -> Iterable[tuple[str, Sequence[str]]]:
    for r in results:
        status = r.status.value
        details = []
        if metrics := probe_metrics_text(r.name, r.metrics):
            details.append(f"metrics: {metrics}")
        if r.remedy and status != "pass":
            details.append(f"remedy: {r.remedy}")
        if len({(x.status, x.summary) for x in r.ranks}) > 1:
            for rank in r.ranks:
                if rank.status.failed:
                    details.append(
                        f"rank {rank.rank} {rank.status.value}: {rank.host}: {rank.summary}"
                    )
                    if rank.remedy:
                        details.append(f"  remedy: {rank.remedy}")
        yield f"{r.name}: {status} ({r.seconds:.1f}s) {r.summary}", details


def print_probe_results(
    results: Sequence[Any], *, title: str = "probes", out: Console | None = None
) -> None:
    """One row per probe (and per failing rank of a multi-rank probe); in a log (not a
    terminal) one line per probe, its metrics, remedy and failing ranks beneath."""
    out = out or console
    if for_log(out):
        print_log(out, title, _probe_log_items(results))
    else:
        _probe_table(results, title=title, out=out)
    print_sweeps(sweep.series({"results": [r.serialize() for r in results]}), out=out)


def print_sweeps(found: Sequence[sweep.Series], out: Console | None = None) -> None:
    """Each NCCL sweep of more than one size, per size: size, time, algbw, busbw, #wrong
    (nccl-tests' columns). A compact table on a terminal; in a log, nccl-tests' own
    fixed-width lines under a title."""
    out = out or console
    for s in found:
        if len(s.points) < 2:  # a pair's one size is in the pairs table
            continue
        title = f"{s.label} allreduce sweep ({', '.join(s.hosts)})"
        if for_log(out):
            lines = [f"{'size':>8} {'time us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11} #wrong"]
            lines += [
                f"{sweep.size_text(p.nbytes):>8} {p.time_us:>12.2f} {p.algbw_gbps:>11.4g} "
                f"{p.busbw_gbps:>11.4g} {p.wrong}"
                for p in s.points
            ]
            print_log(out, title, ((line, ()) for line in lines))
            continue
        table = Table(title=title, title_justify="left", box=None, pad_edge=False)
        for col in ("size", "time us", "algbw GB/s", "busbw GB/s", "#wrong"):
            table.add_column(col, justify="right")
        for p in s.points:
            table.add_row(
                sweep.size_text(p.nbytes),
                f"{p.time_us:.2f}",
                f"{p.algbw_gbps:.4g}",
                f"{p.busbw_gbps:.4g}",
                styled(p.wrong, "red bold") if p.wrong else str(p.wrong),
            )
        out.print(table)


def _probe_table(results: Sequence[Any], *, title: str, out: Console) -> None:
    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("probe", "status", "time", "summary", "metrics", "remedy"):
        table.add_column(col, overflow="fold")
    for r in results:
        status = r.status.value
        table.add_row(
            r.name,
            status_text(status),
            f"{r.seconds:.1f}s",
            r.summary,
            probe_metrics_text(r.name, r.metrics),
            r.remedy if status != "pass" else "",
            end_section=False,
        )
        if len({(x.status, x.summary) for x in r.ranks}) > 1:  # ranks differ: name them
            for rank in r.ranks:
                if rank.status.failed:
                    table.add_row(
                        f"  rank {rank.rank}",
                        status_text(rank.status.value),
                        "",
                        f"{rank.host}: {rank.summary}",
                        "",
                        rank.remedy,
                    )
    out.print(table)


def print_pairs(pairs: Mapping[str, Any], out: Console | None = None) -> None:
    """The bad-node finder's verdict (``hpcenv.slurm.pairs``): each pair's busbw, each
    node's best pair and verdict, then the ready ``--exclude=`` option."""
    out = out or console
    table = Table(title="pairs (busbw at the largest size)", title_justify="left")
    for col in ("round", "pair", "status", "busbw GB/s", "time", "summary"):
        table.add_column(col, overflow="fold")
    for p in pairs.get("pairs", []):
        table.add_row(
            str(p["round"]),
            " + ".join(p["hosts"]),
            status_text(str(p["status"])),
            _metric(p["busbw_gbps"]),
            f"{float(p['seconds']):.1f}s",
            str(p["summary"]) if p["status"] != "pass" else "",
        )
    out.print(table)
    nodes = Table(title="nodes, best pair first", title_justify="left")
    for col in ("node", "check", "best busbw GB/s", "verdict", "why"):
        nodes.add_column(col, overflow="fold")
    for v in sorted(pairs.get("nodes", []), key=lambda v: -(v["best_busbw_gbps"] or 0.0)):
        best = v["best_busbw_gbps"]
        nodes.add_row(
            str(v["host"]),
            status_text(str(v["check"])),
            _metric(best) if best is not None else "-",
            styled("exclude", "red bold") if v["exclude"] else styled("ok", "green"),
            str(v["why"]),
        )
    out.print(nodes)
    option = pairs.get("exclude_option")
    if option:
        out.print(styled("exclude these nodes:", "red bold"), str(option))
    else:
        out.print(styled("no node to exclude", "green"), f"({pairs.get('rule', '')})")


def print_stages(
    stages: Sequence[Mapping[str, Any]], *, title: str, out: Console | None = None
) -> None:
    """The doctor's stages (facts, plan, build): status, time, one-line summary (in a
    log: one line per stage)."""
    out = out or console
    if for_log(out):
        items = (
            (f"{s['stage']}: {s['status']} ({float(s['seconds']):.1f}s) {s['summary']}", ())
            for s in stages
        )
        print_log(out, title, items)
        return
    table = Table(title=title, title_justify="left")
    for col in ("stage", "status", "seconds", "summary"):
        table.add_column(col)
    for s in stages:
        table.add_row(
            str(s["stage"]),
            status_text(str(s["status"])),
            f"{float(s['seconds']):.1f}",
            str(s["summary"]),
        )
    out.print(table)
