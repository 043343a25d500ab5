"""The report as Markdown, for a PR comment or an issue."""

from __future__ import annotations

from typing import Any

from ..model import StallSite
from ..util.units import us
from .base import as_summary, cell
from .text import header, metrics_rows


def _where(site: StallSite) -> str:
    """The site's location, its source line (with the line's text) first when known."""
    src = site.source
    if not (src and src.text):
        return cell(site.where)
    rest = site.where.split(", ", 1)[1] if ", " in site.where else ""
    line = f"{src.file}:{src.line} `{src.text.strip().replace('`', '')}`"
    return cell(f"{line}, {rest}" if rest else line)


def render(result: Any) -> str:
    s = as_summary(result)
    icon = "\u2705" if s.overlap_ok else "\u274c"
    out = [f"## nsysscope: {icon} {s.verdict}", "", f"`{header(s)}`", "",
           "| steady state | value |", "|---|---|"]
    out += [f"| {k} | {cell(v)} |" for k, v in metrics_rows(s)]
    if s.sites:
        out += ["", "### Stall sites", "",
                "| # | class | launches | GPU idle | where | API chain | fix |",
                "|---|---|---|---|---|---|---|"]
        for i, site in enumerate(s.sites, 1):
            out.append(f"| {i} | `{site.klass}` | {site.count} | {us(site.lost_us)} | "
                       f"{_where(site)} | `{cell(site.api_chain or '-')}` | {cell(site.fix)} |")
    if s.notes:
        out += ["", "**Notes**", ""] + [f"- {n}" for n in s.notes]
    return "\n".join(out) + "\n"
