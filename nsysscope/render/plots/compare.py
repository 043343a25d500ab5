"""Baseline next to candidate: both traces' distributions on shared axes, each class's share,
and, when both are analyses, a timeline of each on one time scale (the gate page's figure)."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from ...analysis import Analysis
from ...model import LaunchClass, summary_in
from ...util.units import us_figure as fmt_us
from .distributions import cdf, dist_data
from .style import (
    CLASS_COLORS,
    GRID_COLOR,
    LEGEND_COLUMNS,
    LEGEND_SIZE,
    OKABE_ITO,
    NsysscopeFigure,
    class_order,
    label_us,
    plain_text,
    use_log,
)
from .timeline import draw_timeline
from .views import TraceViews

#: characters of a verdict line on top of the 14-inch figure, at 9.5 pt
_VERDICT_CHARS = 165


def _name_of(source: Any, default: str) -> str:
    summary = summary_in(source)
    path = summary.trace.path if summary is not None else None
    return str(path).replace("\\", "/").rsplit("/", 1)[-1] if path else default


@plain_text
def compare_figure(a: Any, b: Any, labels: tuple[str, str] | None = None, timelines: bool = True,
                   which: tuple[str, str] = ("typical", "worst")) -> Figure:
    """Baseline ``a`` next to candidate ``b`` (each an Analysis, an OpenTrace or a Summary
    with ``distributions``): CDFs of both traces' overlap windows and GPU gaps on shared
    axes, the share of steady launches per class, and a timeline of each side that is an
    analysis (by default the baseline's typical launch above the candidate's worst stall, on
    the same time scale; ``which`` picks). A summary has no timeline: with a summary as
    baseline, the candidate's timeline is drawn alone."""
    a = getattr(a, "analysis", a)
    b = getattr(b, "analysis", b)
    labels = labels or (f"baseline: {_name_of(a, 'a')}", f"candidate: {_name_of(b, 'b')}")
    da, db = dist_data(a), dist_data(b)
    drawn = [(x, w, lab) for x, w, lab in ((a, which[0], labels[0]), (b, which[1], labels[1]))
             if timelines and isinstance(x, Analysis)]
    both_traces = bool(drawn)
    sa, sb = summary_in(a), summary_in(b)
    # each side's verdict on top, wrapped to the figure's width (a long one ran off it)
    verdicts = [line for lab, s_ in ((labels[0], sa), (labels[1], sb)) if s_ and sa and sb
                for line in textwrap.wrap(f"{lab}: {s_.verdict}", _VERDICT_CHARS,
                                          subsequent_indent="    ")]
    head = 0.2 * len(verdicts) + 0.05 if verdicts else 0.1  # inches for them
    height = 4.6 + 3.1 * len(drawn) + (1.1 if drawn else 0.0) + head
    fig = NsysscopeFigure(figsize=(14, height))
    if both_traces:
        gs = fig.add_gridspec(1 + len(drawn), 3, height_ratios=[1.15] + [1.45] * len(drawn))
        top = [fig.add_subplot(gs[0, i]) for i in range(3)]
    else:
        top = list(fig.subplots(1, 3))
    styles: list[dict[str, Any]] = [dict(color="#555555", ls="--"),
                                    dict(color=OKABE_ITO["blue"], ls="-")]
    for ax, col, title in ((top[0], "window_us", "Overlap window (longer is better)"),
                           (top[1], "gpu_idle_us", "GPU idle gap (shorter is better)")):
        allv = np.concatenate([da[col].to_numpy(dtype=float), db[col].to_numpy(dtype=float)])
        log = use_log(allv)
        for d, lab, st in ((da, labels[0], styles[0]), (db, labels[1], styles[1])):
            v = d[col].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if len(v):
                cdf(ax, v, log, lw=2, label=f"{lab.split(':')[0]}: p50 {fmt_us(np.median(v))}, "
                                             f"p90 {fmt_us(np.percentile(v, 90))}", **st)
        if log:
            ax.set_xscale("log")
        label_us(ax.xaxis)
        ax.set_ylim(0, 1.02)
        ax.set_title(title, loc="left", fontsize=10)
        ax.set_ylabel("fraction of steady launches ≤ x", fontsize=8.5)
        ax.grid(True, color=GRID_COLOR, lw=0.6)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(0, -0.12),
                      frameon=False)
    # class shares: baseline hatched and pale, candidate solid
    ax = top[2]
    both = np.concatenate([np.asarray(d["klass"], dtype=object) for d in (da, db)])
    klasses = class_order(both) or [LaunchClass.HEALTHY]
    pos = np.arange(len(klasses))
    for i, d in enumerate((da, db)):
        n = max(len(d), 1)
        share = np.array([(d["klass"] == k).sum() / n for k in klasses])
        yy = pos + (i - 0.5) * 0.4
        ax.barh(yy, share, height=0.38, color=[CLASS_COLORS[k] for k in klasses],
                alpha=0.4 if i == 0 else 1.0, edgecolor="black", linewidth=0.6,
                hatch="//" if i == 0 else None)
        for p_, s_ in zip(yy, share, strict=True):
            ax.text(s_ + 0.01, p_, f"{s_:.0%}" if s_ >= 0.005 else "0%", va="center", fontsize=7)
    ax.set_yticks(pos)
    ax.set_yticklabels(klasses, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}" if v <= 1 else ""))
    ax.set_title("Share of steady launches per class", loc="left", fontsize=10)
    ax.legend(handles=[Patch(facecolor="#DDDDDD", edgecolor="black", hatch="//",
                             label=f"{labels[0].split(':')[0]} (upper bar, hatched)"),
                       Patch(facecolor="#555555", edgecolor="black",
                             label=f"{labels[1].split(':')[0]} (lower bar)")],
              fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(0, -0.12), frameon=False)
    ax.grid(True, axis="x", color=GRID_COLOR, lw=0.6)
    bottom = 0.0
    if both_traces:
        views = [(TraceViews(x), lab) for x, _, lab in drawn]
        windows = [v.window_for(which=w) for (v, _), (_, w, _) in zip(views, drawn, strict=True)]
        width = max(w[1] - w[0] for w in windows) * 1.03
        legend: dict[str, Any] = {}
        same = "; both timelines on the same time scale" if len(drawn) == 2 else \
            ("; the baseline is a summary, which has no timeline" if drawn[0][0] is b else
             "; the candidate is a summary, which has no timeline")
        for row, ((p, lab), w) in enumerate(zip(views, windows, strict=True)):
            axt = fig.add_subplot(gs[1 + row, :])
            t0 = w[0] - 0.015 * width
            info = draw_timeline(p, axt, t0, t0 + width, w[2])
            legend.update(info["legend"])
            assert w[2] is not None  # a window chosen by which= shows a launch
            klass = p.launch_row(w[2])["klass"]
            axt.set_title(f"{lab} - {w[3]} (launch {w[2]}, {klass}){same}", loc="left",
                          fontsize=10)
        fig.legend(handles=list(legend.values()), loc="lower center", ncol=LEGEND_COLUMNS,
                   fontsize=LEGEND_SIZE, frameon=False)
        bottom = (0.26 * -(-len(legend) // LEGEND_COLUMNS) + 0.05) / height
    if verdicts:
        fig.suptitle("\n".join(verdicts), x=0.01, y=0.995, ha="left", va="top", fontsize=9.5)
    fig.tight_layout(rect=(0, bottom, 1, 1))  # tight_layout makes room for the suptitle
    return fig

