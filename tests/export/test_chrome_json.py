"""The Chrome trace writer's two ways of writing an event agree: a table of events formatted a
block at a time (by DuckDB) gives the lines that one ``json.dumps`` per event gives, and the
lanes found without walking the slices (of a whole track, or of a track a block at a time)
are the ones :class:`Lanes` gives by walking them."""

from __future__ import annotations

import errno
import io
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysscope.export.chrome_json import (
    EventWriter,
    Lanes,
    _Behind,
    _to_walk,
    json_texts,
    lanes,
)


def _walked(start: list[int], end: list[int]) -> list[int]:
    lane = Lanes()
    return [lane.add(s, e) for s, e in zip(start, end, strict=True)]


def _lanes_in_blocks(start: list[int], end: list[int], cuts: list[int]) -> list[int]:
    """:func:`lanes` of a track given a block at a time (cut at ``cuts``), carried over."""
    state = Lanes()
    got: list[int] = []
    bounds = [0, *sorted(min(c, len(start)) for c in cuts), len(start)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        got += lanes(np.array(start[a:b], dtype=np.int64), np.array(end[a:b], dtype=np.int64),
                     state).tolist()
    return got


@st.composite
def slices(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Slices of one track in lanes' order (by start, the longest first), small times so
    that they touch, nest, cross and tie often; some of zero length, some backwards."""
    n = draw(st.integers(0, 12))
    start = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n))
    # a few slices end before they start: the loader keeps such rows as they are
    length = draw(st.lists(st.integers(-3, 8) if draw(st.booleans()) else st.integers(0, 8),
                           min_size=n, max_size=n))
    pairs = sorted(zip(start, (s + d for s, d in zip(start, length, strict=True)), strict=True),
                   key=lambda p: (p[0], -p[1]))
    return [p[0] for p in pairs], [p[1] for p in pairs]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(slices())
def test_lanes_are_the_walks_lanes(track):
    start, end = track
    assert lanes(np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)).tolist() == \
        _walked(start, end)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(slices(), st.lists(st.integers(0, 12), max_size=3))
def test_lanes_of_a_track_read_in_blocks_are_the_walks_lanes(track, cuts):
    """``export --all-kernels`` reads a stream's kernels a block at a time: the lanes carried
    from block to block are the ones of one walk over them all."""
    start, end = track
    assert _lanes_in_blocks(start, end, cuts) == _walked(start, end)


@st.composite
def runs_of_slices(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Several tracks of :func:`slices` one after the other, each starting where the last one
    reached or later (touching it or after a gap): runs of which some cross and some nest."""
    start: list[int] = []
    end: list[int] = []
    for _ in range(draw(st.integers(1, 5))):
        s, e = draw(slices())
        base = max(end + start, default=0) + draw(st.integers(0, 3))
        start += [base + v for v in s]
        end += [base + v for v in e]
    return start, end


@settings(max_examples=400, derandomize=True, deadline=None)
@given(runs_of_slices(), st.lists(st.integers(0, 60), max_size=3))
def test_lanes_of_runs_read_in_blocks_are_the_walks_lanes(track, cuts):
    """Runs walked and runs not walked, whole and a block at a time: one walk's lanes."""
    start, end = track
    assert lanes(np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)).tolist() == \
        _walked(start, end)
    assert _lanes_in_blocks(start, end, cuts) == _walked(start, end)


def test_only_the_runs_with_crossing_kernels_are_walked(analysed):
    """The case1 H200 sample's graph ops, 66,600 on one stream back to back, of which three
    start before the one before them ends (clock skew): the lanes are the walk's, and only
    the runs holding such a pair are walked (6 slices; before, the whole stream)."""
    from nsysscope.trace import resolve
    from nsysscope.trace.nsys.gpu_work import gpu_op_blocks

    ops = pd.concat(gpu_op_blocks(resolve(analysed("case1").trace.source)))
    busiest = ops.groupby(["proc", "device", "stream"]).size().idxmax()
    k = ops.set_index(["proc", "device", "stream"]).loc[busiest]
    start, end = k["start_ns"].to_numpy(), k["end_ns"].to_numpy()
    crossing = int(((start[1:] < end[:-1]) & (end[1:] > end[:-1])).sum())
    walked = int(_to_walk(start, end, None).sum())
    assert len(start) > 10_000 and crossing > 0
    assert 2 * crossing <= walked <= 20 * crossing  # each pair's run: a few slices
    assert lanes(start, end).tolist() == _walked(start.tolist(), end.tolist())


def test_lanes_of_nested_and_following_slices_are_all_the_first():
    """A thread's push/pop ranges: nested, back to back, a mark at a parent's start; and the
    same with one range that crosses its parent's end, which takes a lane of its own."""
    start = [0, 0, 0, 2, 5, 10, 10, 12]
    end = [10, 4, 0, 3, 10, 20, 11, 20]
    assert lanes(np.array(start), np.array(end)).tolist() == [0] * 8 == _walked(start, end)
    start[4], end[4] = 5, 11  # ends after its parent [0, 10)
    assert lanes(np.array(start), np.array(end)).tolist() == _walked(start, end)
    assert _walked(start, end)[4] == 1


def _one_at_a_time(events: list[dict]) -> list[str]:
    out = io.StringIO()
    w = EventWriter(out)  # type: ignore[arg-type]
    for e in events:
        w.write(dict(e))
    return out.getvalue().lstrip("\n").split(",\n")


def _in_blocks(events: list[dict]) -> list[str]:
    out = io.StringIO()
    w = EventWriter(out)  # type: ignore[arg-type]
    w.write_slices("cat %d \"x\"", json_texts([e["name"] for e in events]),
                   np.array([e["pid"] for e in events], dtype=np.int64),
                   np.array([e["tid"] for e in events], dtype=np.int64),
                   np.array([e["ts_ns"] for e in events], dtype=np.int64),
                   np.array([e["ts_ns"] + e["dur_ns"] for e in events], dtype=np.int64),
                   {"corr_id": np.array([e["args"]["corr_id"] for e in events], dtype=np.int64),
                    "what": json_texts([e["args"]["what"] for e in events])})
    assert w.count == len(events)
    return out.getvalue().lstrip("\n").split(",\n")


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "name": TEXT | st.sampled_from(["cudaGraphLaunch", '"quoted" \\ %s %d', "步骤 7 🚀"]),
    "pid": st.integers(0, 2**24 - 1), "tid": st.integers(0, 2**40),
    "ts_ns": st.integers(-10**12, 10**15), "dur_ns": st.integers(-5, 10**9),
    "what": TEXT, "corr_id": st.integers(-1, 2**40)}), min_size=1, max_size=30))
def test_a_table_of_events_is_written_as_one_event_at_a_time(rows):
    """Names with quotes, backslashes, printf's own %s, CJK and emoji; negative times (the
    microseconds of -1 ns are -0.001); negative durations (written as 0)."""
    events = [{"ph": "X", "cat": "cat %d \"x\"", "name": r["name"], "pid": r["pid"],
               "tid": r["tid"], "args": {"corr_id": r["corr_id"], "what": r["what"]},
               "ts_ns": r["ts_ns"], "dur_ns": r["dur_ns"]} for r in rows]
    assert _in_blocks(events) == _one_at_a_time(events)
    for line in _in_blocks(events):
        json.loads(line)


def test_a_failed_write_is_raised_by_the_next_write_or_the_close():
    """Compressing on a thread of its own must not hide a full disk."""

    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:  # type: ignore[override]
            raise OSError(errno.ENOSPC, "No space left on device")

    out = _Behind(Full())  # type: ignore[arg-type]
    out.write("x" * 10)
    with pytest.raises(OSError, match="No space left"):
        try:
            for _ in range(100):  # the thread takes a moment to meet the error
                out.write("y")
        finally:
            out.close()  # as open_trace closes it: the thread ends, the error is said once
    assert not out._thread.is_alive()
    out.close()


def test_ctrl_c_inside_duckdb_is_an_interruption(monkeypatch):
    """DuckDB reports Ctrl-C as an error of its own ("Query interrupted"): the command line
    said "internal error", exit 70, for it, where Ctrl-C is "interrupted", exit 130."""
    import nsysscope.export.chrome_json as chrome_json

    class Stopped:
        def register(self, *_: object) -> None: ...

        def unregister(self, *_: object) -> None: ...

        def execute(self, *_: object) -> None:
            raise RuntimeError("Query interrupted")

    monkeypatch.setattr(chrome_json, "_duckdb", lambda: Stopped())
    w = EventWriter(io.StringIO())  # type: ignore[arg-type]
    one = np.array([1], dtype=np.int64)
    with pytest.raises(KeyboardInterrupt):
        w.write_slices("x", json_texts(["a"]), one, one, one, one)


def test_many_distinct_names_are_written_the_same(monkeypatch):
    """Past FEW_TEXTS distinct names (NVTX step names) they go to DuckDB as Python strings,
    not as a categorical: the same lines either way."""
    import nsysscope.export.chrome_json as chrome_json

    events = [{"ph": "X", "cat": "cat %d \"x\"", "name": f"step {i} \u6b65 %s", "pid": 7,
               "tid": i, "args": {"corr_id": i, "what": "w"}, "ts_ns": 1000 * i - 5,
               "dur_ns": i} for i in range(50)]
    few = _in_blocks(events)
    monkeypatch.setattr(chrome_json, "FEW_TEXTS", 10)
    assert isinstance(json_texts([e["name"] for e in events]), np.ndarray)
    assert _in_blocks(events) == few == _one_at_a_time(events)
