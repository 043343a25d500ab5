"""A long trace analysed in windows keeps none of its events: its timelines read the time they
show again from the export (``nsysscope.render.plots.events``). They must draw what the
whole trace's events draw: checked on real H200 samples analysed in windows (3 to 10 per
sample), the HTML page byte for byte and random time spans row for row."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from frames import comparable  # tests/ is on sys.path

from nsysscope.analysis import analyze_file
from nsysscope.render.html.report import report_page
from nsysscope.render.plots import TracePlots
from nsysscope.render.plots.canvas import select
from nsysscope.render.plots.views import TraceViews
from nsysscope.trace import load
from nsysscope.trace import windows as trace_windows

SMALL = 40


@pytest.fixture
def long_traces(monkeypatch):
    """``long_traces(path)``: the trace analysed as a long one, in windows of
    :data:`SMALL` launches (the piecewise samples' 2400 launches and the 5000-step sample in
    ten windows or fewer). Each read of events for a timeline is recorded (its span and how
    many CUDA calls it read)."""
    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    reads: list[tuple[int, int, int]] = []

    def analyse(path):
        many = "pw24" in path.name or "long" in path.name
        monkeypatch.setattr(trace_windows, "WINDOW_LAUNCHES", 500 if many else SMALL)
        a = analyze_file(path, events="shown")
        assert a.read_events is not None and a.trace.api.empty and a.trace.nvtx.empty
        read = a.read_events

        def recorded(span):
            t = read(span)
            reads.append((span.start_ns, span.end_ns, len(t.api)))
            return t
        a.read_events = recorded
        return a
    analyse.reads = reads
    return analyse


@pytest.mark.parametrize("name", ["case1", "poll_case1", "twoproc", "pieces_case1"])
def test_the_html_page_of_a_long_trace_is_the_whole_traces(sample_path, long_traces, name):
    """Both timelines (the worst stall, a typical step), the distributions and the series:
    the same PNG bytes, from at most one read per timeline (and one for the caption's
    busiest phase)."""
    path = sample_path(name)
    whole = analyze_file(path, events="all")  # read whole, whatever its length
    page = report_page(long_traces(path), timestamp="t")
    assert page == report_page(whole, timestamp="t")
    assert 1 <= len(long_traces.reads) <= 3


def test_a_timeline_reads_the_steps_it_shows_not_the_trace(sample_path, long_traces):
    """On the 5000-step sample each read holds a few hundred steps' calls at most (a
    margin of 100 launches before what shows, as a window of the analysis reads), under a
    tenth of the trace's; and a timeline drawn again reads nothing more."""
    path = sample_path("healthy_long")
    calls = len(load(path).api)
    plots = TracePlots(long_traces(path))
    plots.timeline(which="typical")
    plots.timeline(which="typical")
    plots.timeline(steps=[4000, 4001])
    assert len(long_traces.reads) == 2
    assert all(0 < n < calls / 10 for _, _, n in long_traces.reads), (long_traces.reads, calls)


def _frames(views, t0, t1):
    shown = select(views, t0, t1)
    return [comparable(df.sort_values(list(df.columns)[:4], kind="stable"))
            for df in (shown.api, shown.nvtx, shown.ops, shown.graphs, shown.near)]


@pytest.mark.parametrize("name", ["poll_case1", "outcopy_case1_every8", "pieces_case1",
                                  "tp2_case1", "case1_py", "graph_case1"])
def test_any_span_draws_the_rows_the_whole_trace_draws(sample_path, long_traces, name):
    """Spans cut anywhere from the trace's first event to its last (through a polling loop,
    a replay or eager kernel queued before the span, a copy on a side stream, the warm-up's
    eager kernels before the first launch and before the first call the loader keeps): the
    calls, NVTX ranges, GPU work, replays and launches drawn are the whole trace's, to the
    nanosecond, and so are the lanes. (Before the reads reached past the span and to the
    trace's start, 4-27 of 120 such spans per sample drew fewer eager kernels.)"""
    path = sample_path(name)
    whole, part = TraceViews(analyze_file(path, events="all")), \
        TraceViews(long_traces(path))
    tr = whole.analysis.trace
    lo = float(min(tr.api["start_ns"].min(), tr.gpu_ops["start_ns"].min()))
    hi = float(max(tr.api["end_ns"].max(), tr.gpu_ops["end_ns"].max()))
    rng = np.random.default_rng(7)
    for t0 in [lo, *rng.uniform(lo, hi, 25)]:
        t1 = t0 + rng.choice([5e4, 5e5, 5e6, 5e7])
        for a, b in zip(_frames(part, t0, t1), _frames(whole, t0, t1), strict=True):
            pd.testing.assert_frame_equal(a, b, check_dtype=False)
        w, p = select(whole, t0, t1), select(part, t0, t1)
        assert (w.threads, w.streams, w.procs) == (p.threads, p.streams, p.procs)


def test_the_gates_page_of_two_long_traces_is_the_whole_traces(sample_path, monkeypatch,
                                                               tmp_path):
    """``gate --format html`` draws a timeline of each side: both sides long, both are read
    in this process (a side read in a forked child, in windows, had its rows on disk deleted
    with the child: "figure not drawn: FileNotFoundError"), and the page is the whole
    traces' page."""
    from click.testing import CliRunner

    from nsysscope.cli import cli

    args = ["gate", str(sample_path("healthy")), str(sample_path("case1"))]
    whole = CliRunner().invoke(cli, [*args, "--format", "html"])
    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    monkeypatch.setattr(trace_windows, "WINDOW_LAUNCHES", SMALL)
    part = CliRunner().invoke(cli, [*args, "--format", "html"])
    assert whole.exit_code == part.exit_code == 1  # case 1 against healthy: a regression
    assert "figure not drawn" not in part.output and part.output.count("<img") == 1
    stamp = re.compile(r"\d{4}-\d\d-\d\d[ T][\d:]+( UTC)?")
    assert stamp.sub("", part.output) == stamp.sub("", whole.output)
    # the page as an extra output of a text run: its sides read for drawing too
    page = tmp_path / "gate.html"
    assert CliRunner().invoke(cli, [*args, "--html", str(page)]).exit_code == 1
    assert stamp.sub("", page.read_text()) == stamp.sub("", whole.output)


def test_an_analysis_without_events_says_so(sample_path, monkeypatch):
    """A long trace analysed in windows with no way to read its events again (events
    'none', or :func:`analyze_windows` itself) cannot draw a timeline or write a Perfetto
    file: a ValueError says how to analyse it, where the figure and the file would have
    been empty."""
    from nsysscope.export.perfetto import write_perfetto

    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    monkeypatch.setattr(trace_windows, "WINDOW_LAUNCHES", SMALL)
    a = analyze_file(sample_path("case1"), events="none")
    assert not a.holds_events and a.read_events is None
    with pytest.raises(ValueError, match="events='shown'"):
        TracePlots(a).timeline(which="worst")
    with pytest.raises(ValueError, match="events='all'"):
        write_perfetto("/dev/null", a)
    assert analyze_file(sample_path("case1"), events="all").holds_events


def test_a_perfetto_timeline_of_a_long_trace_says_it_reads_it_whole(sample_path, monkeypatch,
                                                                    tmp_path):
    """``export`` and ``report --perfetto`` draw every event, so they read a long trace whole:
    a note says so before the read starts, and how to write a part. A short trace, or a
    part of a long one (--from/--to), gets no note."""
    from click.testing import CliRunner

    from nsysscope.cli import cli

    path = str(sample_path("case1"))
    out = str(tmp_path / "t.json.gz")
    said = "reads h200_case1_300.sqlite.xz whole (a long trace"

    def run(*args: str) -> str:
        r = CliRunner().invoke(cli, list(args))
        assert r.exit_code == 0, r.output
        return r.stderr

    assert said not in run("export", path, "--perfetto", out)
    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    assert said in run("export", path, "--perfetto", out)
    assert said in run("report", path, "--perfetto", out, "-o", str(tmp_path / "r.txt"))
    assert said not in run("report", path, "--perfetto", out, "-o", str(tmp_path / "r.txt"),
                           "--from", "5", "--to", "6")
    assert said not in run("report", path, "-o", str(tmp_path / "r.html"))
