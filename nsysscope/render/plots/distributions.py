"""Distributions of the steady-state launches: CDFs (or histograms) of the overlap window and
the GPU idle gap, one curve per class."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...analysis import Analysis
from ...model import summary_in
from ...util.units import us_figure as fmt_us
from .style import (
    CLASS_COLORS,
    CLASS_LABELS,
    GRID_COLOR,
    LEGEND_SIZE,
    NsysscopeFigure,
    class_order,
    label_us,
    plain_text,
    use_log,
)


def dist_data(source: Any) -> pd.DataFrame:
    """Steady-state ``window_us``, ``gpu_idle_us``, ``klass`` from an Analysis or a Summary
    (its ``distributions``)."""
    if isinstance(source, Analysis):
        L = source.launch_table.frame(["steady", "window_ns", "gpu_idle_ns", "klass"])
        s = L[L["steady"]]  # (of every column, a copy of the whole table)
        return pd.DataFrame({"window_us": s["window_ns"].to_numpy(dtype=float) / 1e3,
                             "gpu_idle_us": s["gpu_idle_ns"].to_numpy(dtype=float) / 1e3,
                             "klass": s["klass"].astype(str).to_numpy()})
    summary = summary_in(source)
    d = summary.distributions if summary is not None else None
    if d is None:
        return pd.DataFrame({"window_us": [], "gpu_idle_us": [], "klass": []})

    def floats(values: list[float | None]) -> np.ndarray:  # None (no value) becomes NaN
        return np.array([np.nan if v is None else v for v in values], dtype=float)

    return pd.DataFrame({"window_us": floats(d.window_us), "gpu_idle_us": floats(d.gpu_idle_us),
                         "klass": list(d.klass)})


def cdf(ax: Any, v: np.ndarray, log: bool, total: int | None = None, **kw: Any) -> Any:
    """Empirical CDF; with ``total``, scaled so it ends at ``len(v) / total``."""
    v = np.sort(v[np.isfinite(v)])
    if not len(v):
        return None
    if log:
        v = np.maximum(v, 1.0)
    p = np.arange(1, len(v) + 1) / (total or len(v))
    return ax.step(np.concatenate([[v[0]], v]), np.concatenate([[0], p]), where="post", **kw)


def _bins(finite: np.ndarray, log: bool, n: int = 60) -> np.ndarray:
    """Shared bin edges for every class: geometric on a log axis (so a class packed near
    170 µs gets many bins, not one), else linear over the values' range."""
    pos = finite[finite > 0]
    if log and len(pos):
        lo, hi = max(float(pos.min()), 1.0), float(pos.max())
        return np.geomspace(lo, max(hi, lo * 1.01) * 1.01, n)
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    return np.linspace(lo, hi if hi > lo else lo + 1.0, n)


def _dist_axes(ax: Any, data: pd.DataFrame, col: str, title: str, kind: str,
               threshold_us: float | None = None) -> None:
    vals = data[col].to_numpy(dtype=float)
    log = use_log(vals)
    finite = vals[np.isfinite(vals)]
    if kind == "cdf" and len(finite) and data["klass"].nunique() > 1:
        cdf(ax, finite, log, total=len(data), color="#888888", lw=1, ls="--",
             label=f"all steady launches (n={len(finite)})")
    for klass in class_order(data["klass"]):
        v = data.loc[data["klass"] == klass, col].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        label = f"{CLASS_LABELS[klass]} (n={len(v)}, p50 {fmt_us(np.median(v))})"
        color = CLASS_COLORS[klass]
        if kind == "hist":
            ax.hist(np.maximum(v, 1.0) if log else v, bins=_bins(finite, log),
                    histtype="stepfilled", alpha=0.35, color=color, label=label,
                    edgecolor=color, linewidth=1.2)
        else:  # each class ends at its share of the steady launches
            cdf(ax, v, log, total=len(data), color=color, lw=2, label=label)
    if log:
        ax.set_xscale("log")
    label_us(ax.xaxis)
    if threshold_us is not None:
        ax.axvline(threshold_us, color="#555555", ls=":", lw=1)
        ax.annotate(f"launch-bound threshold {fmt_us(threshold_us)}", (threshold_us, 0.02),
                    xycoords=("data", "axes fraction"), fontsize=7.5, color="#555555",
                    rotation=90, ha="right", va="bottom")
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_ylabel("fraction of steady launches ≤ x" if kind == "cdf" else "launches")
    if kind == "cdf":
        ax.set_ylim(0, 1.02)
    else:  # counts of launches: whole numbers
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color=GRID_COLOR, lw=0.6)
    if not len(finite):
        ax.text(0.5, 0.5, "no values", transform=ax.transAxes, ha="center", color="#777777")
    elif ax.get_legend_handles_labels()[0]:  # below the axes: never over a curve
        ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(0.0, -0.16),
                  frameon=False, ncol=1)


@plain_text
def distributions_figure(source: Any, kind: str = "cdf", name: str | None = None) -> Figure:
    """CDFs (or histograms, ``kind="hist"``) of the overlap window and the GPU idle gap of
    the steady-state launches, one curve per class. ``source``: an Analysis, or a Summary
    carrying ``distributions``."""
    if kind not in ("cdf", "hist"):
        raise ValueError("kind must be 'cdf' or 'hist'")
    data = dist_data(source)
    n_leg = data["klass"].nunique() + 1
    fig = NsysscopeFigure(figsize=(13, 4.0 + 0.22 * n_leg))
    ax1, ax2 = fig.subplots(1, 2)
    threshold = None
    summary = summary_in(source)
    if summary is not None:
        threshold = summary.config.get("launch_bound_gap_us")
    _dist_axes(ax1, data, "window_us",
               "Overlap window: launch call end → the wait on it (longer is better)", kind)
    _dist_axes(ax2, data, "gpu_idle_us",
               "GPU idle after each replay, until the next one (shorter is better)", kind,
               threshold_us=threshold)
    ax1.set_xlabel("overlap window")
    ax2.set_xlabel("GPU idle gap")
    if name:
        fig.suptitle(f"{name}: steady-state distributions ({len(data)} launches)", x=0.01,
                     ha="left", fontsize=11)
    fig.tight_layout()
    return fig

