"""Every graph op of an export, read a time window at a time (``export --all-kernels``): the
rows SQLite's own sort of the same tables gives, by every column reader, however the windows
fall; on the real case1 and two-process H200 samples."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
from test_columnar import ENGINES, use

from nsysscope.trace import resolve
from nsysscope.trace.nsys.gpu_work import GPU_OP_COLUMNS, gpu_op_blocks, op_window_bounds

#: the query the blocks were read with before (one SQLite sort of the three tables, a Python
#: object per value): the independent answer
_SQLITE_SORTED = """
SELECT globalPid >> 24, deviceId, streamId, start, "end", correlationId, name FROM (
  SELECT globalPid, deviceId, streamId, start, "end", correlationId,
         COALESCE((SELECT value FROM StringIds WHERE id = shortName), 'kernel') AS name
  FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL
  UNION ALL SELECT globalPid, deviceId, streamId, start, "end", correlationId,
         'memcpy ' || bytes || ' B' FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE graphNodeId IS NOT NULL
  UNION ALL SELECT globalPid, deviceId, streamId, start, "end", correlationId,
         'memset ' || bytes || ' B' FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE graphNodeId IS NOT NULL)
ORDER BY 1, 2, 3, 4, 5 DESC, 6"""


def _by_sqlite(db) -> pd.DataFrame:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return pd.DataFrame.from_records(conn.execute(_SQLITE_SORTED).fetchall(),
                                         columns=GPU_OP_COLUMNS)
    finally:
        conn.close()


def _read(db, bounds, rows=100_000) -> pd.DataFrame:
    blocks = list(gpu_op_blocks(db, bounds, rows))
    assert all(len(b) <= rows for b in blocks)
    df = pd.concat(blocks, ignore_index=True)
    return df.assign(name=df["name"].astype(object))


def _in_stream_order(df: pd.DataFrame) -> pd.DataFrame:
    """The rows by process, device, stream and start (ties: longest first, then correlation
    id): a stream's rows keep their order; streams are laid out one after the other."""
    return df.sort_values(["proc", "device", "stream", "start_ns", "end_ns", "corr_id"],
                          ascending=[True, True, True, True, False, True],
                          kind="stable").reset_index(drop=True)


@pytest.fixture(scope="module", params=["case1", "twoproc"])
def sample(request, sample_path):
    db = resolve(sample_path(request.param))
    return request.param, db, _by_sqlite(db)


@pytest.mark.parametrize("engine", ENGINES)
def test_one_window_is_sqlites_own_sort(sample, engine, monkeypatch):
    """One window (no bounds): the rows, order and names of SQLite's sort (66,600 graph ops in
    case1, 88,800 over two processes), through each column reader."""
    use(engine, monkeypatch)
    _, db, expected = sample
    got = _read(db, [])
    assert len(got) == len(expected) > 60_000
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_windows_give_every_op_once_and_each_stream_in_order(sample, analysed):
    """Windows of ~1,000 ops from the replays' starts (as the exporter picks them), and windows
    cut at arbitrary times: the same rows; within a stream, in the same order across windows
    (what the lanes carried from block to block need)."""
    name, db, expected = sample
    a = analysed(name)
    bounds = op_window_bounds(a.launches["gpu_start_ns"], a.launches["n_ops"], rows=1_000)
    assert len(bounds) >= 10
    cuts = np.sort(np.random.default_rng(0).integers(expected["start_ns"].min(),
                                                     expected["start_ns"].max(), 7)).tolist()
    for b in (bounds, cuts):
        got = _read(db, b, rows=997)
        pd.testing.assert_frame_equal(_in_stream_order(got), expected, check_dtype=False)


def test_window_bounds_hold_about_the_rows_asked():
    """From each replay's first start and count of ops: cuts every ``rows`` ops, a replay
    without GPU work (NaN) left out, none for a trace that fits in one window."""
    start = np.array([50.0, 10.0, np.nan, 30.0, 20.0, 40.0])
    ops = np.array([4, 4, 99, 4, 4, 4])
    # by start: 10 (4 ops), 20 (8), 30 (12), 40 (16), 50 (20)
    assert op_window_bounds(start, ops, rows=8) == [20, 40]
    assert op_window_bounds(start, ops, rows=20) == []
    assert op_window_bounds(np.array([]), np.array([], dtype=np.int64)) == []
