"""The layout of a timeline: the canvas (time window, rows, legend, bars and labels) and its
lanes, chosen from what shows in the window (:func:`select`) and laid out per process, thread
and stream (:func:`lanes`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from .views import TraceViews

BAR_H = 0.72
_MAX_NVTX_ROWS = 4
_MAX_THREADS = 6


@dataclass
class Canvas:
    """One axes being drawn: the time window, the lanes, the legend so far."""

    ax: Any
    t0: float
    t1: float
    scale: float  # ns per axis unit: µs or ms
    width_chars: float
    rows: list[str] = field(default_factory=list)
    y: dict[str, float] = field(default_factory=dict)
    separators: list[float] = field(default_factory=list)
    legend: dict[str, Any] = field(default_factory=dict)
    #: per row, the right edge (axis units) of the last free-standing label drawn on it
    label_end: dict[float, float] = field(default_factory=dict)
    #: per process, its first and last row (a process's GPU idle band spans only its lanes)
    proc_rows: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def width(self) -> float:
        """The window's width in axis units."""
        return (self.t1 - self.t0) / self.scale

    def x(self, ns: Any) -> Any:
        return (np.asarray(ns, dtype=float) - self.t0) / self.scale

    def add_row(self, key: str, label: str) -> float:
        self.y[key] = len(self.rows)
        self.rows.append(label)
        return self.y[key]

    def bars(self, key: str, x0: Any, x1: Any, color: Any, label: str | None, *,
             edge: Any = None, hatch: str | None = None, lw: float = 0.4, gid: str | None = None,
             h: float = BAR_H, alpha: float = 1.0, z: float = 2) -> Any:
        x0, x1 = np.atleast_1d(x0), np.atleast_1d(x1)
        if not len(x0):
            return None
        # a call far shorter than a pixel still shows as a hairline
        w = np.maximum(x1 - x0, self.width / 2500)
        coll = self.ax.broken_barh(list(zip(x0, w, strict=True)), (self.y[key] - h / 2, h),
                                   facecolors=color, edgecolors=edge or color, linewidth=lw,
                                   hatch=hatch, alpha=alpha, zorder=z)
        coll.set_gid(gid)
        if label and label not in self.legend:
            self.legend[label] = Patch(facecolor=color, edgecolor=edge or color, hatch=hatch,
                                       alpha=alpha, label=label)
        return coll

    def labels(self, key: str, x0: Any, x1: Any, texts: Sequence[str], *, color: str = "black",
               min_chars: int = 4, box: str | None = None) -> None:
        for a, b, t in zip(np.atleast_1d(x0), np.atleast_1d(x1), texts, strict=False):
            a, b = max(a, 0.0), min(b, self.width)
            n = int((b - a) / self.width * self.width_chars)
            if n < min_chars:
                continue
            t = t if len(t) <= n else t[: max(n - 1, 1)] + "…"
            self.ax.text((a + b) / 2, self.y[key], t, ha="center", va="center", fontsize=7.5,
                         color=color, clip_on=True, zorder=6,
                         bbox=None if box is None else dict(facecolor=box, edgecolor="none",
                                                            pad=1.0, alpha=0.9))


@dataclass
class Shown:
    """The rows of each table that show in the time span drawn (not a
    :class:`~nsysscope.trace.windows.Window` of a windowed read)."""

    api: pd.DataFrame
    nvtx: pd.DataFrame
    ops: pd.DataFrame
    graphs: pd.DataFrame
    near: pd.DataFrame  # launches whose call, window, replay or following gap shows
    threads: list[Any]  # host threads drawn, each process's launching one first
    streams: list[tuple[int, int]]  # GPU streams drawn: (process, stream)
    procs: list[int]  # the processes drawn, in lane order


def select(views: TraceViews, t0: float, t1: float) -> Shown:
    graphs = views.graphs.window(t0, t1)
    events = views.events(t0, t1, graphs)
    api = events.api_calls.window(t0, t1)
    nv = events.nvtx.window(t0, t1)
    ops = events.gpu_ops.window(t0, t1)
    near = views.reach.window(t0, t1)
    # host lanes per process: its launching thread first, then its busiest others
    launches = views.launches
    mains = set(launches.groupby("proc")["tid"].agg(lambda t: t.mode().iloc[0]))
    counts = pd.concat([api["tid"], nv["tid"]]).value_counts()
    streams = sorted({(int(p), int(s)) for p, s in zip(graphs["proc"], graphs["stream"],
                                                        strict=True)}
                     | {(int(p), int(s)) for p, s in zip(ops["proc"], ops["stream"], strict=True)})
    procs = sorted({p for p, _ in streams} | {int(t) >> 24 for t in counts.index
                                              if int(t) in mains})
    per_proc = max(2, _MAX_THREADS // max(len(procs), 1))
    threads = []
    for p in procs:
        mine = [int(t) for t in counts.index if int(t) >> 24 == p]
        mine.sort(key=lambda t: (t not in mains, -counts.get(t, 0)))
        threads += mine[:per_proc]
    return Shown(api, nv, ops, graphs, near, threads, streams, procs)


def lanes(c: Canvas, views: TraceViews, w: Shown) -> None:
    """Per process: one group of rows per host thread (NVTX depths, API calls, windows), then
    one row per stream."""
    for p in w.procs:
        first = len(c.rows)
        _thread_lanes(c, views, w, [t for t in w.threads if int(t) >> 24 == p])
        pid = f" (pid {p & 0xFFFFFF})" if len(w.procs) > 1 else ""
        for proc, s in w.streams:
            if proc != p:
                continue
            c.separators.append(len(c.rows) - 0.5)
            g = w.graphs[(w.graphs["proc"] == proc) & (w.graphs["stream"] == s)]
            dev = g["device"] if len(g) else \
                w.ops.loc[(w.ops["proc"] == proc) & (w.ops["stream"] == s), "device"]
            c.add_row(f"gpu:{proc}:{s}", f"GPU {int(dev.iloc[0])}{pid}\nstream {int(s)}")
        c.proc_rows[p] = (first, len(c.rows) - 1)


def _thread_lanes(c: Canvas, views: TraceViews, w: Shown, threads: list[Any]) -> None:
    for tid in threads:
        name = views.thread_names.get(int(tid), f"thread ({int(tid) & 0xFFFFFF})")
        if c.separators or c.rows:
            c.separators.append(len(c.rows) - 0.5)
        depths = sorted(w.nvtx.loc[w.nvtx["tid"] == tid, "depth"].unique())[:_MAX_NVTX_ROWS]
        for k, d in enumerate(depths):
            c.add_row(f"nvtx:{tid}:{d}", f"{name}\nNVTX" if k == 0 else "NVTX")
        if (w.api["tid"] == tid).any() or (w.near["tid"] == tid).any():
            c.add_row(f"api:{tid}", "CUDA API" if depths else f"{name}\nCUDA API")
            mine = w.near[(w.near["tid"] == tid) & w.near["waited"]]
            if len(mine):
                c.add_row(f"win:{tid}", "overlap window")
                # windows that overlap in time (a deep queue) alternate over two rows
                starts, ends = mine["block_start_ns"].to_numpy(), mine["api_end_ns"].to_numpy()
                if (starts[:-1] > ends[1:]).any():
                    c.add_row(f"win2:{tid}", "")


