"""nsysscope.render.plots on the real H200 samples: the pictures show what the analysis found.

The timeline is checked through its artists: bars are ``broken_barh`` collections tagged with
a gid (``block:<class>``, ``nvtx``, ``graph``, ``gpu-idle``...), and ``ax.nsysscope_rows`` maps
each lane row to its y position.
"""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba

matplotlib.use("Agg")

from nsysscope.analysis.projection import stall_costs  # noqa: E402
from nsysscope.render.plots import (  # noqa: E402
    CLASS_COLORS,
    NsysscopeFigure,
    TracePlots,
    compare_figure,
    pick_launch,
)
from nsysscope.render.plots.style import COPY_CALL_COLOR, EAGER_COLOR  # noqa: E402


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
    costs = stall_costs(L).loc[steady_stalls.index]
    # the worst stall by its own cost, not the 4.27 ms gap that is mostly the host's hiccup
    assert costs.loc[worst, "stall_cost_ns"] >= 0.95 * costs["stall_cost_ns"].max()
    assert costs.loc[worst, "slow_host_ns"] < 1e5
    assert L.loc[183, "gpu_idle_ns"] == steady_stalls["gpu_idle_ns"].max() and worst != 183
    typical = pick_launch(L, "typical")
    med = L.loc[L["steady"], "gpu_idle_ns"].median()
    assert abs(L.loc[typical, "gpu_idle_ns"] - med) < 0.05 * med
    with pytest.raises(ValueError):
        pick_launch(L, "best")
    # a table of only the columns a typical pick reads (no stall costs) is enough for it
    few = L[["launch", "proc", "steady", "stall", "klass", "gpu_idle_ns"]]
    assert pick_launch(few, "typical") == typical


@pytest.mark.parametrize("name", ["case2", "case1_tolist_every4", "healthy", "case1"])
def test_typical_launch_has_typical_neighbours(analysed, name):
    """Issue 13: case 2 picked launch 184, beside its 2.46 ms launch-bound gap; every4 picked
    launch 6, beside a warm-up stall. The launches whose gaps the timeline shows (two before,
    the focus) are steady and of the trace's usual class."""
    L = analysed(name).launches
    t = pick_launch(L, "typical")
    usual = L.loc[L["steady"], "klass"].astype(str).mode().iloc[0]
    shown = L.loc[t - 2:t]
    assert shown["steady"].all() and (shown["klass"].astype(str) == usual).all(), shown
    med = L.loc[L["steady"], "gpu_idle_ns"].median()
    assert (abs(shown["gpu_idle_ns"] - med) < 0.2 * med + 5e3).all()


def test_captions_and_titles_keep_to_the_launch_s_own_process(analysed):
    """Two engines in one trace, launches interleaved: the caption named ``launch + 1`` as
    the launch that waited (another engine's), the title took its step from the other
    engine's NVTX ranges, and only one engine's steps could be drawn."""
    a = analysed("twoproc")
    p = TracePlots(a)
    L = a.launches.set_index("launch")
    assert L.loc[163, "proc"] != L.loc[164, "proc"] == L.loc[162, "proc"]
    assert L.loc[165, "proc"] == L.loc[163, "proc"]
    assert "until graph #163 finished; only then could it launch #165:" in p.caption(163)
    assert "launch #164 was already queued" in p.caption(162)
    worst = pick_launch(a.launches, "worst")
    title = p.timeline(which="worst").axes[0].get_title(loc="left")
    assert worst == 163 and f"launch 163 (step {L.loc[163, 'step']})," in title
    assert L.loc[163, "step"] == 24  # the case1 engine's step; the healthy one was at 138
    # each engine's steps 50-52, on its own thread: the stalling engine's take longer
    spans = {}
    for proc in a.trace.processes.itertuples():
        fig = p.timeline(steps=range(50, 53), pid=int(proc.pid))
        spans[proc.pid] = np.diff(fig.axes[0].get_xlim())[0]
    assert len(spans) == 2 and max(spans.values()) > 1.4 * min(spans.values())
    with pytest.raises(ValueError, match="no graph launches of pid 1 in this trace"):
        p.timeline(steps=range(50, 53), pid=1)


def test_worst_caption_splits_the_stall_from_the_slow_host(analysed):
    p = TracePlots(analysed("case1"))
    text = p.caption(183)
    assert "the GPU idled 4.27 ms. Of that, 2.00 ms is the stall (the host's usual 1.92 ms" in text
    assert "2.27 ms the host running slower than usual in 'launch' of step 184" in text
    assert "Of that" not in p.caption(pick_launch(analysed("case1").launches, "worst"))


def test_legend_explains_the_pale_band_and_blues_are_distinct(analysed):
    fig = TracePlots(analysed("case1")).timeline(which="worst")
    texts_ = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("pale band" in t for t in texts_)
    assert all(t.get_fontsize() >= 9 for t in fig.legends[0].get_texts())
    assert COPY_CALL_COLOR.lower() != EAGER_COLOR.lower()
    # distinct enough: far apart in RGB
    a, b = (np.array(to_rgba(c)[:3]) for c in (COPY_CALL_COLOR, EAGER_COLOR))
    assert np.abs(a - b).sum() > 0.6


@pytest.mark.parametrize("steps", [12, 25, 40])
def test_window_labels_do_not_collide_over_many_steps(analysed, steps):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = TracePlots(analysed("case1")).timeline(steps=range(100, 100 + steps))
    ax = fig.axes[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    labels = sorted((t.get_window_extent(renderer) for t in ax.texts
                     if t.get_fontsize() == 7 and t.get_text()), key=lambda b: b.x0)
    assert steps > 12 or len(labels) >= 6
    by_row: dict = {}
    for b in labels:
        by_row.setdefault(round(b.y0), []).append(b)
    for row in by_row.values():
        assert all(a.x1 <= b.x0 + 0.5 for a, b in zip(row, row[1:], strict=False))


def test_case2_idle_cdf_is_logarithmic_and_hist_counts_are_whole(analysed):
    p = TracePlots(analysed("case2"))
    assert p.distributions().axes[1].get_xscale() == "log"
    hist = p.distributions(kind="hist").axes[1]
    assert hist.get_xscale() == "log"
    ticks = [v for v in hist.get_yticks() if v >= 0]
    assert all(float(v).is_integer() for v in ticks)
    heights = [patch for patch in hist.patches]
    assert len(heights) >= 1
    counts, _ = np.histogram(np.log(analysed("case2").launches.query("steady and "
                                                                     "klass == 'cpu_to_gpu'")
                                    ["gpu_idle_ns"] / 1e3), bins=20)
    assert (counts > 0).sum() >= 5  # case 2 spreads over several bins, not one


def test_timeline_steps_message_speaks_of_steps(analysed):
    p = TracePlots(analysed("case1"))
    with pytest.raises(ValueError, match=r"no NVTX steps 5000-5002 in this trace \(its 'step N' "
                                         r"ranges run from \d+ to \d+\); pass launches="):
        p.timeline(steps=range(5000, 5003))
    with pytest.raises(ValueError, match=r"no launches 5000-5002 in this trace \(launches 0-299\)"):
        p.timeline(launches=range(5000, 5003))
    for launch in (5000, -1):  # was a bare KeyError
        with pytest.raises(ValueError, match=rf"^no launch {launch} in this trace \(launches "
                                             r"0-299\)$"):
            p.caption(launch)


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
    fig = p.timeline(which="worst")
    ax = fig.axes[0]
    n_bars = sum(len(c.get_paths()) for c in ax.collections)
    assert n_bars < 400, f"{n_bars} bars drawn for a few steps"
    assert len(ax.texts) < 200
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


@pytest.mark.parametrize("name", ["healthy", "case1", "case2", "case1_tolist_every4"])
def test_every_time_axis_label_is_in_us_or_ms(analysed, name):
    """On a log axis spanning under a decade matplotlib labels minor ticks itself, as maths
    text that these figures never parse: case 1's launch-interval axis read
    ``$\\mathdefault{3\\times10^{4}}$``. Every label drawn is a plain time."""
    plots = TracePlots(analysed(name))
    figures = [plots.series(), plots.distributions(),
               compare_figure(analysed("healthy"), analysed(name))]
    labels = []
    for fig in figures:
        fig._repr_png_()  # draws it: tick labels are set at draw time
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                labels += [t.get_text() for t in axis.get_ticklabels(which="both")]
    assert labels and not [t for t in labels if "$" in t or "mathdefault" in t]
    minor = [t.get_text() for t in figures[0].axes[2].yaxis.get_ticklabels(which="minor")]
    if name == "case1":  # 4.5-31 ms: no decade inside, so the 20 ms and 30 ms ticks say so
        assert "20 ms" in minor and "30 ms" in minor


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


def test_each_rank_gets_its_own_lanes_and_idle_band(analysed):
    """TP=2, rank 0 reads back: its GPU lane shows the idle gaps; rank 1's lanes (keyed by
    process: both ranks use stream 7) show long replays spinning in all-reduce, no idle."""
    a = analysed("tp2_case1_rank0")
    fig = TracePlots(a).timeline(which="worst")
    ax = fig.axes[0]
    gpu_rows = sorted(k for k in ax.nsysscope_rows if k.startswith("gpu:"))
    procs = {int(k.split(":")[1]) for k in gpu_rows}
    assert len(gpu_rows) == 2 and procs == set(a.launches["proc"])
    stalled = int(a.launches.loc[a.launches["stall"], "proc"].iloc[0])
    idle = bars(ax, "gpu-idle")
    assert idle and {row_of(ax, y) for _, _, y, _ in idle} == {f"gpu:{stalled}:7"}
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sum("(pid " in t for t in labels) == 2


def test_a_polling_loop_is_drawn_as_one_wait(analysed):
    a = analysed("poll_case1")
    ax = TracePlots(a).timeline(which="worst").axes[0]
    scale = ax.nsysscope_window[2]  # ns per axis unit
    waits = bars(ax, "block:gpu_to_cpu")
    assert waits and all((x1 - x0) * scale > 1e6 for x0, x1, _, _ in waits)  # ms, not µs tries
    assert any(t.get_text().startswith("EventQuery x") for t in ax.texts)


# -- several processes in one trace -------------------------------------------------------------

def test_the_typical_launch_is_typical_of_its_own_process(analysed):
    """Two ranks, one stalling (p50 gap 1.36 ms) and one not (33 us): the pooled median
    (434 us) is neither's, and the pick was rank 0's shortest gap. It is now a launch within
    a few percent of its own process's median, among that process's neighbours."""
    for name in ("tp2_case1_rank0", "twoproc", "case1", "healthy"):
        L = analysed(name).launches
        r = L.loc[pick_launch(L, "typical")]
        own = L[(L["proc"] == r["proc"]) & L["steady"]]["gpu_idle_ns"]
        assert abs(r["gpu_idle_ns"] - own.median()) <= 0.05 * own.median() + 1e3, name


def test_each_thread_s_windows_alternate_rows(analysed):
    """The two overlap-window rows alternated by launch number, which interleaves across
    processes: one rank's windows were all on the second row, overlapping, the labelled row
    empty."""
    p = TracePlots(analysed("tp2_case1_rank0"))
    ax = p.timeline(which="worst").axes[0]
    by_row: dict[str, int] = {}
    for line in ax.lines:
        if line.get_gid() == "window":
            row = row_of(ax, float(np.max(line.get_ydata())) - 0.22)
            by_row[row] = by_row.get(row, 0) + 1
    two = [k.split(":", 1)[1] for k in ax.nsysscope_rows if k.startswith("win2:")]
    assert two  # the waiting rank's windows overlap: its lane has two rows
    for tid in two:
        first, second = by_row.get(f"win:{tid}", 0), by_row.get(f"win2:{tid}", 0)
        assert first >= 1 and abs(first - second) <= 1, by_row


def test_series_intervals_and_warm_up_are_each_process_s(analysed):
    """Launch intervals came from the global issue order, blanked at every change of thread
    (26 of 200 on tp2; none for one engine for a third of twoproc), and the warm-up shading
    covered the first process's launches only."""
    from nsysscope.render.plots import series_figure
    a = analysed("twoproc")
    fig = series_figure(a)
    interval_ax = fig.axes[2]
    shown = sum(len(c.get_offsets()) for c in interval_ax.collections
                if isinstance(c, PathCollection))
    L = a.launches
    assert shown == L["next_api_start_ns"].notna().sum() >= len(L) - 2
    spans = [p for p in interval_ax.patches if p.get_gid() is None and p.get_alpha() == 0.3]
    assert len(spans) == 2  # one warm-up span per engine
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "warm-up of each process (10 launches in all, not judged)" in legend


def test_dollar_signs_in_names_are_drawn_as_they_are(sample_path, tmp_path):
    """NVTX text with '$' was parsed as matplotlib math: '$x$' became an italic x, and
    '$\\badcmd{$' stopped both timelines of the HTML report (an unknown symbol)."""
    import shutil
    import sqlite3

    from nsysscope import analyze, load
    from nsysscope.trace import resolve
    case1_sqlite_copy = tmp_path / "case1.sqlite"
    shutil.copyfile(resolve(sample_path("case1")), case1_sqlite_copy)
    with sqlite3.connect(case1_sqlite_copy) as c:
        c.execute("UPDATE NVTX_EVENTS SET text = 'sample $\\badcmd{$ x' WHERE text = 'sample'")
    fig = TracePlots(analyze(load(case1_sqlite_copy))).timeline(which="worst")
    fig.savefig(io.BytesIO(), format="png")  # drawing is where math text fails
    assert "sample $\\badcmd{$ x" in fig.axes[0].get_title(loc="left")
    assert any(t.get_text().startswith("sample $\\badcmd{$") for t in fig.axes[0].texts)


def test_the_comparison_s_verdicts_fit_the_figure(analysed):
    a, b = analysed("tp2_healthy"), analysed("tp2_case1_rank0")
    fig = compare_figure(a, b)
    title = fig._suptitle.get_text()
    assert len(title.splitlines()) >= 3 and max(len(x) for x in title.splitlines()) <= 165
    assert "all-reduce for rank 0 (pid" in title.replace("\n    ", " ")  # the long verdict's end


def test_legend_order_of_a_class_column_is_that_of_its_distinct_classes(analysed):
    """class_order takes a launch table's class column as it is (categorical, strings or a
    list) and gives its distinct classes in legend order: stalls first, healthy last."""
    from nsysscope.render.plots.style import class_order

    klass = analysed("case1_tolist_every4").launches["klass"]
    # the sample's 300 launches: 223 healthy, 75 gpu_to_cpu (1 in 4 steps), 1 launch_bound and
    # the last (not in the legend); the column's unused categories are not classes present
    expected = ["gpu_to_cpu", "launch_bound", "healthy"]
    assert class_order(klass) == expected
    assert class_order(klass.astype(str).to_numpy()) == expected
    assert class_order(list(klass)) == expected
    assert class_order([]) == []
