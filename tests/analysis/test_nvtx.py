"""Which NVTX ranges enclose a moment (:class:`nsysscope.analysis.nvtx.NvtxIndex`).

The property: at any moment on a thread, the index's range path holds exactly the ranges
that contain that moment, by brute force. It holds for push/pop ranges, which nest, and for
``nvtxRangeStart/End`` ranges, which need not (nsysscope reads both kinds); zero-length
ranges (marks) contain no moment. Each drawn range has a name of its own, so a path names
the ranges it found. The real traces' paths are checked by the report tests and golden
files; these are the shapes the samples do not have.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsysscope.analysis.nvtx import NvtxIndex, nesting_depth

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def table(ranges: list[tuple[int, int, int]]) -> pd.DataFrame:
    """``(start, end, tid)`` rows as the loader gives them: by start, each named ``r<i>``."""
    df = pd.DataFrame(ranges, columns=["start_ns", "end_ns", "tid"])
    df["text"] = [f"r{i}" for i in range(len(df))]
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def found(nv: pd.DataFrame, tid: int, times: np.ndarray) -> list[set[str]]:
    """The ranges each moment's path names; checked to be outer first (by start)."""
    paths = NvtxIndex.of(nv).enclosing(np.full(len(times), tid), times)["nvtx_path"]
    start = dict(zip(nv["text"], nv["start_ns"], strict=True))
    out = []
    for p in paths:
        names = p.split(" > ") if p else []
        assert [start[n] for n in names] == sorted(start[n] for n in names), p
        out.append(set(names))
    return out


def containing(nv: pd.DataFrame, tid: int, t: int) -> set[str]:
    inside = (nv["tid"] == tid) & (nv["start_ns"] <= t) & (t < nv["end_ns"])
    return set(nv.loc[inside, "text"])


interval = st.tuples(st.integers(0, 60), st.integers(0, 25), st.sampled_from([1, 2]))


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(interval, min_size=1, max_size=14))
def test_any_ranges_the_path_is_the_ranges_containing_the_moment(drawn):
    nv = table([(s, s + n, tid) for s, n, tid in drawn])
    times = np.arange(0, 90)  # every moment the drawn ranges can cover
    for tid in (1, 2):
        assert found(nv, tid, times) == [containing(nv, tid, t) for t in times]


def nested(widths: list[int]) -> list[tuple[int, int, int]]:
    """Push/pop ranges: ``widths`` read as a walk that pushes (> 0) or pops (<= 0)."""
    out, stack, now = [], [], 0
    for w in widths:
        now += 1
        if w > 0 or not stack:
            stack.append(len(out))
            out.append([now, None, 1])
        else:
            out[stack.pop()][1] = now
    for i in reversed(stack):
        now += 1
        out[i][1] = now
    return [(s, e, tid) for s, e, tid in out]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=20))
def test_push_pop_depths_are_the_ranges_open_at_the_start(widths):
    """For ranges that nest, the depth is the push/pop depth: how many are open."""
    nv = table(nested(widths))
    s, e = nv["start_ns"].to_numpy(), nv["end_ns"].to_numpy()
    open_at = [int(((s < si) & (e > si)).sum()) for si in s]
    assert nesting_depth(nv).tolist() == open_at


def test_a_mark_at_its_parents_start_hides_nothing():
    """A zero-length range at the same nanosecond as the range around it took the outer
    range's depth and hid it: ``step 3`` was lost at every moment inside it."""
    nv = pd.DataFrame({"start_ns": [0, 0, 50], "end_ns": [100, 0, 60], "tid": [1, 1, 1],
                       "text": ["step 3", "mark", "sample"]})
    at = NvtxIndex.of(nv).enclosing(np.array([1, 1]), np.array([55, 70]))
    assert at["nvtx_path"].tolist() == ["step 3 > sample", "step 3"]
    assert at["step"].tolist() == [3, 3]
    assert at["phase"].iloc[0] == "sample" and pd.isna(at["phase"].iloc[1])


def test_start_end_ranges_that_overlap_are_both_found():
    """nvtxRangeStart/End: ``step 4`` starts inside ``schedule`` and outlives it; ``sample``
    is inside ``step 4`` after ``schedule`` ended. The push/pop depth put ``sample`` beside
    ``step 4`` and lost the step."""
    nv = pd.DataFrame({"start_ns": [0, 50, 120], "end_ns": [100, 150, 130], "tid": [1, 1, 1],
                       "text": ["schedule", "step 4", "sample"]})
    at = NvtxIndex.of(nv).enclosing(np.array([1, 1]), np.array([60, 125]))
    assert at["nvtx_path"].tolist() == ["schedule > step 4", "step 4 > sample"]
    assert at["step"].tolist() == [4, 4]


def test_a_range_that_does_not_nest_is_ordered_by_its_start():
    """``decode`` overlaps the end of ``step 4``, and ``sample`` starts inside both: the path
    is outer first and the phase the innermost (a moved range once came after ``sample``)."""
    nv = pd.DataFrame({"start_ns": [0, 10, 100, 150], "end_ns": [60, 200, 300, 160],
                       "tid": [1] * 4, "text": ["schedule", "step 4", "decode", "sample"]})
    at = NvtxIndex.of(nv).enclosing(np.array([1]), np.array([155]))
    assert at["nvtx_path"].tolist() == ["step 4 > decode > sample"]
    assert at["phase"].tolist() == ["sample"] and at["step"].tolist() == [4]


def test_a_long_chain_of_overlapping_ranges_takes_two_lanes():
    """3000 start/end ranges, each overlapping the next, beside 30000 push/pop ranges on the
    same thread: the chain needs two lanes, and only the chain's ranges move (moving every
    clashing range one depth down per round took 3000 rounds and 3002 depths)."""
    chain = [(i * 100, i * 100 + 150, 1) for i in range(3000)]
    pushed = [(i * 10, i * 10 + 5, 1) for i in range(30_000)]
    nv = table(chain + pushed)
    depth = nesting_depth(nv)
    # push/pop depths 0-2 (two chain ranges and a pushed one open at once), then two lanes
    assert depth.max() == 4
    assert found(nv, 1, np.array([12_345]))[0] == containing(nv, 1, 12_345)
