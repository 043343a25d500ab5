"""The report as Markdown, for a PR comment or an issue."""

from __future__ import annotations

from typing import Any

from ..model import StallSite
from ..util.units import us
from .base import as_summary, cell
from .text import (
    PROCESS_COLUMNS,
    chain,
    gain,
    header,
    latent_line,
    metrics_rows,
    process_rows,
)


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
    if len(s.processes) > 1:
        out += ["", f"### Processes ({len(s.processes)})", "",
                "| " + " | ".join(PROCESS_COLUMNS) + " | verdict |",
                "|" + "---|" * (len(PROCESS_COLUMNS) + 1)]
        out += ["| " + " | ".join(cell(c) for c in row) + f" | {cell(p.verdict)} |"
                for row, p in zip(process_rows(s), s.processes, strict=True)]
    if s.sites:
        out += ["", "### Stall sites", "",
                "| # | class | launches | GPU idle | if fixed | where | API chain | fix |",
                "|---|---|---|---|---|---|---|---|"]
        for i, site in enumerate(s.sites, 1):
            fixed = gain(s.launches_per_s, site.speedup_if_fixed) if site.speedup_if_fixed \
                else "-"
            out.append(f"| {i} | `{site.klass}` | {site.count} | {us(site.lost_us)} | {fixed} | "
                       f"{_where(site)} | `{cell(chain(site) if site.api_chain else '-')}` | "
                       f"{cell(site.fix)} |")
    if s.latent:
        out += ["", "**Also seen, not (yet) costing you** (fix the stalls above and these are "
                "next)", ""] + [f"- {cell(latent_line(x))}" for x in s.latent]
    if s.notes:
        out += ["", "**Notes**", ""] + [f"- {n}" for n in s.notes]
    return "\n".join(out) + "\n"
