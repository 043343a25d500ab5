"""A long trace analysed in time windows (``nsysscope.trace.windows``,
``nsysscope.analysis.pipeline.analyze_windows``) gives the whole trace's analysis, to the
nanosecond: checked on the real H200 samples cut into windows of 40 launches (5 to 10 per
sample, so every kind of event lies on some window's edge)."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from frames import comparable  # tests/ is on sys.path

from nsysscope import render
from nsysscope.analysis import analyze_file, analyze_windows
from nsysscope.cli import cli
from nsysscope.trace import windows as trace_windows
from nsysscope.trace.nsys.schema import Schema, connect_readonly
from nsysscope.trace.nsys.tables import wanted_api_ids
from nsysscope.trace.windows import in_windows, launches_per_window, plan_windows

#: small enough that every sample has several windows, each edge next to a few launches
SMALL = 40


def windowed(path, per_window=SMALL):
    tw = in_windows(path, per_window=per_window, calls=0)
    assert tw is not None
    a = analyze_windows(tw)
    assert tw.fallbacks == 0  # the C reader (or DuckDB, from the copy) read every window
    return a, len(tw.windows)


@pytest.fixture
def copied(monkeypatch):
    """Windows read from DuckDB's Parquet copy, as where the C reader is not built."""
    monkeypatch.setattr(trace_windows.stepped, "available", lambda: False)


@pytest.fixture
def one_process(monkeypatch):
    """Windows read from the export and analysed one after the other, in this process."""
    monkeypatch.setenv("NSYSSCOPE_THREADS", "1")


@pytest.mark.parametrize("name", ["case1", "case2", "both", "case1_py", "twoproc", "tp2_case1",
                                  "outcopy_case1_every8", "poll_case1", "poll_async_case1"])
def test_windows_give_the_whole_traces_analysis(sample_path, analysed, name):
    """Every launch and block, and the summary with its per-launch distributions, sites,
    latent patterns, processes and source lines. Cases: both stall kinds, Python samples,
    two processes, tensor-parallel collectives, side-stream copies, polling hosts."""
    whole = analysed(name)
    part, n = windowed(sample_path(name))
    assert n >= 2
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(comparable(part.blocks), comparable(whole.blocks),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))
    assert render.render("report", "text", part) == render.render("report", "text", whole)


@pytest.mark.parametrize("name", ["case1_py", "twoproc", "tp2_case1"])
@pytest.mark.parametrize("how", ["copied", "one_process"])
def test_windows_read_any_way_give_the_whole_traces_analysis(sample_path, analysed, name, how,
                                                             request):
    """The windows read from DuckDB's Parquet copy (no C reader), and read from the export
    one after the other in this process (one CPU), give what the windows read in processes
    of their own do above: the whole trace's analysis."""
    request.getfixturevalue(how)
    whole = analysed(name)
    part, n = windowed(sample_path(name))
    assert n >= 2
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))
    assert render.render("report", "text", part) == render.render("report", "text", whole)


def test_a_stop_in_a_window_stops_every_process(sample_path, monkeypatch):
    """Windows analysed in processes of their own: an error in one (here Ctrl-C, as a window
    of a process stopped would raise it) comes through once, and no process is left."""
    import multiprocessing

    from nsysscope.analysis import windows as analysis_windows

    real = analysis_windows.launch_rows
    parent = os.getpid()

    def stopped(trace, *args, **kwargs):
        if trace.api["start_ns"].min() > first_end:  # the third window or later
            raise KeyboardInterrupt
        return real(trace, *args, **kwargs)

    monkeypatch.setattr(analysis_windows, "launch_rows", stopped)
    monkeypatch.setenv("NSYSSCOPE_THREADS", "3")
    tw = in_windows(sample_path("case1"), per_window=SMALL, calls=0)
    assert tw is not None and len(tw.windows) > 4
    first_end = tw.windows[1].end_ns
    before = set(_children())  # a fork server an earlier test started stays, as it should
    with pytest.raises(KeyboardInterrupt):
        analyze_windows(tw)
    assert os.getpid() == parent and not multiprocessing.active_children()
    assert not set(_children()) - before


def _children() -> list[int]:
    """This process's children still running (not zombies: reaped ones are gone)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and stat[0] != "Z":
                pids.append(int(d))
    return pids


@pytest.mark.parametrize("name", ["pieces_case1", "pieces_hostbound"])
def test_windows_of_piecewise_graphs_give_the_whole_traces_analysis(sample_path, analysed, name):
    """24 launches a step, windows of 500 launches cut inside steps: a launch's wait can come
    48 launches later (with a margin of 8 launches, 2 windows lost the blocks of 12 launches
    and GPU busy read 0.973 instead of 0.985)."""
    whole = analysed(name)
    part, n = windowed(sample_path(name), per_window=500)
    assert n >= 2
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))


def test_windows_of_two_tensor_parallel_groups_give_the_whole_analysis(dp2_tp2, monkeypatch):
    """The ranks are grouped and their waits measured once, from the whole trace's kernels
    (each window grouped them anew, and near the threshold windows could disagree; a
    collective at a window's edge lost its peers): the groups, their waits and the note are
    the whole trace's."""
    from nsysscope import analyze, load
    from nsysscope.analysis.collectives import RankWaits
    whole = analyze(load(dp2_tp2))
    calls = []
    real = RankWaits.of
    monkeypatch.setattr(RankWaits, "of", classmethod(
        lambda cls, c, *a: calls.append(len(c)) or real(c, *a)))
    part, n = windowed(dp2_tp2)
    assert calls == [len(whole.trace.collectives)]  # once, over every kernel
    assert n >= 2
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))
    assert any("2 groups of ranks" in note for note in part.summary.notes)


def test_a_window_holds_about_so_many_rows_whatever_a_launch_brings():
    """The light 10^5 replica copies 5,085,300 rows (~51 a launch): windows of 39,329
    launches. A two-rank server's ~295 a launch (the tp2 replica's 29,497,000): 6,780
    launches a window (its 10^5 launches in 50,000-launch windows held 2.6 GB). Never more
    than :data:`WINDOW_LAUNCHES`, nor fewer than ten margins."""
    assert launches_per_window(100_000, 5_085_300) == 39_329
    assert launches_per_window(100_000, 29_497_000) == 6_780
    assert launches_per_window(100_000, 1_000) == trace_windows.WINDOW_LAUNCHES
    assert launches_per_window(100_000, 10**12) == 10 * trace_windows.MARGIN_LAUNCHES
    assert launches_per_window(0, 0) == trace_windows.WINDOW_LAUNCHES


def test_windows_cut_by_rows_give_the_whole_traces_analysis(sample_path, analysed, monkeypatch):
    """The two-rank sample (127,000 rows copied for 200 launches: NCCL's set-up, calls,
    events and syncs) with windows of 40,000 rows: the rows copied are the export's own
    count of them, the windows own ``launches_per_window`` launches each (the last one at
    least half that), and together they give the whole trace's analysis."""
    monkeypatch.setattr(trace_windows, "WINDOW_ROWS", 40_000)
    monkeypatch.setattr(trace_windows, "MARGIN_LAUNCHES", 4)  # the floor only: 40 launches
    path = sample_path("tp2_case1")
    tw = in_windows(path, calls=0)
    assert tw is not None
    conn = sqlite3.connect(tw.db)
    wanted = ",".join(map(str, wanted_api_ids(Schema(connect_readonly(tw.db), path))))
    counted = sum(conn.execute(f"SELECT count(*) FROM {t}" + (
        f" WHERE nameId IN ({wanted})" if t == "CUPTI_ACTIVITY_KIND_RUNTIME" else ""
    )).fetchone()[0] for t in trace_windows._COPIED
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone())
    conn.close()
    launches = len(analysed("tp2_case1").launches)
    per_window = launches_per_window(launches, counted)
    assert tw.rows == counted and 40 < per_window < launches // 2
    owned = [int(w.owns(analysed("tp2_case1").launches["api_start_ns"].to_numpy()).sum())
             for w in tw.windows]
    assert len(owned) >= 2 and sum(owned) == launches
    assert owned[:-1] == [per_window] * (len(owned) - 1) and per_window // 2 <= owned[-1] \
        < 2 * per_window
    part = analyze_windows(tw)
    whole = analysed("tp2_case1")
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))


def test_windows_own_every_launch_once_and_read_around_it(analysed):
    launches = analysed("twoproc").launches.rename(columns={"api_start_ns": "start_ns"})
    plan = plan_windows(launches[["proc", "start_ns"]], per_window=SMALL, margin=8)
    t = launches["start_ns"].to_numpy()
    owners = np.sum([w.owns(t) for w in plan], axis=0)
    assert (owners == 1).all()
    # every window but the last owns SMALL launches; the last at least half as many
    sizes = [int(w.owns(t).sum()) for w in plan]
    assert sizes[:-1] == [SMALL] * (len(plan) - 1) and SMALL // 2 <= sizes[-1] < 2 * SMALL
    for w in plan[1:-1]:  # 8 launches of each process on either side are read too (all of
        # them, reading from the trace's start or to its end, where it has fewer)
        lo, hi = w.read.start_ns or -np.inf, w.read.end_ns or np.inf
        for _, own in launches.groupby("proc"):
            s = own["start_ns"].to_numpy()
            for edge in (w.start_ns, w.end_ns):
                before, after = s[s < edge], s[s >= edge]
                if len(before) and len(after):  # a process running across the edge
                    assert ((before >= lo) & (before < hi)).sum() >= min(8, len(before))
                    assert ((after >= lo) & (after < hi)).sum() >= min(9, len(after))


def test_a_process_that_ended_does_not_stretch_the_later_windows():
    """Two engines; one stops after 100 launches: the windows after it read 8 launches of the
    other around their own, not the rest of the trace."""
    long = pd.DataFrame({"proc": 1, "start_ns": np.arange(1000) * 10})
    short = pd.DataFrame({"proc": 2, "start_ns": np.arange(100) * 10 + 5})
    plan = plan_windows(pd.concat([long, short]), per_window=100, margin=8)
    later = [w for w in plan if w.start_ns is not None and w.start_ns > 1100]
    assert len(later) >= 5
    for w in later[:-1]:
        assert w.read.end_ns == w.end_ns + 80 + 1 and w.read.start_ns == w.start_ns - 80
    # while both run, both count: the first window reads 8 launches of each past its end
    assert plan[0].read.end_ns == plan[0].end_ns + 80 + 5 + 1


def test_a_small_trace_is_read_whole(sample_path):
    assert in_windows(sample_path("case1")) is None  # 300 launches: far below the bound


def test_without_duckdb_or_the_c_reader_a_trace_is_read_whole(sample_path, monkeypatch,
                                                                copied):
    monkeypatch.setattr(trace_windows, "attach", lambda db: None)
    assert in_windows(sample_path("case1"), calls=0) is None


def test_no_room_for_the_copy_reads_the_trace_whole(sample_path, monkeypatch, capsys, copied):
    def no_room(self):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(trace_windows.TraceWindows, "_copy", no_room)
    tmp = set(os.listdir(tempfile.gettempdir()))
    assert in_windows(sample_path("case1"), calls=0) is None
    assert "case1_300.sqlite.xz whole: its copy for reading in windows failed ([Errno 28] " \
        "No space left on device)" in capsys.readouterr().err
    assert not {p for p in set(os.listdir(tempfile.gettempdir())) - tmp
                if p.startswith("nsysscope-windows-")}


def test_a_disk_short_of_room_gets_a_compressed_copy_and_the_same_analysis(
        sample_path, analysed, monkeypatch, copied):
    """The copy is left uncompressed where the disk has room for the export's size (the
    samples' folder does), else zstd-compressed: the windows read the same rows either way."""
    import shutil

    real = shutil.disk_usage
    used: list[str] = []
    pick = trace_windows.copy_compression
    monkeypatch.setattr(trace_windows, "copy_compression",
                        lambda db, folder: used.append(pick(db, folder)) or used[-1])
    windowed(sample_path("case1"))
    monkeypatch.setattr(trace_windows.shutil, "disk_usage",
                        lambda p: real(p)._replace(free=1000))
    part, _ = windowed(sample_path("case1"))
    assert used == ["uncompressed", "zstd"]
    pd.testing.assert_frame_equal(comparable(part.launches),
                                  comparable(analysed("case1").launches), check_dtype=False)


def test_the_copy_is_removed_and_the_trace_left_alone(sample_path, copied):
    path = sample_path("case1")
    before = (path.stat().st_size, path.stat().st_mtime_ns)
    tmp = set(os.listdir(tempfile.gettempdir()))
    windowed(path)
    assert not {p for p in set(os.listdir(tempfile.gettempdir())) - tmp
                if p.startswith("nsysscope-windows-")}
    assert (path.stat().st_size, path.stat().st_mtime_ns) == before


def test_the_copy_is_gone_once_the_last_window_is_read(sample_path, monkeypatch, copied):
    """The windows' rows are joined, and the summary made, without DuckDB and its copy:
    they are closed past the last window (at 10^6 launches, ~140 MB and 1.5 GB of disk)."""
    from nsysscope.analysis import windows as analysis_windows

    tw = in_windows(sample_path("case1"), per_window=SMALL, calls=0)
    assert tw is not None
    folder = tw._dir
    seen = []
    join = analysis_windows._numbered
    monkeypatch.setattr(analysis_windows, "_numbered",
                        lambda *a: seen.append(folder.exists()) or join(*a))
    analyze_windows(tw)
    assert seen == [False] and tw._dir is None
    tw.close()  # again: nothing left to do


def test_report_reads_a_long_trace_in_windows(sample_path, monkeypatch):
    """The CLI's choice: text, JSON and HTML in windows past the bound, the same bytes as
    whole (HTML's timelines read the time they show: tests/render/test_timeline_reads.py);
    a timeline of the whole trace (``--perfetto``) reads it whole."""
    path = str(sample_path("case2"))
    whole = CliRunner().invoke(cli, ["report", path, "--format", "json"]).output
    calls = []
    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    monkeypatch.setattr(trace_windows, "WINDOW_LAUNCHES", SMALL)
    monkeypatch.setattr(trace_windows.TraceWindows, "each",
                        _counting(trace_windows.TraceWindows.each, calls))
    r = CliRunner().invoke(cli, ["report", path, "--format", "json"])
    assert r.exit_code == 0 and calls and r.output == whole
    calls.clear()
    r = CliRunner().invoke(cli, ["report", path, "--format", "html"])
    assert r.exit_code == 0 and calls and "<img" in r.output
    calls.clear()
    assert analyze_file(path, events="all").trace.api.shape[0] > 0 and not calls
    with pytest.raises(ValueError, match="events: one of 'none', 'shown', 'all', not True"):
        analyze_file(path, events=True)


def _counting(each, calls):
    def wrapped(self, *args, **kwargs):
        calls.append(len(self.windows))
        return each(self, *args, **kwargs)
    return wrapped


def test_the_per_launch_database_is_the_same(sample_path, analysed, tmp_path):
    """What ``--per-launch FILE.db`` writes (values and column types): text held as
    categoricals in windows, numbers held as objects (the NVTX step) kept numbers."""
    import sqlite3

    from nsysscope.export import write_db
    write_db(tmp_path / "whole.db", analysed("case1_py"), trace="t")
    write_db(tmp_path / "windows.db", windowed(sample_path("case1_py"))[0], trace="t")
    whole, part = (sqlite3.connect(tmp_path / f) for f in ("whole.db", "windows.db"))
    for table in ("launches", "blocks", "summary", "sites", "processes"):
        assert list(part.execute(f"PRAGMA table_info({table})")) == \
            list(whole.execute(f"PRAGMA table_info({table})"))
        rows = part.execute(f"SELECT * FROM {table}").fetchall()
        assert rows == whole.execute(f"SELECT * FROM {table}").fetchall() and rows


def test_the_per_launch_files_are_the_same_written_a_window_at_a_time(sample_path, analysed,
                                                                      tmp_path):
    """``--per-launch FILE.csv|.parquet`` of a trace read in windows is written a window at a
    time (~8 windows here) and holds what the whole trace's file does: the same CSV text, the
    same Parquet values (text as plain strings: each window has its own categories)."""
    from nsysscope.export import per_launch_parts, write_per_launch_parts

    whole, (part, n) = analysed("case1_py"), windowed(sample_path("case1_py"))
    assert len(list(per_launch_parts(part))) == n >= 4

    def write(suffix: str, parquet: bool) -> None:
        for name, a in (("whole", whole), ("windows", part)):
            with open(tmp_path / f"{name}{suffix}", "wb") as f:
                write_per_launch_parts(f, per_launch_parts(a), parquet)

    write(".csv", False)
    text = (tmp_path / "whole.csv").read_text()
    assert (tmp_path / "windows.csv").read_text() == text
    assert text.count("\n") == len(whole.launches) + 1
    pytest.importorskip("pyarrow")
    write(".parquet", True)
    got, expected = (pd.read_parquet(tmp_path / f"{name}.parquet") for name in ("windows",
                                                                               "whole"))
    pd.testing.assert_frame_equal(comparable(got), comparable(expected), check_dtype=False)


@pytest.mark.parametrize("name,margin", [
    ("case1", 8), ("case2", 8), ("both", 8), ("case1_py", 8), ("twoproc", 8), ("tp2_case1", 8),
    ("outcopy_case1_every8", 8), ("poll_case1", 8), ("poll_async_case1", 8),
    ("pieces_case1", None), ("graph_case1", 8)])
def test_parallel_windows_give_the_whole_traces_analysis(analysed, name, margin):
    """A trace already loaded, cut in memory into 4 windows (``trace.slices``), each analysed
    in a process of its own: every launch and block, and the summary, are the whole trace's
    (margins of 8 launches, as the SQL windows above; piecewise steps need the default)."""
    from nsysscope.analysis import finish
    from nsysscope.analysis.windows import parallel_rows
    whole = analysed(name)
    kw = {} if margin is None else {"margin": margin}
    rows = parallel_rows(whole.trace, whole.config, parts=4, **kw)
    assert rows is not None
    part = finish(whole.trace, rows, whole.config)
    pd.testing.assert_frame_equal(comparable(part.launches), comparable(whole.launches),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(comparable(part.blocks), comparable(whole.blocks),
                                  check_dtype=False)
    assert json.loads(part.summary.to_json(with_distributions=True)) == \
        json.loads(whole.summary.to_json(with_distributions=True))


def test_a_small_trace_is_analysed_in_one_process(analysed):
    from nsysscope.analysis.windows import PARALLEL_LAUNCHES, parallel_rows
    a = analysed("healthy_long")  # 5000 launches: less than a window's worth
    assert len(a.launches) < 2 * PARALLEL_LAUNCHES
    assert parallel_rows(a.trace, a.config) is None


def test_a_windowed_analysis_never_holds_the_launch_table(sample_path, monkeypatch):
    """Every step after the windows reads the launches a part (a window) at a time: asking a
    table on disk for whole columns fails, and the analysis (source lines from Python
    samples, two processes, sites, projections, bursts, latent copies) still ends with the
    whole trace's summary. The per-launch table is read only when asked for."""
    from nsysscope.analysis.stored import SpilledRows

    free = {}  # the summaries with every read allowed
    for name in ("case1_py", "twoproc"):
        tw = in_windows(sample_path(name), per_window=SMALL, calls=0)
        free[name] = analyze_windows(tw).summary

    def refused(self, columns=None):
        raise AssertionError(f"whole columns read: {columns}")

    monkeypatch.setattr(SpilledRows, "frame", refused)
    for name, expected in free.items():
        tw = in_windows(sample_path(name), per_window=SMALL, calls=0)
        a = analyze_windows(tw)
        assert len(tw.windows) >= 4 and isinstance(a.launch_table, SpilledRows)
        assert json.loads(a.summary.to_json(with_distributions=True)) == \
            json.loads(expected.to_json(with_distributions=True))
        with pytest.raises(AssertionError, match="whole columns read"):
            a.launches  # noqa: B018 - the table is read only when asked for


def test_a_windowed_analysis_keeps_the_whole_ones_types_and_steps(sample_path, analysed):
    """What a windowed analysis holds beside its summary: the per-launch numbers of the
    whole trace's types (a source line stays a nullable integer, not a float), and the NVTX
    step ranges a summary made again reads (the gate's windows of one capture)."""
    from nsysscope.gate import part_summary

    whole = analysed("case1_py")
    part, _ = windowed(sample_path("case1_py"))
    for c in whole.launches.columns:
        if pd.api.types.is_numeric_dtype(whole.launches[c]):
            assert part.launches[c].dtype == whole.launches[c].dtype, c
    assert part.launches["src_line"].dtype == "Int64"
    again = [part_summary(a, 10, 60).steps_per_s for a in (part, whole)]
    assert again[0] is not None and again[0] == again[1]


def test_a_stop_while_the_next_window_is_read_ends_the_read(sample_path, monkeypatch, copied):
    """Ctrl-C in a window's analysis, the next window being read meanwhile: the stop comes
    through, the read ahead ends (no thread left reading), and the copy is deleted."""
    import threading

    from nsysscope.analysis import windows as analysis_windows

    analysed_windows = []
    real = analysis_windows.launch_rows

    def stopped(trace, *args, **kwargs):
        analysed_windows.append(len(trace.api))
        if len(analysed_windows) == 2:
            raise KeyboardInterrupt
        return real(trace, *args, **kwargs)

    monkeypatch.setattr(analysis_windows, "launch_rows", stopped)
    tw = in_windows(sample_path("case1"), per_window=SMALL, calls=0)
    assert tw is not None and len(tw.windows) > 3
    folder = tw._dir
    with pytest.raises(KeyboardInterrupt):
        analyze_windows(tw)
    assert len(analysed_windows) == 2 and analysed_windows[1] > 0
    assert tw._ahead is None and tw._dir is None and not folder.exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("nsysscope-window")]


def test_a_windowed_analysis_that_is_stopped_leaves_no_rows_on_disk(sample_path, monkeypatch,
                                                                     tmp_path):
    """The windows' rows go to a temporary folder; an analysis stopped (Ctrl-C) or failing
    after it was made deletes it at once, not when the rows are collected: a batch worker
    stopped so exits without running finalizers."""
    import tempfile as tf

    from nsysscope.analysis import summarise

    monkeypatch.setattr(tf, "tempdir", str(tmp_path))

    def stopped(*args, **kwargs):
        assert list(tmp_path.glob("nsysscope-rows-*"))  # the rows are on disk by now
        raise KeyboardInterrupt

    monkeypatch.setattr(summarise, "_steady_numbers", stopped)
    with pytest.raises(KeyboardInterrupt) as info:
        windowed(sample_path("case1"))
    assert info.traceback  # its frames, and the rows they name, are still alive
    assert not list(tmp_path.glob("nsysscope-rows-*"))
