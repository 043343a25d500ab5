"""The report as Markdown, for a PR comment or an issue."""

from __future__ import annotations

from typing import Any

from ..model import StallSite
from ..util.units import plural, us
from .base import as_summary, cell, md_code, md_text, pipes
from .report_parts import (
    GRAPH_COLUMNS,
    LATENT_HEADING,
    PROCESS_COLUMNS,
    SOURCE_ROOT_HINT,
    chain,
    concentration,
    fix_gain,
    graph_rows,
    graphs_heading,
    header,
    headline,
    latent_line,
    latent_reason,
    launch_bound_total,
    metrics_rows,
    nvtx_of,
    process_rows,
    split_sites,
    unlisted,
    verdict_detail,
)


def _where(site: StallSite) -> str:
    """The site's location, its source line (with the line's text) first when known."""
    src = site.source
    if not src:
        return cell(site.where)
    if not src.text:  # no advice that cannot work: a frame without a line has no text
        return cell(f"{site.where} ({SOURCE_ROOT_HINT})" if src.line > 0 else site.where)
    rest = site.where.split(", ", 1)[1] if ", " in site.where else ""
    line = f"{md_text(f'{src.file}:{src.line}')} {md_code(src.text.strip())}"
    return pipes(f"{line}, {md_text(rest)}" if rest else line)


def render(result: Any) -> str:
    s = as_summary(result)
    icon = "\u2705" if s.overlap_ok else "\u274c"
    detail = verdict_detail(s)
    out = [f"## nsysscope: {icon} {md_text(headline(s))}", "",
           *([md_text(detail), ""] if detail else []), md_code(header(s)), "",
           "| steady state | value |", "|---|---|"]
    out += [f"| {k} | {cell(v)} |" for k, v in metrics_rows(s)]
    if len(s.processes) > 1:
        out += ["", f"### Processes ({len(s.processes)})", "",
                "| " + " | ".join(PROCESS_COLUMNS) + " | verdict |",
                "|" + "---|" * (len(PROCESS_COLUMNS) + 1)]
        out += ["| " + " | ".join(cell(c) for c in row) + f" | {cell(p.verdict)} |"
                for row, p in zip(process_rows(s), s.processes, strict=True)]
    if s.graphs:
        out += ["", f"### {cell(graphs_heading(s))}", "",
                "| " + " | ".join(GRAPH_COLUMNS) + " |", "|" + "---|" * len(GRAPH_COLUMNS)]
        out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in graph_rows(s)]
        out += ["", *(f"- {cell(line)}" for line in concentration(s))]
    stalls, late = split_sites(s)
    if stalls:
        out += ["", "### Stall sites", "",
                "| # | class | launches | GPU idle | if fixed | where | API chain | fix |",
                "|---|---|---|---|---|---|---|---|"]
        for i, site in enumerate(stalls, 1):
            fixed = fix_gain(s, site.speedup_if_fixed, site.launches_per_s_if_fixed) \
                if site.speedup_if_fixed else "-"
            out.append(f"| {i} | {md_code(site.klass)} | {site.count} | {us(site.lost_us)} | "
                       f"{fixed} | {_where(site)} | "
                       f"{pipes(md_code(chain(site) if site.api_chain else '-'))} | "
                       f"{cell(site.fix)} |")
        more = unlisted(s, late=False)
        out += ["", f"({more})"] if more else []
    if late:
        total = launch_bound_total(s)
        out += ["", "### Launch-bound gaps", "",
                f"{plural(total, 'launch', 'launches')} with no stall where the GPU idled "
                "longer than the threshold before the next replay (the host was late). "
                f"{cell(late[0].fix)}", "",
                "| launches | GPU idle | where | NVTX |", "|---|---|---|---|"]
        out += [f"| {x.count} | {us(x.lost_us)} | {_where(x)} | {pipes(md_code(nvtx_of(x)))} |"
                for x in late]
        more = unlisted(s, late=True)
        out += ["", f"({more})"] if more else []
    if s.latent:
        out += ["", f"**{LATENT_HEADING}** ({md_text(latent_reason(s))})", ""] + \
            [f"- {cell(latent_line(x))}" for x in s.latent]
    if s.notes:
        out += ["", "**Notes**", ""] + [f"- {md_text(n)}" for n in s.notes]
    return "\n".join(out) + "\n"
