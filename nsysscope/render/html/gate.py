"""The gate's result as a self-contained HTML page (``nsysscope gate --format html``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

from ...model import Finding, GateResult, SiteChange
from ...util.units import us
from ..gate_parts import arrange
from ..gate_text import COLUMNS, NUMERIC, cells, ci, pauses_left_out, side_headline, side_line
from ..palette import class_color
from .page import TIMELINE_HELP, chip, figure, name, notes, page

#: each status's colour class: a change that is neither a regression nor an improvement
#: (``changed``: a slower launch rate, a longer overlap window) is neutral, never green
_STATUS_CLASS = {"pass": "pass", "fail": "fail", "improved": "improved", "changed": "changed"}


def _gate_sites(sites: Sequence[SiteChange]) -> str:
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
        out.append(f'<div class="site" style="border-left-color:{class_color(s.klass)}"><h3>'
                   f"{chip(s.klass)} at {escape(s.where)}</h3><dl>{dl}</dl></div>")
    return "".join(out)


def _findings_html(title: str, findings: Sequence[Finding]) -> str:
    """Each finding with its sites and fix; a site or fix already shown is referred to."""
    if not findings:
        return ""
    out = [f"<h2>{escape(title)}</h2>", "<ol>"]
    for item in arrange(findings):
        f = item.finding
        out.append(f"<li><p><strong>{escape(f.message)}</strong></p>")
        out.append(_gate_sites(item.new_sites))
        if item.repeats:
            again = ", ".join(map(str, sorted(item.repeats)))
            out.append(f'<p class="note">Same site as finding {again}.</p>')
        if f.fix and item.fix_shown_in is None:
            out.append(f"<p><strong>Fix:</strong> {escape(f.fix)}</p>")
        elif f.fix:
            out.append(f'<p class="note">Fix: as for finding {item.fix_shown_in}.</p>')
        out.append("</li>")
    out.append("</ol>")
    return "\n".join(out)


def _checks_table(r: GateResult) -> list[str]:
    parts = ["<table><tr>" + "".join(
        f'<th class="num">{h}</th>' if h in NUMERIC else f"<th>{h}</th>" for h in COLUMNS)
        + "</tr>"]
    for c in r.checks:
        row = [escape(v) for v in cells(c)]
        if c.ci:
            row[3] += f'<br><span class="note">{escape(ci(c))}</span>'
        kinds = [("num" if h in NUMERIC else "") for h in COLUMNS]
        kinds[-1] = _STATUS_CLASS.get(c.status, "note")
        parts.append("<tr>" + "".join(f'<td class="{k}">{v}</td>' if k else f"<td>{v}</td>"
                                      for k, v in zip(kinds, row, strict=True)) + "</tr>")
    parts.append("</table>")
    return parts


def _comparison(r: GateResult, baseline: Any, candidate: Any) -> str:
    if baseline is None or candidate is None:
        return ('<p class="note">No figure: the gate result came without both sides (pass '
                "the analyses or summaries it compared as baseline= and candidate=).</p>")
    from ..plots import compare_figure  # matplotlib only when a page with figures is asked for
    a = getattr(baseline, "analysis", baseline)
    b = getattr(candidate, "analysis", candidate)
    labels = (f"baseline: {name(r.baseline.label)}", f"candidate: {name(r.candidate.label)}")
    return figure(
        lambda: compare_figure(a, b, labels=labels), "baseline and candidate compared",
        "Top: the CDFs of the overlap window and the GPU idle gap of both traces' steady "
        "launches (baseline dashed grey, candidate solid blue) and each class's share of "
        "the launches. Below, a timeline of each side that is a trace (a summary has none): "
        "the baseline's typical launch and the candidate's worst stall, on the same time "
        "scale when both are drawn. " + TIMELINE_HELP)


def gate_page(result: GateResult, baseline: Any = None, candidate: Any = None,
              timestamp: datetime | str | None = None) -> str:
    """The gate's result as one self-contained HTML page.

    ``baseline`` / ``candidate``: what the gate compared (an Analysis, OpenTrace or a Summary
    with distributions), for the side-by-side figure; a summary gives its distributions, an
    analysis its timeline too. Without them the page has no figure."""
    r = result
    cls = "ok" if r.passed else "bad"
    parts = [f"<h1>nsysscope gate: {'PASS' if r.passed else 'REGRESSION'}</h1>",
             f'<div class="verdict {cls}">{escape(r.verdict)}</div>',
             "<table>",
             f"<tr><th>baseline</th><td>{escape(side_line(r.baseline))}<br>"
             f'<span class="note">{escape(side_headline(r.baseline))}</span></td></tr>',
             f"<tr><th>candidate</th><td>{escape(side_line(r.candidate))}<br>"
             f'<span class="note">{escape(side_headline(r.candidate))}</span></td></tr>',
             "</table>", "<h2>Checks</h2>"]
    parts += _checks_table(r)
    parts.append("<h2>Baseline and candidate side by side</h2>")
    parts.append(_comparison(r, baseline, candidate))
    parts.append(_findings_html("Regressions", r.regressions))
    parts.append(_findings_html("Improvements", r.improvements))
    parts.append("<h2>Notes</h2>")
    parts.append(notes([*r.notes, pauses_left_out(r)]))
    if r.thresholds:
        th = ", ".join(f"{k}={v}" for k, v in r.thresholds.items())
        parts.append(f'<p class="note">Thresholds: <code>{escape(th)}</code></p>')
    title = f"nsysscope gate: {name(r.baseline.label)} vs {name(r.candidate.label)}"
    identity = f"baseline {side_line(r.baseline)}; candidate {side_line(r.candidate)}"
    return page(title, "\n".join(parts), identity, timestamp)
