"""nsysscope.render.plots on the real H200 samples: the pictures show what the analysis found.

The timeline is checked through its artists: bars are ``broken_barh`` collections tagged with
a gid (``block:<class>``, ``nvtx``, ``graph``, ``gpu-idle``...), and ``ax.nsysscope_rows`` maps
each lane row to its y position.
"""

from __future__ import annotations

import io
import time

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba

matplotlib.use("Agg")

from nsysscope.render.plots import (  # noqa: E402
    CLASS_COLORS,
    NsysscopeFigure,
    TracePlots,
    compare_figure,
    pick_launch,
)


def bars(ax, gid: str):
    """(x0, x1, y_mid, facecolor) of every bar in the collections tagged ``gid``."""
    out = []
    for coll in ax.collections:
        if coll.get_gid() != gid:
            continue
        faces = coll.get_facecolors()
        for i, path in enumerate(coll.get_paths()):
            v = path.vertices
            out.append((v[:, 0].min(), v[:, 0].max(), (v[:, 1].min() + v[:, 1].max()) / 2,
                        tuple(faces[i % len(faces)])))
    return out


def texts(ax, s: str):
    return [t for t in ax.texts if t.get_text() == s]


def row_of(ax, y: float) -> str:
    rows = ax.nsysscope_rows
    return min(rows, key=lambda k: abs(rows[k] - y))


@pytest.fixture(scope="module")
def case1_worst(analysed):
    return TracePlots(analysed("case1")).timeline(which="worst")


def test_case1_timeline_shows_the_host_blocked_in_sample_while_the_gpu_goes_idle(case1_worst,
                                                                                 analysed):
    ax = case1_worst.axes[0]
    t0, t1, scale = ax.nsysscope_window
    stalls = bars(ax, "block:gpu_to_cpu")
    assert stalls, "no gpu_to_cpu-coloured wait drawn"
    assert all(face == pytest.approx(to_rgba(CLASS_COLORS["gpu_to_cpu"])) for *_, face in stalls)
    assert all(row_of(ax, y).startswith("api:") for _, _, y, _ in stalls)
    # each stalled wait lies inside an NVTX range labelled 'sample' on the same thread
    sample_ranges = []
    for x0, x1, y, _ in bars(ax, "nvtx"):
        if any(x0 <= t.get_position()[0] <= x1 and abs(t.get_position()[1] - y) < 0.3
               for t in texts(ax, "sample")):
            sample_ranges.append((x0, x1))
    assert sample_ranges, "no NVTX 'sample' range drawn"
    inside = [b for b in stalls if any(a <= b[0] and b[1] <= z + 1e-9 for a, z in sample_ranges)]
    assert len(inside) >= 2, "the readback waits are not drawn inside 'sample'"
    # the GPU goes idle right when such a wait ends (the wait ended with the graph), for > 1 ms
    idle = bars(ax, "gpu-idle")
    assert idle and all(row_of(ax, y).startswith("gpu:") for _, _, y, _ in idle)
    ms = 1e6 / scale  # axis units per millisecond
    follows = [(a, z) for a, z, _, _ in idle
               if z - a > 1.0 * ms and any(abs(a - b[1]) < 0.1 * ms for b in inside)]
    assert follows, "no >1 ms GPU idle gap starting when a 'sample' wait ends"
    # the overlap window bracket of every stalled launch is drawn
    assert sum(1 for line in ax.lines if line.get_gid() == "window") >= 2
    title = ax.get_title(loc="left")
    assert "gpu_to_cpu" in title and "sample" in title


def test_healthy_timeline_has_back_to_back_replays_and_only_healthy_waits(analysed):
    fig = TracePlots(analysed("healthy")).timeline(which="typical")
    ax = fig.axes[0]
    assert bars(ax, "block:healthy")
    for klass in ("gpu_to_cpu", "cpu_to_gpu", "other_stall"):
        assert not bars(ax, f"block:{klass}")
    graphs = sorted(bars(ax, "graph"))
    assert len(graphs) >= 3
    _, _, scale = ax.nsysscope_window
    gaps = [b[0] - a[1] for a, b in zip(graphs, graphs[1:], strict=False)]
    assert max(gaps) < 0.1 * 1e6 / scale  # < 100 us between consecutive replays


def test_case2_timeline_blocks_in_launch_with_a_cpu_to_gpu_wait(analysed):
    ax = TracePlots(analysed("case2")).timeline(which="worst").axes[0]
    waits = bars(ax, "block:cpu_to_gpu")
    assert waits and all(face == pytest.approx(to_rgba(CLASS_COLORS["cpu_to_gpu"]))
                         for *_, face in waits)
    launch_ranges = [(x0, x1) for x0, x1, y, _ in bars(ax, "nvtx")
                     if any(x0 <= t.get_position()[0] <= x1 and abs(t.get_position()[1] - y) < 0.3
                            for t in texts(ax, "launch"))]
    assert any(a <= w[0] and w[1] <= z for w in waits for a, z in launch_ranges)


def test_pick_launch(analysed):
    L = analysed("case1").launches
    worst = pick_launch(L, "worst")
    steady_stalls = L[L["steady"] & L["stall"]]
    assert L.loc[worst, "gpu_idle_ns"] == steady_stalls["gpu_idle_ns"].max()
    typical = pick_launch(L, "typical")
    med = L.loc[L["steady"], "gpu_idle_ns"].median()
    assert abs(L.loc[typical, "gpu_idle_ns"] - med) < 0.05 * med
    with pytest.raises(ValueError):
        pick_launch(L, "best")


def test_timeline_by_steps_launches_and_into_a_given_axes(analysed):
    p = TracePlots(analysed("case1"))
    ax = p.timeline(steps=range(100, 103)).axes[0]
    labels = {t.get_text() for t in ax.texts}
    assert {"step 100", "step 101", "step 102"} <= labels
    assert "step 104" not in labels
    graphs = {t.get_text().split()[1] for t in p.timeline(launches=[50, 51]).axes[0].texts
              if t.get_text().startswith("graph #")}
    assert {"#50", "#51"} <= graphs and "#53" not in graphs
    own = NsysscopeFigure(figsize=(10, 4))
    target = own.add_subplot(1, 1, 1)
    assert p.timeline(which="typical", ax=target) is own
    assert target.nsysscope_rows


def test_timeline_of_a_long_trace_draws_only_the_window(analysed):
    a = analysed("healthy_long")
    p = TracePlots(a)
    p.timeline(which="typical")  # builds the sorted caches
    start = time.perf_counter()
    fig = p.timeline(which="worst")
    elapsed = time.perf_counter() - start
    ax = fig.axes[0]
    n_bars = sum(len(c.get_paths()) for c in ax.collections)
    assert n_bars < 400, f"{n_bars} bars drawn for a few steps"
    assert len(ax.texts) < 200
    assert elapsed < 5.0
    # the 5000-launch series is thinned to the point budget and keeps a binned envelope
    s = p.series(max_points=1000)
    scatters = [c for c in s.axes[0].collections if isinstance(c, PathCollection)]
    assert scatters and max(c.get_offsets().shape[0] for c in scatters) <= 1000
    assert "thinned" in s.get_suptitle()
    assert any(c.get_label() == "min-max per bin" for c in s.axes[0].collections)


def test_distributions_use_log_axes_across_decades_and_class_colours(analysed):
    fig = TracePlots(analysed("case1_tolist_every4")).distributions()
    win, gap = fig.axes
    assert gap.get_xscale() == "log"  # 20 us healthy gaps and 1-3 ms stalls
    colours = {tuple(np.round(to_rgba(line.get_color()), 3)) for line in gap.lines}
    assert tuple(np.round(to_rgba(CLASS_COLORS["gpu_to_cpu"]), 3)) in colours
    assert tuple(np.round(to_rgba(CLASS_COLORS["healthy"]), 3)) in colours
    legend = " ".join(t.get_text() for t in gap.get_legend().get_texts())
    assert "gpu_to_cpu" in legend and "healthy" in legend
    assert "µs" in " ".join(t.get_text() for t in gap.get_xticklabels()) or \
        "ms" in " ".join(t.get_text() for t in gap.get_xticklabels())
    hist = TracePlots(analysed("case1")).distributions(kind="hist")
    assert hist.axes[0].patches


def test_series_shows_warmup_and_every_launch(analysed):
    a = analysed("case1")
    fig = TracePlots(a).series()
    assert len(fig.axes) == 3
    idle_ax = fig.axes[0]
    pts = sum(c.get_offsets().shape[0] for c in idle_ax.collections
              if isinstance(c, PathCollection))
    assert pts >= len(a.launches) - 2  # every launch with a gap (the last has none)
    assert any("warm-up" in t.get_text() for t in fig.legends[0].get_texts())


def test_compare_figure_with_traces_and_with_summaries(analysed):
    a, b = analysed("healthy"), analysed("case1")
    fig = compare_figure(a, b)
    assert len(fig.axes) == 5  # two CDFs, class shares, two timelines
    timelines = [ax for ax in fig.axes if hasattr(ax, "nsysscope_rows")]
    assert len(timelines) == 2
    widths = [ax.get_xlim()[1] - ax.get_xlim()[0] for ax in timelines]
    assert widths[0] == pytest.approx(widths[1])  # same time scale
    assert bars(timelines[1], "block:gpu_to_cpu") and not bars(timelines[0], "block:gpu_to_cpu")
    only = compare_figure(a.summary, b.summary)
    assert len(only.axes) == 3


def test_figures_render_to_png_without_pyplot(analysed):
    fig = TracePlots(analysed("case2")).timeline()
    png = fig._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image
    im = Image.open(io.BytesIO(png))
    assert im.size[0] > 800


def test_a_trace_without_nvtx_is_drawn_by_launch(analysed):
    from dataclasses import replace
    a = analysed("case1")
    bare = replace(a, trace=replace(a.trace, nvtx=a.trace.nvtx.iloc[0:0]))
    p = TracePlots(bare)
    ax = p.timeline(steps=[100, 101]).axes[0]  # no step ranges: the numbers are launches
    assert not bars(ax, "nvtx") and bars(ax, "block:gpu_to_cpu")
    assert not [k for k in ax.nsysscope_rows if k.startswith("nvtx:")]
    graphs = {t.get_text().split()[1] for t in ax.texts if t.get_text().startswith("graph #")}
    assert {"#100", "#101"} <= graphs
    assert bars(p.timeline(which="worst").axes[0], "gpu-idle")
