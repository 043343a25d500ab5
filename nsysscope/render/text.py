"""The terminal report: the headline and the verdict first, then the numbers, then what to fix.

Every line is wrapped to ``width`` columns (the CLI passes the terminal's width; 80 by
default), continuation lines indented under their label.
"""

from __future__ import annotations

from typing import Any

from ..model import StallSite, Summary
from ..util.text import DEFAULT_WIDTH, wrap
from ..util.units import plural, us
from .base import as_summary
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


def _processes(s: Summary, width: int) -> list[str]:
    """A table of the processes when it fits ``width``, else one wrapped block each; then each
    process's verdict."""
    rows = process_rows(s)
    table = _table(PROCESS_COLUMNS, rows)
    if max(len(line) for line in table) <= width:
        out = table
    else:
        out = []
        for row in rows:
            out += wrap(", ".join(f"{k} {v}" for k, v in zip(PROCESS_COLUMNS[1:], row[1:],
                                                               strict=True)),
                        width, f"  {row[0]}: ", "    ")
    for p in s.processes:
        out += wrap(p.verdict, width, f"  {p.label}: ", "    ")
    return out


def _table(header_row: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header_row, *rows]) for i in range(len(header_row))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [header_row, *rows]]


def _site_lines(i: int, site: StallSite, width: int, s: Summary) -> list[str]:
    out = wrap(f"{site.klass}: {plural(site.count, 'launch', 'launches')}, "
               f"{us(site.lost_us)} GPU idle -- {site.where}", width, f" #{i} ", "     ")
    if site.speedup_if_fixed:
        fixed = fix_gain(s, site.speedup_if_fixed, site.launches_per_s_if_fixed)
        out += wrap(f"fixing it -> {fixed}", width,
                    "     gain:  ",
                    " " * 12)
    if site.source:
        src = site.source
        text = f"{src.text.strip()}  " if src.text else f"({SOURCE_ROOT_HINT})  " \
            if src.line > 0 else ""
        out += wrap(f"{text}(in {src.function}; {src.samples} samples, {src.agreement:.0%} of "
                    "those in the blocks)", width, "     line:  ", " " * 12)
    if site.api_chain:
        out += wrap(chain(site), width, "     chain: ", " " * 12)
    out += wrap(f"{nvtx_of(site)}   thread: {site.thread}", width, "     NVTX:  ",
                " " * 12)
    out += wrap(site.fix, width, "     fix:   ", " " * 12)
    return out


def _late_lines(s: Summary, late: list[StallSite], width: int) -> list[str]:
    total = launch_bound_total(s)
    out = ["", *wrap(f"Launch-bound gaps: {plural(total, 'launch', 'launches')} with no stall, "
                     "where the GPU idled longer than the threshold before the next replay "
                     "(the host was late), longest first", width, "", "")]
    for site in late:
        out += wrap(f"{plural(site.count, 'launch', 'launches')}, {us(site.lost_us)} GPU idle "
                    f"-- {site.where}   ({nvtx_of(site)}, thread {site.thread})", width,
                    "  - ")
    more = unlisted(s, late=True)
    out += wrap(more, width, "  - ") if more else []
    out += wrap(late[0].fix, width, "  fix: ", " " * 7)
    return out


def render(result: Any, width: int | None = None) -> str:
    s = as_summary(result)
    w = width or DEFAULT_WIDTH
    out = wrap(f"nsysscope report: {header(s)}", w, "", "  ")
    detail = verdict_detail(s)
    out += ["", *wrap(headline(s), w, "", "  "),
            *(wrap(detail, w, "  - ", "    ") if detail else []),
            "", "Steady state (warm-up excluded)"]
    rows = metrics_rows(s)
    key_width = max(len(k) for k, _ in rows)
    for k, v in rows:
        out += wrap(v, w, f"  {k:<{key_width}}  ")
    if len(s.processes) > 1:
        out += ["", f"Processes ({len(s.processes)}; the numbers above are their totals)"]
        out += _processes(s, w)
    if s.graphs:
        out += ["", *wrap(graphs_heading(s), w, "", "  "), *_table(GRAPH_COLUMNS, graph_rows(s))]
        for line in concentration(s):
            out += wrap(line, w, "  - ", "    ")
    stalls, late = split_sites(s)
    if stalls:
        out += ["", "Top stall sites (biggest projected gain first)"]
        for i, site in enumerate(stalls, 1):
            out += _site_lines(i, site, w, s)
        more = unlisted(s, late=False)
        out += wrap(f"({more})", w, " ", "  ") if more else []
    if late:
        out += _late_lines(s, late, w)
    if s.latent:
        out += ["", *wrap(f"{LATENT_HEADING} ({latent_reason(s)})", w, "", "")]
        for x in s.latent:
            out += wrap(latent_line(x), w, "  - ", "    ")
    if s.notes:
        out += ["", "Notes"]
        for n in s.notes:
            out += wrap(n, w, "  - ")
    return "\n".join(out) + "\n"
