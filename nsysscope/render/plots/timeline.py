"""An nsys-like timeline of a few steps: one lane group per host thread (NVTX ranges, CUDA
API calls, overlap windows), one lane per GPU stream (graph replays, eager work, idle gaps).
A trace with several processes (tensor-parallel ranks) gets one group of lanes per process:
its threads, then its streams (stream ids repeat across processes, so a lane is keyed by both).

:func:`timeline_figure` draws a whole figure; :func:`draw_timeline` draws into one axes (the
comparison figure stacks two). Drawing is split by layer, in the order the layers are drawn:
the lanes, the GPU idle gaps, the NVTX ranges, the API calls, the overlap windows, the GPU
streams, the launch-to-replay arrows, and the axes' frame.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ...model import LaunchClass
from ...trace.apis import LAUNCH_APIS, is_copy_api
from ...util.units import us_figure as fmt_us
from ..palette import is_light
from .canvas import BAR_H, Canvas, Shown, lanes, select
from .style import (
    BLOCK_LABELS,
    CLASS_COLORS,
    COPY_CALL_COLOR,
    COPY_CALL_EDGE,
    EAGER_COLOR,
    GRAPH_COLOR,
    IDLE_COLOR,
    LEGEND_COLUMNS,
    LEGEND_SIZE,
    NVTX_COLORS,
    OTHER_CALL_COLOR,
    STALLS,
    UNPAIRED_WAIT_COLOR,
    axes_width_chars,
    fig_ax,
    plain_text,
)
from .views import TraceViews

_HEALTHY = CLASS_COLORS[LaunchClass.HEALTHY]
_IDLE_LEGEND = "GPU idle (hatched, tinted by the stall that caused it)"
_BAND_LEGEND = "GPU idle, carried across the host lanes (pale band)"


@plain_text
def timeline_figure(views: TraceViews, steps: Sequence[int] | None = None,
                    which: str | None = None, ax: Any = None, *,
                    launches: Sequence[int] | None = None, context: int = 1,
                    title: str | None = None, pid: int | None = None) -> Figure:
    """The timeline of ``steps``, ``launches`` or the ``which`` launch (see
    :meth:`~nsysscope.render.plots.TracePlots.timeline`)."""
    t0, t1, focus, what = views.window_for(steps, which, launches, context, pid)
    pad = 0.015 * (t1 - t0)
    t0, t1 = t0 - pad, t1 + pad
    fig, ax, own = fig_ax(ax, figsize=(13, 4))
    info = draw_timeline(views, ax, t0, t1, focus)
    if title is None:
        title = _title(views, what, focus)
    ax.set_title(title, loc="left", fontsize=10)
    if own:
        n_leg = -(-len(info["legend"]) // LEGEND_COLUMNS)
        height = 1.3 + 0.36 * info["rows"] + 0.24 * n_leg + 0.2 * title.count("\n")
        fig.set_size_inches(13, height)
        fig.legend(handles=list(info["legend"].values()), loc="lower center",
                   ncol=LEGEND_COLUMNS, fontsize=LEGEND_SIZE, frameon=False)
        fig.tight_layout(rect=(0, (0.26 * n_leg + 0.05) / height, 1, 1))
    return fig


def _title(views: TraceViews, what: str, focus: int | None) -> str:
    title = f"{views.name}: {what}"
    if focus is not None:
        r = views.launch_row(focus)
        title += f" - launch {focus}"
        step = views.step_of(float(r["api_start_ns"]), int(r["tid"]))
        if step is not None:
            title += f" (step {step})"
        title += f", {r['klass']}"
        title += "\n" + "\n".join(textwrap.wrap(views.caption(focus), 150))
    return title


@plain_text
def draw_timeline(views: TraceViews, ax: Any, t0: float, t1: float,
                  focus: int | None = None) -> dict[str, Any]:
    """Draw the window [t0, t1] (ns) into ``ax``; returns the number of rows and the legend."""
    span = t1 - t0
    scale = 1e3 if span < 3e6 else 1e6
    c = Canvas(ax, t0, t1, scale, axes_width_chars(ax))
    w = select(views, t0, t1)
    lanes(c, views, w)
    _draw_gaps(c, w.near, span)
    _draw_nvtx(c, w)
    _draw_api(c, w)
    _draw_windows(c, w)
    _draw_gpu(c, w, focus)
    _draw_arrows(c, w.near)
    _finish(c, "µs" if scale == 1e3 else "ms")
    return {"rows": len(c.rows), "legend": c.legend}


def _draw_gaps(c: Canvas, near: pd.DataFrame, span: float) -> None:
    """GPU idle gaps: shaded on the GPU lane and faintly across the host lanes."""
    rows = near[near["gpu_idle_ns"].notna() & (near["gpu_end_ns"] < c.t1) &
                (near["next_gpu_start_ns"] > c.t0)]
    shown = (rows["gpu_idle_ns"] > 0.004 * span) | rows["stall"] | \
        (rows["klass"].astype(str) == LaunchClass.LAUNCH_BOUND)
    rows = rows[shown & (rows["gpu_idle_ns"] > 0)]
    for r in rows.itertuples():
        klass = str(r.klass)
        color = CLASS_COLORS.get(klass, IDLE_COLOR) if klass != LaunchClass.HEALTHY \
            else IDLE_COLOR
        a, b = c.x(r.gpu_end_ns), c.x(r.next_gpu_start_ns)
        top, bottom = c.proc_rows.get(int(r.proc), (0, len(c.rows) - 1))
        c.ax.add_patch(Rectangle((a, top - 0.5), b - a, bottom - top + 1, color=color,
                                 alpha=0.07, lw=0, zorder=0))
        key = f"gpu:{r.proc}:{r.stream}"
        if key in c.y:
            c.bars(key, a, b, "white", None, edge=color, hatch="////", lw=0.8, gid="gpu-idle",
                   z=1)
            c.legend.setdefault(_IDLE_LEGEND, Patch(facecolor="white", edgecolor=IDLE_COLOR,
                                                    hatch="////", label=_IDLE_LEGEND))
            c.labels(key, a, b, [f"GPU idle {fmt_us(r.gpu_idle_ns / 1e3)}"], color=color,
                     min_chars=14, box="white")
        c.legend.setdefault(_BAND_LEGEND, Patch(facecolor=IDLE_COLOR, alpha=0.15, lw=0,
                                                label=_BAND_LEGEND))


def _draw_nvtx(c: Canvas, w: Shown) -> None:
    for tid in w.threads:
        part = w.nvtx[w.nvtx["tid"] == tid]
        for d in part["depth"].unique():
            key = f"nvtx:{tid}:{d}"
            if key not in c.y:
                continue
            p = part[part["depth"] == d]
            a, b = c.x(p["start_ns"]), c.x(p["end_ns"])
            c.bars(key, a, b, NVTX_COLORS[int(d) % 2], "NVTX range (step, phase, op)",
                   edge="#8C8C8C", gid="nvtx")
            c.labels(key, a, b, p["text"].tolist(), min_chars=3)


def _draw_api(c: Canvas, w: Shown) -> None:
    """CUDA API calls: launches, copies, waits coloured by class, the rest."""
    for tid in w.threads:
        key = f"api:{tid}"
        if key not in c.y:
            continue
        part = w.api[w.api["tid"] == tid]
        is_launch = part["name"].isin(LAUNCH_APIS)
        is_wait = part["block"] >= 0
        is_copy = part["name"].map(is_copy_api).astype(bool) & ~is_wait
        other = part[~is_launch & ~is_wait & ~is_copy]
        c.bars(key, c.x(other["start_ns"]), c.x(other["end_ns"]), OTHER_CALL_COLOR,
               "other CUDA call (event record...)", gid="api:other")
        cp = part[is_copy]
        c.bars(key, c.x(cp["start_ns"]), c.x(cp["end_ns"]), COPY_CALL_COLOR,
               "cudaMemcpyAsync call", gid="api:copy", edge=COPY_CALL_EDGE)
        ln = part[is_launch]
        c.bars(key, c.x(ln["start_ns"]), c.x(ln["end_ns"]), GRAPH_COLOR,
               "cudaGraphLaunch call / graph replay", gid="api:launch")
        c.labels(key, c.x(ln["start_ns"]), c.x(ln["end_ns"]), ["launch"] * len(ln),
                 color="white")
        _draw_waits(c, key, part[is_wait])


def _draw_waits(c: Canvas, key: str, waits: pd.DataFrame) -> None:
    for klass in (LaunchClass.HEALTHY, *STALLS, "unpaired"):
        w = waits[waits["wait_class"] == klass]
        if w.empty:
            continue
        stall = klass in STALLS
        color = CLASS_COLORS.get(klass, UNPAIRED_WAIT_COLOR)
        c.bars(key, c.x(w["start_ns"]), c.x(w["end_ns"]), color,
               BLOCK_LABELS.get(klass, "wait, not on a graph launch"), gid=f"block:{klass}",
               edge="black" if stall else None, lw=0.8 if stall else 0.4)
        dark = klass == "unpaired" or (stall and not is_light(klass))
        c.labels(key, c.x(w["start_ns"]), c.x(w["end_ns"]),
                 [f"{n.replace('cuda', '')} {fmt_us((e - s) / 1e3)}" for n, s, e in
                  zip(w["name"], w["start_ns"], w["end_ns"], strict=True)],
                 color="white" if dark else "black")


def _draw_windows(c: Canvas, w: Shown) -> None:
    """Overlap windows: a bracket from the end of the launch call to the start of its block."""
    for tid in w.threads:
        key = f"win:{tid}"
        if key not in c.y:
            continue
        near = w.near
        part = near[(near["tid"] == tid) & near["waited"] & (near["block_start_ns"] > c.t0) &
                    (near["api_end_ns"] < c.t1)]
        two = f"win2:{tid}" in c.y
        starts = c.x(part["api_end_ns"].to_numpy(dtype=float))
        rows = list(part.itertuples())
        for i, r in enumerate(rows):
            color = CLASS_COLORS.get(str(r.klass), _HEALTHY) if r.stall else _HEALTHY
            # consecutive windows of the thread alternate rows (by their order here: launch
            # numbers interleave across processes, so one rank's are often all odd)
            base = c.y[f"win2:{tid}"] if two and i % 2 else c.y[key]
            k = i + (2 if two else 1)  # a label beside it stops at the row's next bracket
            _bracket(c, r, base + 0.22, color, float(starts[k]) if k < len(rows) else c.width)
        if len(part):
            stalled = part["stall"].to_numpy()
            color = CLASS_COLORS.get(str(part.loc[part["stall"], "klass"].iloc[0]), "#555555") \
                if stalled.all() else _HEALTHY if not stalled.any() else "#555555"
            c.legend["overlap window: launch call end to the wait that blocks on it"] = Line2D(
                [], [], color=color, lw=1.6,
                label="overlap window (launch end to its wait; class colour)")


def _bracket(c: Canvas, r: Any, yy: float, color: str, limit: float = np.inf) -> None:
    a, b = float(c.x(r.api_end_ns)), float(c.x(r.block_start_ns))
    c.ax.plot([a, a, b, b], [yy - 0.3, yy, yy, yy - 0.3], color=color, lw=1.6,
              solid_capstyle="butt", zorder=4, gid="window")
    vis = (min(b, c.width) - max(a, 0)) / c.width * c.width_chars
    txt = f"#{r.launch} window {fmt_us(r.window_ns / 1e3)}"
    if vis < len(txt) + 2:
        txt = fmt_us(r.window_ns / 1e3)
    if vis >= len(txt) + 2:
        c.ax.text((max(a, 0) + min(b, c.width)) / 2, yy - 0.06, txt, ha="center",
                  va="bottom", fontsize=7, color=color, clip_on=True, zorder=6)
        return
    # too narrow for the text inside: to the right of the bracket, unless that would run
    # into the previous label on this row (many steps in view) or the next bracket's
    per_char, x = c.width / c.width_chars * 0.95, b + c.width * 0.004
    if x < c.label_end.get(yy, -np.inf) or x + len(txt) * per_char > min(c.width, limit):
        return
    c.ax.text(x, yy - 0.06, txt, ha="left", va="bottom", fontsize=7, color=color,
              clip_on=True, zorder=6)
    c.label_end[yy] = x + (len(txt) + 1) * per_char


def _draw_gpu(c: Canvas, w: Shown, focus: int | None) -> None:
    """GPU streams: graph replays (the focus launch outlined) and eager work."""
    for p, s in w.streams:
        key = f"gpu:{p}:{s}"
        g = w.graphs[(w.graphs["proc"] == p) & (w.graphs["stream"] == s)]
        if len(g):
            edge = np.where(g["launch"].to_numpy() == (focus if focus is not None else -1),
                            "black", GRAPH_COLOR)
            c.bars(key, c.x(g["gpu_start_ns"]), c.x(g["gpu_end_ns"]), GRAPH_COLOR,
                   "cudaGraphLaunch call / graph replay", edge=list(edge), gid="graph", lw=1.2)
            c.labels(key, c.x(g["gpu_start_ns"]), c.x(g["gpu_end_ns"]),
                     [f"graph #{n}  {fmt_us((e - s_) / 1e3)}" for n, s_, e in
                      zip(g["launch"], g["gpu_start_ns"], g["gpu_end_ns"], strict=True)],
                     color="white")
        o = w.ops[(w.ops["proc"] == p) & (w.ops["stream"] == s)]
        if len(o):
            c.bars(key, c.x(o["start_ns"]), c.x(o["end_ns"]), EAGER_COLOR,
                   "eager kernel / copy on the GPU", gid="eager", h=BAR_H * 0.6, z=3)


def _draw_arrows(c: Canvas, near: pd.DataFrame) -> None:
    """A dotted line from each launch call to its replay on the GPU."""
    for r in near.itertuples():
        key = f"gpu:{r.proc}:{r.stream}"
        if key in c.y and f"api:{r.tid}" in c.y and np.isfinite(r.gpu_start_ns) and \
                c.t0 <= r.api_start_ns < c.t1 and c.t0 < r.gpu_start_ns < c.t1:
            c.ax.annotate("", xy=(c.x(r.gpu_start_ns), c.y[key] - BAR_H / 2),
                          xytext=(c.x(r.api_start_ns), c.y[f"api:{r.tid}"] + BAR_H / 2),
                          arrowprops=dict(arrowstyle="->", color=GRAPH_COLOR, lw=0.7,
                                          ls=(0, (2, 2)), shrinkA=0, shrinkB=0), zorder=5)


def _finish(c: Canvas, unit: str) -> None:
    ax = c.ax
    for s_ in c.separators:
        ax.axhline(s_, color="#555555", lw=0.8, zorder=1)
    ax.set_ylim(len(c.rows) - 0.5, -0.5)
    ax.set_yticks(range(len(c.rows)))
    ax.set_yticklabels(c.rows, fontsize=8)
    ax.set_xlim(0, c.width)
    ax.set_xlabel(f"time ({unit}) since t0 = {c.t0 / 1e9:.6f} s into the capture")
    ax.grid(axis="x", color="#DDDDDD", lw=0.5, zorder=0)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.nsysscope_rows = dict(c.y)  # row key -> y position, for tests and callers
    ax.nsysscope_window = (c.t0, c.t1, c.scale)
