"""The HTML report (``hpcenv report RESULTS.json --html FILE``, ``--html`` on ``probe``,
``doctor`` and ``sbatch --wait``): one self-contained file, inline SVG, no script, nothing
fetched, so it opens from a job's directory, a CI artifact or a mail.

It reads any of hpcenv's JSON reports (``probe --json``, ``probe --pairs --json``,
``doctor --json``, a job's ``report.json``, ``build --json``) and draws what it holds:

- per node and per pair, the NCCL allreduce sweep: busbw and algbw against message size
  (log scale), one line per probe result (``nccl``, ``nccl node1``, ``nccl node1+node2``),
  the profile's expected bus bandwidth (``probes.nccl_expect_busbw_gbps``) as a dashed line
  where it declares one;
- the bad-node finder's pair matrix (each pair's busbw), the excluded nodes marked;
- the probe table, the build's step timings (the doctor's stages), and the job's
  explanation when it failed.

Reading (the sweeps: ``models/sweep.py``, shared with the terminal's table; the pair
matrix: ``matrix``) is separate from drawing (``render``); every text is escaped, a
Content-Security-Policy lets a browser run and fetch nothing, and the file is written
masked by ``utils/fsio.py``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcenv.models.sweep import Series, number, results_of, series, size_text
from hpcenv.utils import fsio
from hpcenv.utils.errors import BadInput

#: Line colours (Okabe-Ito, readable by colour-blind people), one per series in turn.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
STATUS_COLOUR = {"pass": "#1a7f37", "fail": "#cf222e", "error": "#cf222e", "skip": "#9a6700"}


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """The bad-node finder's pairs: busbw per pair (GB/s), the hosts, the excluded ones."""

    hosts: tuple[str, ...]
    busbw: Mapping[tuple[str, str], float | None]
    status: Mapping[tuple[str, str], str]
    excluded: frozenset[str]
    why: Mapping[str, str]


# --- reading ------------------------------------------------------------------------------


def matrix(report: Mapping[str, Any]) -> Matrix | None:
    """The pair matrix of ``probe --pairs --json`` (its ``pairs`` object), else None."""
    found = report.get("pairs")
    if not isinstance(found, Mapping):
        return None
    nodes = [v for v in found.get("nodes") or () if isinstance(v, Mapping)]
    hosts = tuple(str(v.get("host")) for v in nodes)
    busbw: dict[tuple[str, str], float | None] = {}
    status: dict[tuple[str, str], str] = {}
    for p in found.get("pairs") or ():
        if not isinstance(p, Mapping) or len(p.get("hosts") or ()) != 2:
            continue
        a, b = (str(h) for h in p["hosts"])
        for key in ((a, b), (b, a)):
            busbw[key] = number(p.get("busbw_gbps"))
            status[key] = str(p.get("status", ""))
    return Matrix(
        hosts=hosts,
        busbw=busbw,
        status=status,
        excluded=frozenset(str(v.get("host")) for v in nodes if v.get("exclude")),
        why={str(v.get("host")): str(v.get("why", "")) for v in nodes},
    )


# --- drawing ------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _nice_top(value: float) -> float:
    """The axis' top: 1, 2 or 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= value)


W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 320, 64, 28, 16, 44


def chart(all_series: Sequence[Series], *, metric: str, expected_gbps: float | None = None) -> str:
    """One SVG line chart: ``metric`` (``busbw`` or ``algbw``, GB/s) against message size
    on a log2 axis, a polyline and a circle per point for each series, a legend."""
    pts = [p for s in all_series for p in s.points]
    lo = min(p.nbytes for p in pts)
    hi = max(p.nbytes for p in pts)
    x0, x1 = math.log2(lo), max(math.log2(hi), math.log2(lo) + 1)
    values = [getattr(p, f"{metric}_gbps") for p in pts]
    top = _nice_top(max([*values, expected_gbps or 0.0]) * 1.05)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(nbytes: float) -> float:
        return LEFT + (math.log2(nbytes) - x0) / (x1 - x0) * plot_w

    def y(gbps: float) -> float:
        return TOP + plot_h - gbps / top * plot_h

    parts = [
        f'<svg class="chart" data-metric="{metric}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{metric} against message size">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#bbb"/>',
    ]
    for i in range(5):  # y grid
        v = top * i / 4
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="#eee"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" '
            f'font-size="11">{v:.3g}</text>'
        )
    step = max(1, math.ceil((x1 - x0) / 8))
    for e in range(math.ceil(x0), math.floor(x1) + 1, step):  # x ticks at powers of two
        parts.append(
            f'<line x1="{x(2**e):.1f}" x2="{x(2**e):.1f}" y1="{TOP + plot_h}" '
            f'y2="{TOP + plot_h + 4}" stroke="#666"/><text class="xtick" x="{x(2**e):.1f}" '
            f'y="{TOP + plot_h + 16}" text-anchor="middle" font-size="11">{size_text(2**e)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{H - 6}" text-anchor="middle" font-size="12">'
        f'message size (bytes, log scale)</text><text x="14" y="{TOP + plot_h / 2}" '
        f'text-anchor="middle" font-size="12" transform="rotate(-90 14 {TOP + plot_h / 2})">'
        f"{metric} GB/s</text>"
    )
    if expected_gbps:
        parts.append(
            f'<line class="expected" x1="{LEFT}" x2="{W - RIGHT}" y1="{y(expected_gbps):.1f}" '
            f'y2="{y(expected_gbps):.1f}" stroke="#555" stroke-dasharray="6 4"/>'
            f'<text x="{W - RIGHT - 4}" y="{y(expected_gbps) - 4:.1f}" text-anchor="end" '
            f'font-size="11">expected {expected_gbps:g} GB/s</text>'
        )
    for i, s in enumerate(all_series):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(
            f"{x(p.nbytes):.1f},{y(getattr(p, metric + '_gbps')):.1f}" for p in s.points
        )
        parts.append(
            f'<g class="series" data-series="{_e(s.label)}"><polyline points="{coords}" '
            f'fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for p in s.points:
            value = getattr(p, f"{metric}_gbps")
            parts.append(
                f'<circle cx="{x(p.nbytes):.1f}" cy="{y(value):.1f}" r="3" fill="{colour}">'
                f"<title>{_e(s.label)}: {size_text(p.nbytes)} {value:g} GB/s "
                f"({p.time_us:g} us)</title></circle>"
            )
        parts.append("</g>")
        ly = TOP + 14 + 16 * i
        parts.append(
            f'<g class="legend"><rect x="{LEFT + 10}" y="{ly - 9}" width="12" height="4" '
            f'fill="{colour}"/><text x="{LEFT + 28}" y="{ly - 4}" font-size="11">'
            f"{_e(s.label)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def sweep_table(s: Series) -> str:
    """The numbers behind a series, as nccl-tests prints them."""
    rows = "".join(
        f"<tr><td>{size_text(p.nbytes)}</td><td>{p.time_us:g}</td><td>{p.algbw_gbps:g}</td>"
        f"<td>{p.busbw_gbps:g}</td></tr>"
        for p in s.points
    )
    return (
        f"<details><summary>{_e(s.label)} ({_e(', '.join(s.hosts))}): {len(s.points)} sizes"
        '</summary><table class="sweep"><tr><th>size</th><th>time us</th><th>algbw GB/s</th>'
        f"<th>busbw GB/s</th></tr>{rows}</table></details>"
    )


def _cell_colour(value: float | None, best: float) -> str:
    if value is None or best <= 0:
        return "#f6f8fa"
    share = max(0.0, min(1.0, value / best))  # red (slow) .. green (the best pair)
    return f"hsl({int(share * 120)}, 65%, 80%)"


def matrix_table(m: Matrix) -> str:
    """Each pair's busbw in a host-by-host table; an excluded node's row and column
    marked (class ``excluded``), with why."""
    best = max((v for v in m.busbw.values() if v is not None), default=0.0)
    head = "".join(
        f'<th class="{"excluded" if h in m.excluded else ""}">{_e(h)}</th>' for h in m.hosts
    )
    rows = []
    for a in m.hosts:
        cells = []
        for b in m.hosts:
            if a == b:
                cells.append('<td class="self">-</td>')
                continue
            value = m.busbw.get((a, b))
            mark = " excluded" if a in m.excluded or b in m.excluded else ""
            text = "not paired" if (a, b) not in m.busbw else (
                f"{value:.3g}" if value is not None else m.status.get((a, b), "?")
            )  # fmt: skip
            cells.append(
                f'<td class="pair{mark}" style="background:{_cell_colour(value, best)}" '
                f'title="{_e(a)} + {_e(b)}: {_e(m.status.get((a, b), ""))}">{_e(text)}</td>'
            )
        flag = ' class="excluded"' if a in m.excluded else ""
        rows.append(f"<tr><th{flag}>{_e(a)}</th>{''.join(cells)}</tr>")
    why = "".join(
        f'<li class="{"excluded" if h in m.excluded else "kept"}"><b>{_e(h)}</b>: '
        f"{'exclude' if h in m.excluded else 'ok'}, {_e(m.why.get(h, ''))}</li>"
        for h in m.hosts
    )
    return (
        '<table class="pairs"><tr><th>busbw GB/s</th>'
        f"{head}</tr>{''.join(rows)}</table><ul>{why}</ul>"
    )


def probe_table(results: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in results:
        status = str(r.get("status", ""))
        seconds = number(r.get("seconds"))
        remedy = str(r.get("remedy", "")) if status != "pass" else ""
        rows.append(
            f'<tr class="{_e(status)}"><td>{_e(r.get("name", ""))}</td>'
            f'<td style="color:{STATUS_COLOUR.get(status, "#000")}"><b>{_e(status)}</b></td>'
            f"<td>{'' if seconds is None else f'{seconds:.1f}s'}</td>"
            f"<td>{_e(r.get('summary', ''))}</td><td>{_e(remedy)}</td></tr>"
        )
    return (
        '<table class="probes"><tr><th>probe</th><th>status</th><th>time</th><th>summary</th>'
        f"<th>remedy</th></tr>{''.join(rows)}</table>"
    )


def timings(report: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """The build's steps (``build --json``'s ``steps``) or the doctor's stages, each with
    its seconds."""
    out = []
    for key, name in (("stages", "stage"), ("steps", "step")):
        for s in report.get(key) or ():
            if isinstance(s, Mapping) and (seconds := number(s.get("seconds"))) is not None:
                out.append(
                    (str(s.get(name, "")), str(s.get("summary", s.get("what", ""))), seconds)
                )
    return out


def timing_bars(rows: Sequence[tuple[str, str, float]]) -> str:
    """One bar per step, its length its share of the longest."""
    longest = max((t for _, _, t in rows), default=0.0) or 1.0
    height = 22 * len(rows) + 8
    bars = "".join(
        f'<g class="step"><text x="0" y="{22 * i + 18}" font-size="12">{_e(name)}</text>'
        f'<rect x="120" y="{22 * i + 6}" width="{max(1.0, t / longest * 420):.1f}" height="14" '
        f'fill="#0072B2"><title>{_e(what)}</title></rect><text x="{126 + t / longest * 420:.1f}" '
        f'y="{22 * i + 18}" font-size="12">{t:.1f} s</text></g>'
        for i, (name, what, t) in enumerate(rows)
    )
    return (
        f'<svg class="timings" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 640 {height}" '
        f'width="640" height="{height}">{bars}</svg>'
    )


def explanation(report: Mapping[str, Any]) -> str:
    ex = report.get("explanation")
    if not isinstance(ex, Mapping):
        return ""
    lines = [("cause", ex.get("cause")), ("fix", ex.get("fix"))]
    ev = ex.get("evidence")
    if isinstance(ev, Mapping):
        where = f"{ev.get('file')}:{ev.get('line')}"
        lines.insert(1, ("evidence", f"{where}: {str(ev.get('text', '')).strip()}"))
    lines += [("note", n) for n in ex.get("notes") or ()]
    if ex.get("source"):
        lines.append(("known from", ex.get("source")))
    body = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in lines if v)
    return f'<section class="explanation"><h2>What the job died of</h2><dl>{body}</dl></section>'


#: Nothing runs, nothing is fetched: a browser refuses (and logs) any script or request.
CSP = "default-src 'none'; style-src 'unsafe-inline'"

STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#1f2328;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top;font-size:13px}th.excluded,li.excluded{color:#cf222e}
td.pair.excluded{outline:2px solid #cf222e;outline-offset:-2px}td.self{color:#999}
.charts{display:flex;flex-wrap:wrap;gap:16px}dt{font-weight:bold}dd{margin:0 0 6px 16px}
.meta{color:#57606a;font-size:13px}
"""


def render(
    report: Mapping[str, Any], *, title: str, expected_busbw_gbps: float | None = None
) -> str:
    """The whole page: what ``report`` holds, each part only where it has data."""
    status = str(report.get("status", ""))
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    meta = [f"{k}: {report[k]}" for k in ("profile", "env", "status", "job_id") if report.get(k)]
    if meta:
        parts.append(f'<p class="meta">{_e("; ".join(meta))}</p>')
    parts.append(explanation(report))
    found = series(report)
    if found:
        parts.append('<section class="nccl"><h2>NCCL allreduce: bandwidth against message size'
                     '</h2><div class="charts">')  # fmt: skip
        parts.append(chart(found, metric="busbw", expected_gbps=expected_busbw_gbps))
        parts.append(chart(found, metric="algbw"))
        parts.append("</div>" + "".join(sweep_table(s) for s in found) + "</section>")
    if (m := matrix(report)) is not None and m.hosts:
        parts.append('<section class="matrix"><h2>Bad-node finder: busbw of each pair</h2>')
        parts.append(matrix_table(m) + "</section>")
    if results := results_of(report):
        parts.append(f"<section><h2>Probes ({_e(status)})</h2>{probe_table(results)}</section>")
    if rows := timings(report):
        parts.append(f"<section><h2>Timings</h2>{timing_bars(rows)}</section>")
    parts.append("</body></html>\n")
    return "".join(parts)


def check_path(path: Path) -> Path:
    """Refuse an ``--html`` path that cannot be written before any slow work."""
    if path.is_dir():
        raise BadInput(f"--html {path}: is a directory; give a file name (e.g. {path}/report.html)")
    fsio.check_dir(path.parent)
    return path


def write(
    path: Path,
    report: Mapping[str, Any],
    *,
    title: str,
    expected_busbw_gbps: float | None = None,
) -> Path:
    return fsio.write_text(
        path, render(report, title=title, expected_busbw_gbps=expected_busbw_gbps)
    )
