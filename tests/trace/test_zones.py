"""A time window read by the stretches of rowids its zone map names (``trace/nsys/zones.py``) is
the window read from the whole tables, to the row and in the same order: on the real
samples, at time ranges spread over each, with zones small enough that the samples hold
hundreds, and on exports whose rows were shuffled out of time order."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from nsysscope.trace.apis import LAUNCH_APIS
from nsysscope.trace.nsys import zones as zones_module
from nsysscope.trace.nsys.read import read_trace
from nsysscope.trace.nsys.schema import Schema, connect_readonly
from nsysscope.trace.nsys.sources import resolve
from nsysscope.trace.nsys.tables import wanted_api_ids
from nsysscope.trace.nsys.zones import zone_map
from nsysscope.trace.time_range import TimeRange
from nsysscope.trace.windows import _COPIED

#: frames of a window's trace the reads fill
FRAMES = ("api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx", "collectives")


def zoned(db, path):
    s = Schema(connect_readonly(db), path)
    wanted = wanted_api_ids(s)
    launch_ids = [i for i, n in wanted.items() if n in LAUNCH_APIS]
    return s, zone_map(s, _COPIED, launch_ids, list(wanted))


def spans(s: Schema, n: int = 6) -> list[TimeRange]:
    """``n`` ranges spread over the trace's CUDA calls, of 2 % to 30 % of it, and two open
    ones."""
    t0, t1 = s.conn.execute('SELECT MIN(start), MAX("end") FROM CUPTI_ACTIVITY_KIND_RUNTIME'
                            ).fetchone()
    rng = np.random.default_rng(58)
    out = [TimeRange(None, t0 + (t1 - t0) // 3), TimeRange(t0 + (t1 - t0) * 2 // 3, None)]
    for _ in range(n):
        width = int((t1 - t0) * rng.uniform(0.02, 0.3))
        start = int(rng.integers(t0, t1 - width))
        out.append(TimeRange(start, start + width))
    return out


def assert_same_windows(db, path):
    s, (z, _, _) = zoned(db, path)
    plain = Schema(connect_readonly(db), path)
    restricted = Schema(connect_readonly(db), path, zones=z)
    read_less = 0
    try:
        for span in spans(s):
            a, b = read_trace(plain, path, db, span), read_trace(restricted, path, db, span)
            for name in FRAMES:
                pd.testing.assert_frame_equal(getattr(b, name), getattr(a, name))
            runs = z.runs("CUPTI_ACTIVITY_KIND_RUNTIME", span)
            read_less += runs is not None
        assert restricted.fallbacks == 0  # the C reader read every stretch
        return z, read_less
    finally:
        for x in (s, plain, restricted):
            x.close()


@pytest.fixture
def small_zones(monkeypatch):
    monkeypatch.setattr(zones_module, "ZONE_BITS", 6)  # 64 rows: hundreds of zones a sample


@pytest.mark.parametrize("name", ["case1", "tp2_case1", "twoproc", "outcopy_case1_every8",
                                  "poll_case1", "graph_case1"])
def test_a_window_read_by_zones_is_the_window_read_whole(sample_path, small_zones, name):
    path = sample_path(name)
    z, read_less = assert_same_windows(resolve(path), path)
    runtime = z.tables["CUPTI_ACTIVITY_KIND_RUNTIME"]
    assert len(runtime.first) > 100
    assert read_less >= 6  # the ranges in the middle read part of the calls, not all


@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                                   "CUPTI_ACTIVITY_KIND_KERNEL",
                                   "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"])
def test_rows_out_of_time_order_are_read_all_the_same(sample_path, small_zones, tmp_path,
                                                      table):
    """An export whose table lost its time order (its rows shuffled): zones then span much of
    the trace each, and a window reads more of the table, but never misses a row."""
    path = sample_path("tp2_case1")
    db = tmp_path / "shuffled.sqlite"
    shutil.copy(resolve(path), db)
    conn = sqlite3.connect(db)
    conn.execute(f"CREATE TABLE shuffled AS SELECT * FROM {table} ORDER BY random()")
    conn.execute(f"DELETE FROM {table}")
    conn.execute(f"INSERT INTO {table} SELECT * FROM shuffled")
    conn.execute("DROP TABLE shuffled")
    conn.commit()
    conn.close()
    assert_same_windows(db, db)


def test_the_pass_finds_every_launch_and_counts_the_rows_a_copy_would(sample_path):
    path = sample_path("tp2_case1")
    db = resolve(path)
    s, (z, launches, rows) = zoned(db, path)
    try:
        wanted = wanted_api_ids(s)
        ids = ",".join(str(i) for i, n in wanted.items() if n in LAUNCH_APIS)
        expected = s.conn.execute(
            "SELECT start, globalTid >> 24 FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            f"WHERE nameId IN ({ids}) ORDER BY rowid").fetchall()
        assert list(zip(launches["start_ns"], launches["proc"], strict=True)) == expected
        assert len(expected) == 200
        counted = sum(s.conn.execute(f"SELECT count(*) FROM {t}" + (
            f" WHERE nameId IN ({','.join(map(str, wanted))})"
            if t == "CUPTI_ACTIVITY_KIND_RUNTIME" else "")).fetchone()[0]
            for t in _COPIED if s.has(t))
        assert rows == counted
        assert set(z.tables) == {t for t in _COPIED if s.columns(t)}
    finally:
        s.close()
