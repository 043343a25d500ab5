"""Compact HTML blocks for Jupyter (``_repr_html_``): inline styles only, no figures."""

from __future__ import annotations

from html import escape
from typing import Any

from ...model import GateResult
from ...util.units import us
from ..base import as_summary
from ..gate_text import COLUMNS, cells
from ..palette import BAD_COLOR, IMPROVED_COLOR, OK_COLOR, class_color, text_on
from ..report_parts import header, headline, metrics_rows, verdict_detail
from .page import TD, TH, inline

_OK_BG, _BAD_BG = "#E6F5F0", "#FBEDE5"


def _verdict(text: str, ok: bool, detail: str | None = None) -> str:
    color, bg = (OK_COLOR, _OK_BG) if ok else (BAD_COLOR, _BAD_BG)
    below = f'<div style="font-weight:400">{escape(detail)}</div>' if detail else ""
    return (f'<div style="border-left:6px solid {color};background:{bg};padding:6px 10px;'
            f'font-weight:600;margin-bottom:6px">{escape(text)}{below}</div>')


def summary_fragment(result: Any) -> str:
    """One summary (or an Analysis's, an OpenTrace's): verdict, numbers, sites, notes."""
    s = as_summary(result)
    td, th = TD, TH
    out = ['<div class="nsysscope-summary" style="font-family:sans-serif;font-size:13px">',
           _verdict(headline(s), s.overlap_ok, verdict_detail(s)),
           f'<div style="color:#555;font-size:11.5px;margin-bottom:4px">{escape(header(s))}</div>',
           "<table>"]
    out += [f"<tr><th {th}>{escape(k)}</th><td {td}>{escape(v)}</td></tr>"
            for k, v in metrics_rows(s)]
    out.append("</table>")
    if s.sites:
        out.append('<div style="margin-top:6px;font-weight:600">Stall sites</div><table>'
                   f"<tr><th {th}>#</th><th {th}>class</th><th {th}>launches</th>"
                   f"<th {th}>GPU idle</th><th {th}>where</th><th {th}>API chain</th>"
                   f"<th {th}>fix</th></tr>")
        for i, site in enumerate(s.sites, 1):
            out.append(
                f"<tr><td {td}>{i}</td><td {td}><span style=\"background:"
                f"{class_color(site.klass)};color:{text_on(site.klass)};"
                f"padding:0 6px;border-radius:8px\">{escape(site.klass)}</span></td>"
                f"<td {td}>{site.count}</td><td {td}>{escape(us(site.lost_us))}</td>"
                f"<td {td}>{escape(site.where)}</td><td {td}><code>{escape(site.api_chain or '-')}"
                f"</code></td><td {td}>{escape(site.fix)}</td></tr>")
        out.append("</table>")
    if s.notes:
        out.append('<div style="margin-top:6px;font-weight:600">Notes</div>'
                   '<ul style="margin:2px 0">'
                   + "".join(f"<li>{inline(n)}</li>" for n in s.notes) + "</ul>")
    out.append("</div>")
    return "\n".join(out)


def gate_fragment(result: GateResult) -> str:
    """A gate result: the verdict and the checks table."""
    r = result
    colors = {"fail": BAD_COLOR, "pass": OK_COLOR, "improved": IMPROVED_COLOR}
    out = ['<div class="nsysscope-gate" style="font-family:sans-serif;font-size:13px">',
           _verdict(r.verdict, r.passed) + "<table><tr>"]
    out += [f"<th {TH}>{h}</th>" for h in COLUMNS]
    out.append("</tr>")
    for c in r.checks:
        *values, word = cells(c)
        out.append("<tr>" + "".join(f"<td {TD}>{escape(v)}</td>" for v in values) +
                   f'<td {TD}><span style="color:{colors.get(c.status, "#555")};'
                   f'font-weight:600">{escape(word)}</span></td></tr>')
    out.append("</table></div>")
    return "\n".join(out)
