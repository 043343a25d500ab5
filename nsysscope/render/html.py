"""HTML: one self-contained page per report (``nsysscope report --format html``) or gate
(``nsysscope gate --format html``), and a fragment for Jupyter's ``_repr_html_``.

A page holds everything it shows: the CSS is inline and every figure is a base64 PNG in a
``data:`` URI, so it can be attached to a CI run or a bug report and opened anywhere, offline.
A figure that fails to draw becomes a short note on the page, never a missing report.
"""

from __future__ import annotations

import base64
import io
import os
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..model import Summary
from .text import header, metrics_rows
from .units import us

#: the class colours of :mod:`nsysscope.plot` (Okabe-Ito), repeated here so that rendering
#: text never needs matplotlib
_CLASS_COLORS = {
    "healthy": "#009E73", "gpu_to_cpu": "#D55E00", "cpu_to_gpu": "#E69F00",
    "other_stall": "#CC79A7", "launch_bound": "#000000", "last": "#999999",
    "no_gpu_work": "#999999",
}
_OK, _BAD = "#009E73", "#D55E00"
_DPI = 100

_CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
  color:#1b1b1b;background:#fff;margin:0}
main{max-width:1320px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:18px;margin:30px 0 8px;
  border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
.sub{color:#555;font-size:12.5px;word-break:break-all}
.verdict{border-left:8px solid;padding:10px 14px;margin:14px 0;font-size:16px;font-weight:600}
.verdict.ok{border-color:#009E73;background:#E6F5F0}.verdict.bad{border-color:#D55E00;
  background:#FBEDE5}
table{border-collapse:collapse;margin:6px 0}td,th{padding:4px 10px;border-bottom:1px solid
  #e3e3e3;text-align:left;vertical-align:top}th{background:#f4f4f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12.5px/1.3 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f3f3;
  padding:1px 4px;border-radius:3px}
.chip{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;
  font-weight:600;white-space:nowrap}.chip.light{color:#000}
.site{border:1px solid #ddd;border-left:6px solid;border-radius:4px;padding:8px 14px;margin:10px 0}
.site dl{display:grid;grid-template-columns:110px 1fr;gap:3px 12px;margin:6px 0 0}
.site dt{color:#555}.site dd{margin:0}
figure{margin:8px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #e5e5e5}
figcaption{color:#444;font-size:13px;margin-top:4px;max-width:1100px}
.note{color:#555}.fail{color:#D55E00;font-weight:600}.pass{color:#009E73;font-weight:600}
.improved{color:#0072B2;font-weight:600}ul{margin:4px 0}
footer{color:#777;font-size:12px;margin-top:36px;border-top:1px solid #e5e5e5;padding-top:8px}
"""


# -- pieces ------------------------------------------------------------------------------------

def figure_png(fig, dpi: int = _DPI) -> bytes:
    """A matplotlib figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _figure(make: Callable[[], Any], alt: str, caption: str = "") -> str:
    """A ``<figure>`` with the PNG of ``make()``, or a note saying why there is none."""
    try:
        fig = make()
        body = _img(figure_png(fig), alt)
    except Exception as e:  # noqa: BLE001 - a broken figure must not lose the report
        if os.environ.get("NSYSSCOPE_DEBUG"):
            raise
        body = f'<p class="note">(figure not drawn: {escape(type(e).__name__)}: {escape(str(e))})</p>'
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f"<figure>{body}{cap}</figure>"


def chip(klass: str) -> str:
    color = _CLASS_COLORS.get(klass, "#777777")
    light = " light" if klass in ("cpu_to_gpu",) else ""
    return f'<span class="chip{light}" style="background:{color}">{escape(klass)}</span>'


def _verdict(s: Summary) -> str:
    cls = "ok" if s.overlap_ok else "bad"
    return f'<div class="verdict {cls}">{escape(s.verdict)}</div>'


def _metrics_table(s: Summary) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in metrics_rows(s))
    return f"<table>{rows}</table>"


def _site_card(i: int, site) -> str:
    color = _CLASS_COLORS.get(site.klass, "#777777")
    head = (f"<h3>#{i} {chip(site.klass)} {site.count} launch{'es' if site.count != 1 else ''}, "
            f"{escape(us(site.lost_us))} GPU idle")
    if site.share:
        head += f" ({site.share:.0%} of the stalls)"
    head += f" &mdash; {escape(site.where)}</h3>"
    rows = []
    if site.source:
        src = site.source
        text = f" <code>{escape(src.text.strip())}</code>" if src.text else ""
        rows.append(("source line", f"<code>{escape(src.file)}:{src.line}</code> in "
                     f"<code>{escape(src.function)}</code>{text} ({src.samples} Python samples, "
                     f"{src.agreement:.0%} of those inside the blocks)"))
    if site.api_chain:
        rows.append(("API chain", f"<code>{escape(site.api_chain)}</code> "
                                  f"(mean block {escape(us(site.mean_block_us))})"))
    rows.append(("NVTX", f"<code>{escape(site.nvtx_path or '-')}</code>"))
    rows.append(("thread", escape(site.thread)))
    rows.append(("example", f"launch {site.example_launch} "
                            f"(<code>t.launches.loc[{site.example_launch}]</code> in a notebook)"))
    rows.append(("fix", f"<strong>{escape(site.fix)}</strong>"))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<div class="site" style="border-left-color:{color}">{head}<dl>{dl}</dl></div>'


def _sites(s: Summary) -> str:
    if not s.sites:
        return '<p class="note">No stall sites and no launch-bound gaps in the steady state.</p>'
    return "".join(_site_card(i, site) for i, site in enumerate(s.sites, 1))


def _notes(notes) -> str:
    if not notes:
        return '<p class="note">None.</p>'
    return "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"


def _page(title: str, body: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n"
            f"<body><main>\n{body}\n<footer>nsysscope {escape(__version__)} &middot; {stamp} "
            f"&middot; a self-contained page: every figure is embedded</footer></main></body>"
            f"</html>\n")


def _name(path: str) -> str:
    return Path(str(path).replace("\\", "/")).name


_TIMELINE_HELP = (
    "How to read it: one lane per host thread (its NVTX ranges, then its CUDA API calls), one "
    "per GPU stream (graph replays in dark blue, eager kernels and copies in light blue). A "
    "host wait is coloured by what it did to the launch it waited on: "
    "<span style='color:#009E73'>green</span> the GPU still had queued work after it (healthy), "
    "<span style='color:#D55E00'>vermillion</span> a GPU&rarr;CPU readback stall, "
    "<span style='color:#B07800'>orange</span> a pageable CPU&rarr;GPU copy stall, "
    "<span style='color:#CC79A7'>purple</span> another stall. The bracket under the API lane is "
    "the overlap window, from the end of the launch call to the wait on it; hatched spans on the "
    "GPU lane are idle time, tinted by the stall that caused them. Dotted arrows join each "
    "<code>cudaGraphLaunch</code> to its replay.")


# -- the report --------------------------------------------------------------------------------

def report(analysis) -> str:
    """The whole report of one analysed trace as one self-contained HTML page."""
    from ..plot import TracePlots  # matplotlib only when a page with figures is asked for

    s = analysis.summary
    plots = TracePlots(analysis)
    name = _name(s.trace.path)
    parts = [f"<h1>nsysscope report: {escape(name)}</h1>",
             f'<div class="sub">{escape(header(s))}</div>', _verdict(s),
             "<h2>Summary (steady state, warm-up excluded)</h2>", _metrics_table(s),
             "<h2>Top stall sites (and launch-bound gaps), most GPU idle time first</h2>",
             _sites(s)]

    has_stall = bool(analysis.launches["stall"].any()) if len(analysis.launches) else False
    worst_title = "Timeline: the worst stall" if has_stall else \
        "Timeline: the longest GPU gap (this trace has no stalls)"
    parts.append(f"<h2>{worst_title}</h2>")
    parts.append(_timeline(plots, "worst", _TIMELINE_HELP))
    parts.append("<h2>Timeline: a typical step</h2>")
    parts.append(_timeline(plots, "typical", "The launch whose GPU idle gap is the median of the "
                                             "steady state, drawn like the one above."))
    parts.append("<h2>Distributions</h2>")
    parts.append(_figure(plots.distributions, "CDFs of the overlap window and GPU idle gap per "
                         "class",
                         "Per steady-state launch: the overlap window (how long the host worked "
                         "ahead before waiting on the launch) and the GPU idle gap after its "
                         "replay, one curve per class; each curve ends at that class's share of "
                         "the launches. A healthy engine has windows of about a step and gaps of "
                         "tens of microseconds."))
    parts.append(_figure(plots.series, "per-launch series over the capture",
                         "The same values per launch over time: warm-up (shaded), intermittent "
                         "stalls and the steady state. Long captures are thinned, with a binned "
                         "median and min-max band so no outlier is hidden."))
    parts.append("<h2>Notes</h2>")
    parts.append(_notes(s.notes))
    cfg = ", ".join(f"{k}={v}" for k, v in s.config.items())
    parts.append(f'<p class="note">Analysis settings: <code>{escape(cfg)}</code></p>')
    return _page(f"nsysscope: {name}", "\n".join(parts))


def _timeline(plots, which: str, help_html: str) -> str:
    """The timeline of the ``which`` launch; its one-line story goes in the alt text too."""
    alt = f"timeline of the {which} launch"
    try:
        from ..plot import pick_launch
        focus = pick_launch(plots.analysis.launches, which)
        if focus is not None:
            alt += ": " + plots.caption(focus)
    except Exception:  # noqa: BLE001 - the figure itself reports the error
        pass
    return _figure(lambda: plots.timeline(which=which), alt, help_html)


_TD = 'style="padding:2px 10px;text-align:left;border-bottom:1px solid #e5e5e5;font-size:13px"'
_TH = ('style="padding:2px 10px;text-align:left;background:#f4f4f4;border-bottom:1px solid '
       '#e5e5e5;font-size:13px"')


def summary_fragment(summary: Summary) -> str:
    """A compact HTML block of one summary, for Jupyter (inline styles only)."""
    s = summary
    ok = s.overlap_ok
    color, bg = (_OK, "#E6F5F0") if ok else (_BAD, "#FBEDE5")
    td, th = _TD, _TH
    out = ['<div class="nsysscope-summary" style="font-family:sans-serif;font-size:13px">',
           f'<div style="border-left:6px solid {color};background:{bg};padding:6px 10px;'
           f'font-weight:600;margin-bottom:6px">{escape(s.verdict)}</div>',
           f'<div style="color:#555;font-size:11.5px;margin-bottom:4px">{escape(header(s))}</div>',
           "<table>"]
    out += [f"<tr><th {th}>{escape(k)}</th><td {td}>{escape(v)}</td></tr>" for k, v in metrics_rows(s)]
    out.append("</table>")
    if s.sites:
        out.append('<div style="margin-top:6px;font-weight:600">Stall sites</div><table>'
                   f"<tr><th {th}>#</th><th {th}>class</th><th {th}>launches</th>"
                   f"<th {th}>GPU idle</th><th {th}>where</th><th {th}>API chain</th>"
                   f"<th {th}>fix</th></tr>")
        for i, site in enumerate(s.sites, 1):
            c = _CLASS_COLORS.get(site.klass, "#777777")
            fg = "#000" if site.klass == "cpu_to_gpu" else "#fff"
            out.append(
                f"<tr><td {td}>{i}</td><td {td}><span style=\"background:{c};color:{fg};"
                f"padding:0 6px;border-radius:8px\">{escape(site.klass)}</span></td>"
                f"<td {td}>{site.count}</td><td {td}>{escape(us(site.lost_us))}</td>"
                f"<td {td}>{escape(site.where)}</td><td {td}><code>{escape(site.api_chain or '-')}"
                f"</code></td><td {td}>{escape(site.fix)}</td></tr>")
        out.append("</table>")
    if s.notes:
        out.append('<div style="margin-top:6px;font-weight:600">Notes</div><ul style="margin:2px 0">'
                   + "".join(f"<li>{escape(n)}</li>" for n in s.notes) + "</ul>")
    out.append("</div>")
    return "\n".join(out)


# -- the gate ----------------------------------------------------------------------------------

_STATUS_CLASS = {"pass": "pass", "fail": "fail", "improved": "improved"}


def _side_source(side, given):
    """What the comparison figure is drawn from for one side of the gate: what the caller
    gave, else the file the gate read (a trace is analysed again, a summary JSON is read),
    else nothing. Returns (object or None, how it was obtained)."""
    if given is not None:
        return getattr(given, "analysis", given), ""
    path = Path(str(side.label)) if side.label else None
    if path is None or not path.is_file():
        return None, f"{side.label}: not a readable file"
    from ..gate import is_summary_file, read_summary
    if is_summary_file(path):
        return read_summary(path), "summary JSON"
    from ..analysis import analyze
    from ..trace import load
    return analyze(load(path)), "trace, analysed again with default settings"


def _gate_sites(sites) -> str:
    out = []
    for s in sites:
        rows = [("launches", f"{s.baseline_count} &rarr; {s.candidate_count}, "
                             f"{escape(us(s.lost_us))} GPU idle")]
        if s.source:
            text = f" <code>{escape(s.source_text)}</code>" if s.source_text else ""
            rows.append(("source line", f"<code>{escape(s.source)}</code>{text}"))
        if s.api_chain:
            rows.append(("API chain", f"<code>{escape(s.api_chain)}</code>"))
        if s.nvtx_path:
            rows.append(("NVTX", f"<code>{escape(s.nvtx_path)}</code>"))
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
        color = _CLASS_COLORS.get(s.klass, "#777777")
        out.append(f'<div class="site" style="border-left-color:{color}"><h3>{chip(s.klass)} at '
                   f"{escape(s.where)}</h3><dl>{dl}</dl></div>")
    return "".join(out)


def _findings_html(title: str, findings) -> str:
    """Each finding with its sites and fix; a site or fix already shown is referred to."""
    if not findings:
        return ""
    out = [f"<h2>{escape(title)}</h2>", "<ol>"]
    seen_sites: dict[tuple, int] = {}
    seen_fixes: dict[str, int] = {}
    for i, f in enumerate(findings, 1):
        out.append(f"<li><p><strong>{escape(f.message)}</strong></p>")
        new = [s for s in f.sites if (s.klass, s.where, s.api_chain) not in seen_sites]
        again = sorted({seen_sites[(s.klass, s.where, s.api_chain)] for s in f.sites} - {i}
                       if len(new) < len(f.sites) else set())
        out.append(_gate_sites(new))
        for s in new:
            seen_sites[(s.klass, s.where, s.api_chain)] = i
        if again:
            out.append(f'<p class="note">Same site as finding {", ".join(map(str, again))}.</p>')
        if f.fix and f.fix not in seen_fixes:
            seen_fixes[f.fix] = i
            out.append(f"<p><strong>Fix:</strong> {escape(f.fix)}</p>")
        elif f.fix:
            out.append(f'<p class="note">Fix: as for finding {seen_fixes[f.fix]}.</p>')
        out.append("</li>")
    out.append("</ol>")
    return "\n".join(out)


def gate_report(result, baseline=None, candidate=None) -> str:
    """The gate's result as one self-contained HTML page.

    ``baseline`` / ``candidate`` (an Analysis, OpenTrace or Summary with distributions) feed
    the side-by-side comparison figure. Left out, each side is read again from the file the
    gate was given (``result.baseline.label``): a summary JSON gives the distributions, a
    trace gives the timelines too."""
    from .gate_text import ci, p_value, side_line, value
    from .gate_text import change as change_text

    r = result
    cls = "ok" if r.passed else "bad"
    parts = [f"<h1>nsysscope gate: {'PASS' if r.passed else 'REGRESSION'}</h1>",
             f'<div class="verdict {cls}">{escape(r.verdict)}</div>',
             "<table>",
             f"<tr><th>baseline</th><td>{escape(side_line(r.baseline))}<br>"
             f'<span class="note">{escape(r.baseline.verdict)}</span></td></tr>',
             f"<tr><th>candidate</th><td>{escape(side_line(r.candidate))}<br>"
             f'<span class="note">{escape(r.candidate.verdict)}</span></td></tr>',
             "</table>", "<h2>Checks</h2>",
             '<table><tr><th>metric</th><th class="num">baseline</th><th class="num">candidate'
             '</th><th class="num">change</th><th>threshold</th><th class="num">p</th>'
             "<th>result</th></tr>"]
    for c in r.checks:
        ch = escape(change_text(c))
        if c.ci:
            ch += f'<br><span class="note">{escape(ci(c))}</span>'
        word = {"fail": "FAIL"}.get(c.status, c.status)
        parts.append(
            f"<tr><td>{escape(c.label)}</td><td class=\"num\">{escape(value(c, c.baseline))}</td>"
            f"<td class=\"num\">{escape(value(c, c.candidate))}</td><td class=\"num\">{ch}</td>"
            f"<td>{escape(c.threshold)}</td><td class=\"num\">{escape(p_value(c))}</td>"
            f"<td class=\"{_STATUS_CLASS.get(c.status, 'note')}\">{escape(word)}</td></tr>")
    parts.append("</table>")

    parts.append("<h2>Baseline and candidate side by side</h2>")
    notes = []
    try:
        a, how_a = _side_source(r.baseline, baseline)
        b, how_b = _side_source(r.candidate, candidate)
    except Exception as e:  # noqa: BLE001 - the table above is the report; the figure is extra
        a = b = None
        how_a = how_b = f"{type(e).__name__}: {e}"
    if a is not None and b is not None:
        from ..plot import compare_figure
        labels = (f"baseline: {_name(r.baseline.label)}", f"candidate: {_name(r.candidate.label)}")
        for side, how in (("baseline", how_a), ("candidate", how_b)):
            if how:
                notes.append(f"{side} figure drawn from the {how}")
        parts.append(_figure(
            lambda: compare_figure(a, b, labels=labels), "baseline and candidate compared",
            "Top: the CDFs of the overlap window and the GPU idle gap of both traces' steady "
            "launches (baseline dashed grey, candidate solid blue) and each class's share of "
            "the launches. Below, when both sides are traces: the baseline's typical launch and "
            "the candidate's worst stall on the same time scale. " + _TIMELINE_HELP))
    else:
        parts.append('<p class="note">No figure: the gate was given neither the traces nor the '
                     f"summaries to draw it from ({escape(how_a or how_b)}).</p>")
    parts.append(_findings_html("Regressions", r.regressions))
    parts.append(_findings_html("Improvements", r.improvements))
    parts.append("<h2>Notes</h2>")
    parts.append(_notes(list(r.notes) + notes))
    if r.thresholds:
        th = ", ".join(f"{k}={v}" for k, v in r.thresholds.items())
        parts.append(f'<p class="note">Thresholds: <code>{escape(th)}</code></p>')
    title = f"nsysscope gate: {_name(r.baseline.label)} vs {_name(r.candidate.label)}"
    return _page(title, "\n".join(parts))


def gate_fragment(result) -> str:
    """A compact HTML block of a gate result, for Jupyter (inline styles only): the verdict
    and the checks table."""
    from .gate_text import change as change_text
    from .gate_text import p_value, value

    r = result
    color, bg = (_OK, "#E6F5F0") if r.passed else (_BAD, "#FBEDE5")
    colors = {"fail": _BAD, "pass": _OK, "improved": "#0072B2"}
    out = ['<div class="nsysscope-gate" style="font-family:sans-serif;font-size:13px">',
           f'<div style="border-left:6px solid {color};background:{bg};padding:6px 10px;'
           f'font-weight:600;margin-bottom:6px">{escape(r.verdict)}</div><table><tr>']
    out += [f"<th {_TH}>{h}</th>" for h in ("metric", "baseline", "candidate", "change",
                                            "threshold", "p", "result")]
    out.append("</tr>")
    for c in r.checks:
        word = {"fail": "FAIL"}.get(c.status, c.status)
        cells = (c.label, value(c, c.baseline), value(c, c.candidate), change_text(c),
                 c.threshold, p_value(c))
        out.append("<tr>" + "".join(f"<td {_TD}>{escape(v)}</td>" for v in cells) +
                   f'<td {_TD}><span style="color:{colors.get(c.status, "#555")};'
                   f'font-weight:600">{escape(word)}</span></td></tr>')
    out.append("</table></div>")
    return "\n".join(out)
