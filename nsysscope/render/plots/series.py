"""Per-launch values over the whole capture: GPU idle gap, overlap window, launch interval.

Series with many launches are thinned to an evenly spaced sample plus a binned
median/min/max envelope, so no outlier disappears.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ...analysis import Analysis
from ...model import NOT_JUDGED, LaunchClass
from ...util.units import us_figure as fmt_us
from .style import (
    CLASS_COLORS,
    CLASS_LABELS,
    GRID_COLOR,
    LEGEND_SIZE,
    STALLS,
    NsysscopeFigure,
    class_order,
    label_us,
    plain_text,
    use_log,
)

SERIES_POINTS = 2500  # per class, before thinning
_SERIES_BINS = 600


def _thin(idx: np.ndarray, n: int) -> np.ndarray:
    if len(idx) <= n:
        return idx
    picked: np.ndarray = idx[np.linspace(0, len(idx) - 1, n).astype(int)]
    return picked


#: the per-launch columns the series read
SERIES_COLUMNS = ["proc", "api_start_ns", "next_api_start_ns", "gpu_idle_ns", "window_ns",
                  "klass", "warmup", "steady"]


def _warmup_spans(L: pd.DataFrame, t: np.ndarray) -> list[tuple[float, float]]:
    """Per process, from its first warm-up launch to its first steady one (seconds on the
    figure's axis ``t``); a process with no steady launch: to its last warm-up launch."""
    spans = []
    warm = L["warmup"].to_numpy(dtype=bool)
    steady = L["steady"].to_numpy(dtype=bool)
    for rows in L.groupby("proc", sort=False).indices.values():
        w, s = rows[warm[rows]], rows[steady[rows]]
        if len(w):
            spans.append((float(t[w[0]]), float(t[s[0]] if len(s) else t[w[-1]])))
    return spans


@plain_text
def series_figure(analysis: Analysis, max_points: int = SERIES_POINTS,
                  name: str | None = None) -> Figure:
    """Per-launch values over the capture: GPU idle gap, overlap window and launch interval,
    coloured by class; warm-up shaded. Long traces are thinned (every class keeps up to
    ``max_points`` evenly spaced launches) and get a binned median and min/max band."""
    L = analysis.launch_table.frame(SERIES_COLUMNS)  # not every column of a long trace's
    fig = NsysscopeFigure(figsize=(13, 7.2))
    axes = fig.subplots(3, 1, sharex=True)
    if L.empty:
        return fig
    t_first = float(L["api_start_ns"].min())
    t = (L["api_start_ns"].to_numpy(dtype=float) - t_first) / 1e9
    klass = L["klass"].astype(str).to_numpy()
    # to the next launch of the same process and stream (launches of several processes
    # interleave in issue order)
    interval = (L["next_api_start_ns"] - L["api_start_ns"]).to_numpy(dtype=float) / 1e3
    panels = [("gpu_idle_us", L["gpu_idle_ns"].to_numpy(dtype=float) / 1e3, "GPU idle",
               "GPU idle after each replay, until the next one (shorter is better)"),
              ("window_us", L["window_ns"].to_numpy(dtype=float) / 1e3, "overlap window",
               "Overlap window: launch call end → the host's wait on it (longer is better)"),
              ("interval_us", interval, "launch interval",
               "Launch-to-launch interval (≈ step time)")]
    warm = int(analysis.summary.warmup_launches)
    warm_spans = _warmup_spans(L, t)
    thinned = len(L) > max_points
    for ax, (col, v, label, title) in zip(axes, panels, strict=True):
        for a, b in warm_spans:  # each process's own warm-up
            ax.axvspan(a, b, color="#BBBBBB", alpha=0.3, lw=0, zorder=0)
        if thinned:  # binned envelope so nothing is hidden by thinning
            ok = np.isfinite(v)
            if ok.sum() > 1:
                bins = np.linspace(t[ok].min(), t[ok].max() + 1e-9, _SERIES_BINS + 1)
                which = np.digitize(t[ok], bins) - 1
                df = pd.DataFrame({"b": which, "v": v[ok]}).groupby("b")["v"].agg(
                    ["min", "median", "max"])
                mid = (bins[df.index.to_numpy()] + bins[df.index.to_numpy() + 1]) / 2
                ax.fill_between(mid, np.maximum(df["min"], 1.0), df["max"], color="#999999",
                                alpha=0.25, lw=0, step="mid", label="min-max per bin", zorder=1)
                ax.plot(mid, np.maximum(df["median"], 1.0), color="#444444", lw=0.8,
                        drawstyle="steps-mid", label="median per bin", zorder=2)
        present = set(pd.unique(klass))
        for k in class_order(klass) + [k for k in NOT_JUDGED if k in present]:
            idx = np.flatnonzero((klass == k) & np.isfinite(v))
            idx = _thin(idx, max_points)
            if not len(idx):
                continue
            stall = k in STALLS
            ax.scatter(t[idx], np.maximum(v[idx], 1.0), s=14 if stall else 7,
                       color=CLASS_COLORS[k], label=CLASS_LABELS[k], zorder=4 if stall else 3,
                       marker="o" if k != LaunchClass.LAUNCH_BOUND else "D", linewidths=0)
        vals = v[np.isfinite(v) & (v > 0)]
        # log when a few outliers (warm-up, intermittent stalls) would flatten the rest
        if len(vals) > 1 and (use_log(vals) or vals.max() / np.median(vals) > 8):
            ax.set_yscale("log")
        label_us(ax.yaxis)
        if col == "gpu_idle_us":
            thr = analysis.summary.config.get("launch_bound_gap_us")
            if thr:
                ax.axhline(thr, color="#555555", ls=":", lw=1, zorder=2)
                ax.annotate(f"launch-bound threshold {fmt_us(thr)}", (1.0, thr),
                            xycoords=("axes fraction", "data"), ha="right", va="bottom",
                            fontsize=7.5, color="#555555")
        ax.set_ylabel(label, fontsize=8.5)
        ax.set_title(title, loc="left", fontsize=9.5)
        ax.grid(True, color=GRID_COLOR, lw=0.6)
    h, lab = [], []
    for ax in axes:  # every class that shows in any panel, once
        for hh, ll in zip(*ax.get_legend_handles_labels(), strict=True):
            if ll not in lab:
                h.append(hh)
                lab.append(ll)
    if warm_spans:
        h.append(Patch(color="#BBBBBB", alpha=0.5))
        several = len(warm_spans) > 1
        lab.append(f"warm-up{' of each process' if several else ''} ({warm} launches"
                   f"{' in all' if several else ''}, not judged)")
    fig.legend(h, lab, fontsize=LEGEND_SIZE, loc="lower center", ncol=min(len(h), 4), frameon=False,
               markerscale=1.8)
    axes[-1].set_xlabel("time since the first graph launch (s)")
    title = f"{name or ''}: per-launch series, {len(L)} launches".lstrip(": ")
    if thinned:
        title += (f" (thinned to ≤{max_points} points per class, plus a binned median and "
                  "min-max band)")
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    n_leg = -(-len(h) // 4)
    fig.tight_layout(rect=(0, (0.25 * n_leg + 0.1) / 7.2, 1, 1))
    return fig

