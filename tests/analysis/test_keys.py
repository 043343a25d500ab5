"""KeyIndex finds the first row of each (a, b) pair exactly as a dictionary of first
occurrences does: on the real calls of the two-process sample, and on keys that do not fit
the packed 32 bits."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsysscope.analysis.keys import KeyIndex


def _first_rows(a, b) -> dict:
    first: dict = {}
    for row, key in enumerate(zip(a, b, strict=True)):
        first.setdefault(key, row)
    return first


def _check(a, b, qa, qb) -> None:
    want = _first_rows(a, b)
    got = KeyIndex.of(a, b).first_row(qa, qb)
    assert got.tolist() == [want.get(k, -1) for k in zip(qa, qb, strict=True)]


def test_real_calls_of_two_processes(analysed):
    api = analysed("twoproc").trace.api
    assert api["proc"].nunique() == 2  # correlation ids repeat across the two processes
    rng = np.random.default_rng(0)
    q = rng.integers(0, len(api), 500)
    tid, corr = api["tid"].to_numpy(), api["corr_id"].to_numpy()
    # half the questions are real calls; the other half swap threads or miss by one id
    qa = np.r_[tid[q], tid[q[::-1]]]
    qb = np.r_[corr[q], corr[q] + 1]
    _check(tid.tolist(), corr.tolist(), qa.tolist(), qb.tolist())


def test_keys_beyond_32_bits_and_missing_ids():
    a = [7, 7, 7, 9, 9, 7]
    b = [5, 1 << 40, -7, 5, -1, 5]  # a repeat: its first row wins
    qa = [7, 7, 7, 9, 9, 9, 8, 7]
    qb = [5, 1 << 40, -7, 5, -1, 1 << 40, 5, 6]
    _check(a, b, qa, qb)
    _check([1, 1], [-1, 3], [1, 1, 1], [-1, 3, -2])  # packed: -1 packs, -2 is unknown


def test_join_first_is_a_merge_with_the_first_match(analysed):
    """On the outcopy sample's real tables (syncs of both streams, event records): the same
    frame, dtypes included, as pandas' merge of the deduplicated right side."""
    from nsysscope.analysis.keys import join_first

    t = analysed("outcopy_case1").trace
    calls = t.api[["proc", "corr_id", "tid", "start_ns"]]
    for right in (t.syncs, t.event_records):
        for how in ("left", "inner"):
            want = calls.merge(right.drop_duplicates(["proc", "corr_id"]), on=["proc", "corr_id"],
                               how=how)
            pd.testing.assert_frame_equal(join_first(calls, right, ["proc", "corr_id"], how), want)
    # a missing key matches nothing (pandas would match it to a missing key on the right)
    left = pd.DataFrame({"proc": t.syncs["proc"].iloc[:3].to_numpy(),
                         "event_sync_id": [np.nan, *t.syncs["event_sync_id"].iloc[1:3]]})
    got = join_first(left, t.event_records.drop(columns="corr_id"), ["proc", "event_sync_id"])
    assert got["stream"].isna().iloc[0] and got["stream"].dtype == np.float64
