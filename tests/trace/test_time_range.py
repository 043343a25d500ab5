"""A part of the timeline (``load(time_range=...)``, ``report --from/--to``), read from the real
H200 samples and checked against the whole trace: the same rows, and the same verdict on every
launch away from the range's edges."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from nsysscope.analysis import analyze
from nsysscope.analysis.launches import BUSY_BEFORE
from nsysscope.cli import cli
from nsysscope.trace import load
from nsysscope.trace.time_range import TimeRange

#: the launches at a range's end that may lack what follows them (the host block of a launch
#: comes after the next launch or two): measured on the samples, the last 3 on each process
#: differ from the whole trace's when their blocks fall after the range, none before them
EDGE = 3
#: columns that number rows of one analysis, and warm-up, which counts from the range's start
NUMBERING = {"launch", "block", "warmup", "steady", "burst"}
#: whether the read shows the graphs' capture: the whole trace does, a range after it does not
#: (the classes and the start-up that these decide are compared, and are the same)
CAPTURE_SEEN = {"graphs_building", "graphs_built"}
#: busy time counted from the first replay read: the range's differs by one constant per process
BUSY = BUSY_BEFORE


def middle(trace, first=0.3, last=0.6) -> TimeRange:
    """From 30% to 60% of the time the trace launches graphs."""
    launches = trace.api[trace.api["name"] == "cudaGraphLaunch"]
    t0, t1 = int(launches["start_ns"].min()), int(launches["end_ns"].max())
    return TimeRange(t0 + int((t1 - t0) * first), t0 + int((t1 - t0) * last))


def overlapping(df: pd.DataFrame, span: TimeRange) -> pd.DataFrame:
    keep = (df["start_ns"] < span.end_ns) & (df["end_ns"] > span.start_ns)
    return df[keep].reset_index(drop=True)


@pytest.mark.parametrize("text, ns", [("12.5", 12_500_000_000), ("12.5s", 12_500_000_000),
                                      ("300ms", 300_000_000), (" 250 us", 250_000), (".5", 5e8),
                                      ("7ns", 7)])
def test_times_read_as_a_person_writes_them(text, ns):
    assert TimeRange.parse(text, None).start_ns == ns


@pytest.mark.parametrize("start, end", [("12x", None), ("-1", None), ("", None), ("2", "1"),
                                        ("1s", "1000ms"), ("9" * 400 + "s", None),
                                        ("0", "9" * 400)])  # OverflowError: exit 70
def test_a_bad_range_is_refused(start, end):
    with pytest.raises(ValueError):
        TimeRange.parse(start, end)


def test_the_rows_read_are_the_whole_traces_rows_in_the_range(sample_path):
    path = sample_path("twoproc")  # two processes: correlation ids restart in each
    whole = load(path)
    span = middle(whole)
    part = load(path, time_range=span)
    assert part.meta.time_range_ns == (span.start_ns, span.end_ns)
    pd.testing.assert_frame_equal(part.api, overlapping(whole.api, span), check_categorical=False)
    pd.testing.assert_frame_equal(part.nvtx, overlapping(whole.nvtx, span),
                                  check_categorical=False)
    # every launch read has its whole replay, as in the whole trace (not cut at the range)
    launched = pd.MultiIndex.from_frame(part.api.loc[part.api["name"] == "cudaGraphLaunch",
                                                     ["proc", "corr_id"]])
    expected = whole.graph_work[pd.MultiIndex.from_frame(
        whole.graph_work[["proc", "corr_id"]]).isin(launched)].reset_index(drop=True)
    assert len(expected) == len(launched) > 50
    pd.testing.assert_frame_equal(part.graph_work, expected)
    # the syncs of the calls read are all there
    calls = pd.MultiIndex.from_frame(part.api[["proc", "corr_id"]])
    theirs = whole.syncs[pd.MultiIndex.from_frame(whole.syncs[["proc", "corr_id"]]).isin(calls)]
    assert len(theirs) > 50 and set(map(tuple, theirs[["proc", "corr_id"]].to_numpy())) <= \
        set(map(tuple, part.syncs[["proc", "corr_id"]].to_numpy()))


@pytest.mark.parametrize("name", ["case1", "case2", "twoproc", "tp2_case1", "outcopy_case1",
                                  "poll_case1", "healthy_long"])
def test_launches_inside_the_range_are_judged_as_in_the_whole_trace(sample_path, analysed,
                                                                    name):
    """Every column of every launch past the range's warm-up and before its last EDGE launches
    equals the whole trace's, to the nanosecond: classes, windows, gaps, blocks, causes,
    NVTX attribution. Cases: stalls of both kinds, two processes, tensor-parallel ranks,
    copies on a side stream, polling hosts."""
    whole = analysed(name).launches
    part = analyze(load(sample_path(name), time_range=middle(load(sample_path(name))))).launches
    inner = part[~part["warmup"]]
    inner = inner[inner.groupby("proc").cumcount(ascending=False) >= EDGE]
    assert len(inner) >= 0.2 * len(whole) - 5 * whole["proc"].nunique()
    same = whole.set_index(["proc", "corr_id"]).loc[
        pd.MultiIndex.from_frame(inner[["proc", "corr_id"]])].reset_index()
    columns = [c for c in inner.columns if c not in NUMBERING | CAPTURE_SEEN and c not in BUSY]
    pd.testing.assert_frame_equal(inner[columns].reset_index(drop=True), same[columns])
    shift = inner[BUSY].reset_index(drop=True) - same[BUSY]
    for _, per in shift.groupby(same["proc"]):
        assert per.dropna().stack().nunique() == 1  # busy between any two replays: the same
    # bursts count the blocks since the read's start: the same groups, numbered from there
    steps = [d.groupby("proc")["burst"].diff().fillna(0).to_numpy()
             for d in (inner.reset_index(drop=True), same)]
    assert (steps[0] == steps[1]).all()


def test_each_process_reads_only_the_gpu_rows_of_its_own_calls(sample_path):
    """Two engines in one export count correlation ids from their own starts: one range over
    both took in stretches of each other's GPU rows (on this sample, 2123 eager GPU rows for
    the 909 of the calls in the range), far outside the range. Per process, every GPU row read lies
    within the correlation ids of that process's calls read."""
    whole = load(sample_path("twoproc"))
    span = middle(whole)
    part = load(sample_path("twoproc"), time_range=span)
    calls = part.api.groupby("proc")["corr_id"].agg(["min", "max"])
    assert len(calls) == 2 and len(part.gpu_ops)
    for proc, ops in part.gpu_ops.groupby("proc"):
        assert ops["corr_id"].between(calls.loc[proc, "min"], calls.loc[proc, "max"]).all()
    # and nothing the analysis needs is lost: the replay of every launch read is there
    launches = part.api[part.api["name"] == "cudaGraphLaunch"]
    assert len(part.graph_work) == len(launches)


def test_report_reads_the_range_it_is_given(sample_path):
    path = str(sample_path("case1"))
    r = CliRunner().invoke(cli, ["report", path, "--from", "5", "--to", "6200ms", "--format",
                                 "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["trace"]["time_range_ns"] == [5_000_000_000, 6_200_000_000]
    # the case 1 sample's launches run from 4.23 s to 6.80 s at ~189 per second
    assert 170 <= d["launches"] <= 240 and d["stalls"]["gpu_to_cpu"] == d["steady_launches"]
    text = CliRunner().invoke(cli, ["report", path, "--from", "5", "--to", "6.2"]).output
    assert "read from 5.000 s to 6.200 s" in " ".join(text.split())


@pytest.mark.parametrize("args, code, says", [
    (["--from", "9", "--to", "10"], 3, "no CUDA graph launches from 9.000 s to 10.000 s"),
    (["--from", "9x"], 2, "'9x' is not a time"),
    (["--from", "2", "--to", "1"], 2, "must end after it starts"),
])
def test_a_range_without_launches_or_a_bad_time_is_one_line(sample_path, args, code, says):
    r = CliRunner().invoke(cli, ["report", str(sample_path("case1")), *args])
    assert r.exit_code == code and says in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_range_without_launches_points_at_the_launches(sample_path):
    """The hint named the capture (0.520 s to 7.297 s), mostly a range with no launch either:
    it now names where the graph launches lie (the healthy sample's: 4.949 s to 5.929 s)."""
    r = CliRunner().invoke(cli, ["report", str(sample_path("healthy")), "--from", "0.6",
                                 "--to", "1.2"])
    assert r.exit_code == 3 and r.output.strip().endswith(
        "no CUDA graph launches from 0.600 s to 1.200 s (0 CUDA calls there); pick a range "
        "inside the graph launches (4.949 s to 5.929 s)")


def test_several_traces_take_no_range(sample_path):
    r = CliRunner().invoke(cli, ["report", str(sample_path("case1")), str(sample_path("case2")),
                                 "--from", "5"])
    assert r.exit_code == 2 and "--from/--to takes a single trace" in r.output


def test_a_torch_profiler_trace_takes_no_range():
    from pathlib import Path
    kineto = Path(__file__).resolve().parents[2] / "sample_traces" / "kineto" / \
        "h200_kineto_case1_60.pt.trace.json.gz"
    r = CliRunner().invoke(cli, ["report", str(kineto), "--from", "1"])
    assert r.exit_code == 2 and "a time range is read from nsys exports only" in r.output
    assert len(r.output.strip().splitlines()) == 1
