"""The column reader: DuckDB answers a healthy export, and the same SQL through sqlite3 answers
(or reports) what DuckDB refuses, on copies of the real case1 H200 sample."""

from __future__ import annotations

import shutil
import sqlite3

import pandas as pd
import pytest

from nsysscope import load
from nsysscope.errors import NotAnNsysExport
from nsysscope.trace import columnar, resolve, tables
from nsysscope.trace.gpu_work import GpuWork
from nsysscope.trace.schema import Schema, connect_readonly


@pytest.fixture()
def case1_copy(sample_path, tmp_path):
    dst = tmp_path / "case1.sqlite"
    shutil.copyfile(resolve(sample_path("case1")), dst)
    return dst


def test_duckdb_reads_a_healthy_export_itself(case1_copy):
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        api, nvtx, gpu = tables.api_table(s), tables.nvtx_table(s), GpuWork(s)
        assert s.fallbacks == 0
    # the sample's own numbers: 300 graph launches, each with its replay's GPU span
    assert (api["name"] == "cudaGraphLaunch").sum() == 300
    assert len(gpu.graph_work()) == 300 and len(nvtx) > 300


def test_text_that_is_not_utf8_is_read_with_replacement_characters(case1_copy):
    before = load(case1_copy).nvtx
    with sqlite3.connect(case1_copy) as c:
        rowid, text = c.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE text LIKE 'step %' "
                                "ORDER BY rowid LIMIT 1").fetchone()
        c.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE rowid = ?",
                  (text.encode() + b"\xff", rowid))
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        after = tables.nvtx_table(s)
        assert s.fallbacks == 1  # DuckDB refused the text; sqlite3 decoded it
    changed = before["text"].astype(str) != after["text"].astype(str)
    assert changed.sum() == 1
    assert after.loc[changed, "text"].iloc[0] == text + "\ufffd"
    pd.testing.assert_frame_equal(before.drop(columns="text"), after.drop(columns="text"))


def test_a_value_of_the_wrong_type_is_reported_not_misread(case1_copy):
    with sqlite3.connect(case1_copy) as c:
        c.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 'soon' WHERE rowid = "
                  "(SELECT MIN(r.rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                  "ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%')")
    with pytest.raises(NotAnNsysExport, match="a value of the wrong type"):
        load(case1_copy)


def test_a_text_column_is_the_same_categorical_from_either_engine(case1_copy, monkeypatch):
    """Text comes back grouped by value from DuckDB and row by row from sqlite3: the same
    rows, the same sorted categories, and a NULL missing in both."""
    sql = ("SELECT n.rowid, n.start, CASE WHEN n.rowid % 3 = 0 THEN NULL ELSE n.text END "
           "FROM NVTX_EVENTS n")

    def read() -> pd.DataFrame:
        with Schema(connect_readonly(case1_copy), case1_copy) as s:
            rowid, start, text = s.read(sql, "iic")
        return pd.DataFrame({"start": start, "text": text}, index=rowid).sort_index()

    fast = read()
    monkeypatch.setattr(columnar, "attach", lambda db: None)
    slow = read()
    pd.testing.assert_frame_equal(fast, slow)
    with sqlite3.connect(case1_copy) as c:
        nulls, = c.execute("SELECT count(*) FROM NVTX_EVENTS WHERE rowid % 3 = 0 "
                           "OR text IS NULL").fetchone()
    assert fast["text"].isna().sum() == nulls > len(fast) // 3 - 1
    assert list(fast["text"].cat.categories) == sorted(fast["text"].dropna().unique())


@pytest.mark.parametrize("table,column", [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start"),  # a plain column
    ("NVTX_EVENTS", "start"),  # a column DuckDB hands over in lists, grouped by text
])
@pytest.mark.parametrize("engine", ["duckdb", "sqlite3"])
def test_a_null_integer_is_reported_by_either_engine(case1_copy, monkeypatch, table, column,
                                                     engine):
    """DuckDB masks a NULL, and numpy made it a 0: the trace was analysed on it (launch-bound
    on 292/293 launches, for a NULL start in every seventh runtime call)."""
    with sqlite3.connect(case1_copy) as c:  # NOT NULL is checked on write only: drop it
        c.execute("PRAGMA writable_schema=ON")
        c.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type='table'")
    with sqlite3.connect(case1_copy) as c:
        c.execute(f"UPDATE {table} SET {column} = NULL WHERE rowid % 7 = 3")
    if engine == "sqlite3":
        monkeypatch.setattr(columnar, "attach", lambda db: None)
    with pytest.raises(NotAnNsysExport, match="a value of the wrong type"):
        load(case1_copy)


def test_ctrl_c_during_a_duckdb_query_stops_the_run(case1_copy, monkeypatch):
    """DuckDB reports Ctrl-C as an error of the query; the reader took that for damage, read
    everything again through sqlite3 and finished with exit 0. A real interrupt of a real
    query (``interrupt()`` from another thread, what DuckDB's Ctrl-C handler calls) must stop
    the read with KeyboardInterrupt (the CLI's exit 130)."""
    import threading
    fetch = columnar._fetch

    def interrupted_fetch(duck, sql, params):
        threading.Timer(0.2, duck.interrupt).start()
        # a query long enough to be interrupted: ~10^13 rows of a cross join, counted
        return fetch(duck, "SELECT count(*) FROM range(10000000) a, range(1000000) b", ())

    monkeypatch.setattr(columnar, "_fetch", interrupted_fetch)
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        with pytest.raises(KeyboardInterrupt):
            tables.api_table(s)
        assert s.fallbacks == 0
