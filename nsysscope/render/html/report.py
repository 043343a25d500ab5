"""One analysed trace as a self-contained HTML page (``nsysscope report --format html``)."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from ...model import StallSite, Summary
from ...util.units import us
from ..base import as_summary
from ..palette import class_color
from ..report_parts import (
    LATENT_HEADING,
    PROCESS_COLUMNS,
    SOURCE_ROOT_HINT,
    chain,
    first_of,
    fix_gain,
    header,
    headline,
    latent_line,
    latent_reason,
    metrics_rows,
    process_rows,
    unlisted,
    verdict_detail,
)
from .page import TIMELINE_HELP, chip, figure, name, notes, page


def verdict_box(s: Summary) -> str:
    """The headline, and under it the verdict where the headline does not say it."""
    cls = "ok" if s.overlap_ok else "bad"
    detail = verdict_detail(s)
    below = f'<div class="detail">{escape(detail)}</div>' if detail else ""
    return f'<div class="verdict {cls}">{escape(headline(s))}{below}</div>'


def _metrics_table(s: Summary) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                   for k, v in metrics_rows(s))
    return f"<table>{rows}</table>"


def _processes_table(s: Summary) -> str:
    """One row per process, with its verdict, when the trace holds several."""
    if len(s.processes) <= 1:
        return ""
    head = "".join(f"<th>{escape(c)}</th>" for c in (*PROCESS_COLUMNS, "verdict"))
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row)
        + f"<td>{escape(p.verdict)}</td></tr>"
        for row, p in zip(process_rows(s), s.processes, strict=True))
    return (f"<h2>Processes ({len(s.processes)}): the summary above is their total</h2>"
            f"<table><tr>{head}</tr>{rows}</table>")


def _site_card(i: int, site: StallSite, s: Summary) -> str:
    head = (f"<h3>#{i} {chip(site.klass)} {site.count} launch{'es' if site.count != 1 else ''}, "
            f"{escape(us(site.lost_us))} GPU idle")
    if site.share:
        head += f" ({site.share:.0%} of the stalls)"
    head += f" &mdash; {escape(site.where)}</h3>"
    rows = []
    if site.speedup_if_fixed:
        rows.append(("if fixed", escape(fix_gain(s, site.speedup_if_fixed, rates=False))))
    if site.source:
        src = site.source
        text = f" <code>{escape(src.text.strip())}</code>" if src.text else \
            f' <span class="note">({escape(SOURCE_ROOT_HINT)})</span>' if src.line > 0 else ""
        where = f"<code>{escape(src.file)}:{src.line}</code> in " \
            f"<code>{escape(src.function)}</code>" if src.line > 0 else escape(src.location)
        rows.append(("source line", f"{where}{text} ({src.samples} Python samples, "
                     f"{src.agreement:.0%} of those inside the blocks)"))
    if site.api_chain:
        rows.append(("API chain", f"<code>{escape(chain(site))}</code>"))
    rows.append(("NVTX", f"<code>{escape(site.nvtx_path or '-')}</code>{first_of(site)}"))
    rows.append(("thread", escape(site.thread)))
    rows.append(("example", f"launch {site.example_launch} "
                            f"(<code>t.launches.loc[{site.example_launch}]</code> in a notebook)"))
    rows.append(("fix", f"<strong>{escape(site.fix)}</strong>"))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (f'<div class="site" style="border-left-color:{class_color(site.klass)}">{head}'
            f"<dl>{dl}</dl></div>")


def _sites(s: Summary) -> str:
    if not s.sites:
        return '<p class="note">No stall sites and no launch-bound gaps in the steady state.</p>'
    more = [x for x in (unlisted(s, late=False), unlisted(s, late=True)) if x]
    return "".join(_site_card(i, site, s) for i, site in enumerate(s.sites, 1)) + "".join(
        f'<p class="note">({escape(x)})</p>' for x in more)


def report_page(result: Any, timestamp: datetime | str | None = None,
                perfetto: str | None = None) -> str:
    """The whole report of one trace as one self-contained HTML page.

    ``result``: an Analysis (or an OpenTrace), which gives the timelines and per-launch
    figures too, or a Summary, which gives the distributions only. ``perfetto``: the
    relative link to a Perfetto timeline of the trace written beside the page."""
    analysis = getattr(result, "analysis", result)
    s = as_summary(analysis)
    file = name(s.trace.path)
    parts = [f"<h1>nsysscope report: {escape(file)}</h1>",
             f'<div class="sub">{escape(header(s))}</div>', verdict_box(s)]
    if perfetto:
        parts.append(f'<p class="note">The whole trace as a zoomable timeline: <a href="'
                     f'{escape(perfetto)}">{escape(perfetto)}</a> (open it in '
                     '<a href="https://ui.perfetto.dev">ui.perfetto.dev</a>).</p>')
    parts += [
             "<h2>Summary (steady state, warm-up excluded)</h2>", _metrics_table(s),
             _processes_table(s),
             "<h2>Top stall sites (and launch-bound gaps), biggest projected gain first</h2>",
             _sites(s)]
    if not isinstance(analysis, Summary):  # an Analysis: its launches give the timelines
        parts += _figures(analysis)
    else:
        parts += ['<p class="note">No timelines: this page was drawn from a summary, which keeps '
                  "the per-launch distributions but no timeline.</p>", "<h2>Distributions</h2>",
                  _distributions(lambda: _plots().distributions_figure(s, name=file))]
    if s.latent:
        parts.append(f"<h2>{LATENT_HEADING}</h2>")
        reason = latent_reason(s)
        parts.append(f'<p class="note">{escape(reason[0].upper() + reason[1:])}.</p>')
        parts.append(notes([latent_line(x) for x in s.latent]))
    parts.append("<h2>Notes</h2>")
    parts.append(notes(s.notes))
    # a warm-up left to nsysscope (None) is shown as the count it chose
    cfg = ", ".join(f"{k}=auto ({s.warmup_launches})" if k == "warmup_launches" and v is None
                    else f"{k}={v}" for k, v in s.config.items())
    parts.append(f'<p class="note">Analysis settings: <code>{escape(cfg)}</code></p>')
    return page(f"nsysscope: {file}", "\n".join(parts), header(s), timestamp)


def _plots() -> Any:
    from .. import plots  # matplotlib only when a page with figures is asked for
    return plots


def _distributions(make: Any) -> str:
    return figure(make, "CDFs of the overlap window and GPU idle gap per class",
                  "Per steady-state launch: the overlap window (how long the host worked ahead "
                  "before waiting on the launch) and the GPU idle gap after its replay, one "
                  "curve per class; each curve ends at that class's share of the launches. A "
                  "healthy engine has windows of about a step and gaps of tens of microseconds.")


def _figures(analysis: Any) -> list[str]:
    plots = _plots().TracePlots(analysis)
    has_stall = bool(plots.launches["stall"].any())
    worst_title = "Timeline: the worst stall" if has_stall else \
        "Timeline: the longest GPU gap (this trace has no stalls)"
    worst_help = ("The stall that cost the GPU most idle time of its own: the gap it caused, "
                  "less what the host's own slowness after it added (a neighbour's gap can be "
                  "longer and still rank lower). " if has_stall else "") + TIMELINE_HELP
    return [f"<h2>{worst_title}</h2>",
            _timeline(plots, "worst", worst_help),
            "<h2>Timeline: a typical step</h2>",
            _timeline(plots, "typical", "A steady launch whose GPU idle gap is close to the "
                                        "median, and whose neighbours' gaps are too, drawn "
                                        "like the one above."),
            "<h2>Distributions</h2>",
            _distributions(plots.distributions),
            figure(plots.series, "per-launch series over the capture",
                   "The same values per launch over time: warm-up (shaded), intermittent "
                   "stalls and the steady state. Long captures are thinned, with a binned "
                   "median and min-max band so no outlier is hidden.")]


def _timeline(plots: Any, which: str, help_html: str) -> str:
    """The timeline of the ``which`` launch; its one-line story goes in the alt text too."""
    alt = f"timeline of the {which} launch"
    try:
        focus = _plots().pick_launch(plots.launches, which)
        if focus is not None:
            alt += ": " + plots.caption(focus)
    except Exception:  # noqa: BLE001 - the figure itself reports the error
        pass
    return figure(lambda: plots.timeline(which=which), alt, help_html)
