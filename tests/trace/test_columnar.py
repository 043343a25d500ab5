"""The column readers: nsysscope's C reader and DuckDB answer a healthy export, the same SQL
through sqlite3 answers (or reports) what they refuse, and all three give the same columns,
on copies of the real case1 H200 sample."""

from __future__ import annotations

import shutil
import sqlite3
import threading

import numpy as np
import pandas as pd
import pytest

from nsysscope import load
from nsysscope.errors import NotAnNsysExport
from nsysscope.trace import columnar, resolve, stepped
from nsysscope.trace.nsys import tables
from nsysscope.trace.nsys.gpu_work import GpuWork
from nsysscope.trace.nsys.schema import Schema, connect_readonly

ENGINES = ["stepped", "duckdb", "sqlite3"]
needs_c_reader = pytest.mark.skipif(not stepped.available(), reason="C reader not built")


@pytest.fixture()
def case1_copy(sample_path, tmp_path):
    dst = tmp_path / "case1.sqlite"
    shutil.copyfile(resolve(sample_path("case1")), dst)
    return dst


def use(engine: str, monkeypatch) -> None:
    """Read with ``engine`` only (and sqlite3 where it refuses)."""
    if engine == "stepped" and not stepped.available():
        pytest.skip("C reader not built")
    if engine != "stepped":
        monkeypatch.setattr(columnar, "available", lambda: False)
    if engine == "sqlite3":
        monkeypatch.setattr(columnar, "attach", lambda db: None)


@pytest.mark.parametrize("engine", ["stepped", "duckdb"])
def test_a_fast_reader_reads_a_healthy_export_itself(case1_copy, monkeypatch, engine):
    use(engine, monkeypatch)
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        api, nvtx, gpu = tables.api_table(s), tables.nvtx_table(s), GpuWork(s)
        assert s.fallbacks == 0
    # the sample's own numbers: 300 graph launches, each with its replay's GPU span
    assert (api["name"] == "cudaGraphLaunch").sum() == 300
    assert len(gpu.graph_work()) == 300 and len(nvtx) > 300


@pytest.mark.parametrize("engine", ENGINES)
def test_text_that_is_not_utf8_is_read_with_replacement_characters(case1_copy, monkeypatch,
                                                                   engine):
    before = load(case1_copy).nvtx
    with sqlite3.connect(case1_copy) as c:
        rowid, text = c.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE text LIKE 'step %' "
                                "ORDER BY rowid LIMIT 1").fetchone()
        c.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE rowid = ?",
                  (text.encode() + b"\xff", rowid))
    use(engine, monkeypatch)
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        after = tables.nvtx_table(s)
        # DuckDB refuses the text and sqlite3 decodes it; the C reader decodes it itself
        assert s.fallbacks == (1 if engine == "duckdb" else 0)
    changed = before["text"].astype(str) != after["text"].astype(str)
    assert changed.sum() == 1
    assert after.loc[changed, "text"].iloc[0] == text + "\ufffd"
    pd.testing.assert_frame_equal(before.drop(columns="text"), after.drop(columns="text"))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_value_of_the_wrong_type_is_reported_not_misread(case1_copy, monkeypatch, engine):
    with sqlite3.connect(case1_copy) as c:
        c.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 'soon' WHERE rowid = "
                  "(SELECT MIN(r.rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                  "ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%')")
    use(engine, monkeypatch)
    with pytest.raises(NotAnNsysExport, match="a value of the wrong type"):
        load(case1_copy)


def test_a_text_column_is_the_same_categorical_from_every_engine(case1_copy, monkeypatch):
    """Text comes back numbered by the C reader, grouped by value from DuckDB and row by row
    from sqlite3: the same rows, the same sorted categories, and a NULL missing in all."""
    sql = ("SELECT n.rowid, n.start, CASE WHEN n.rowid % 3 = 0 THEN NULL ELSE n.text END "
           "FROM NVTX_EVENTS n")

    def read(engine: str) -> pd.DataFrame:
        with monkeypatch.context() as m:
            use(engine, m)
            with Schema(connect_readonly(case1_copy), case1_copy) as s:
                rowid, start, text = s.read(sql, "iic", split="NVTX_EVENTS")
        return pd.DataFrame({"start": start, "text": text}, index=rowid).sort_index()

    frames = {e: read(e) for e in ENGINES if e != "stepped" or stepped.available()}
    first = frames["sqlite3"]
    for got in frames.values():
        pd.testing.assert_frame_equal(got, first)
    with sqlite3.connect(case1_copy) as c:
        nulls, = c.execute("SELECT count(*) FROM NVTX_EVENTS WHERE rowid % 3 = 0 "
                           "OR text IS NULL").fetchone()
    assert first["text"].isna().sum() == nulls > len(first) // 3 - 1
    assert list(first["text"].cat.categories) == sorted(first["text"].dropna().unique())


@pytest.mark.parametrize("table,column", [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start"),  # a plain column
    ("NVTX_EVENTS", "start"),  # a column DuckDB hands over in lists, grouped by text
    ("CUPTI_ACTIVITY_KIND_MEMSET", "start"),  # a read grouped by runs
])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_null_integer_is_reported_by_every_engine(case1_copy, monkeypatch, table, column,
                                                    engine):
    """DuckDB masks a NULL, and numpy made it a 0: the trace was analysed on it (launch-bound
    on 292/293 launches, for a NULL start in every seventh runtime call)."""
    with sqlite3.connect(case1_copy) as c:  # NOT NULL is checked on write only: drop it
        c.execute("PRAGMA writable_schema=ON")
        c.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type='table'")
    with sqlite3.connect(case1_copy) as c:
        c.execute(f"UPDATE {table} SET {column} = NULL WHERE rowid % 7 = 3")
    use(engine, monkeypatch)
    with pytest.raises(NotAnNsysExport, match="a value of the wrong type"):
        load(case1_copy)


@needs_c_reader
@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                                   "CUPTI_ACTIVITY_KIND_KERNEL"])
def test_a_table_read_in_parts_is_the_table_read_whole(case1_copy, monkeypatch, table):
    """Parts over ranges of rowids, on as many threads, come back as one read would: every
    row once, in rowid order (the sample's tables have 2,400 to 10,000 rows: parts of 500)."""
    monkeypatch.setattr(stepped, "PART_ROWS", 500)
    monkeypatch.setattr(stepped, "workers", lambda: 4)
    sql = f'SELECT rowid, start, IFNULL("end", -1) FROM {table} n WHERE n.start % 5 != 1'
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        reader = stepped.SteppedReader(case1_copy, s.conn)
        assert len(reader._parts(table)) == 4
        parts = reader.read(sql, "iii", split=table)
        whole = reader.read(sql, "iii")
        expected = s.conn.execute(sql + " ORDER BY rowid").fetchall()
    assert len(expected) > 1900
    for a, b in zip(parts, whole, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.column_stack(parts), np.array(expected))


@needs_c_reader
def test_a_read_grouped_by_runs_folds_to_sqls_group_by(case1_copy, monkeypatch):
    """The C reader folds adjacent rows only, and a part may end inside a group; folded again,
    its groups are SQL's GROUP BY: here a replay's graph memsets, per correlation id."""
    monkeypatch.setattr(stepped, "PART_ROWS", 500)
    monkeypatch.setattr(stepped, "workers", lambda: 3)
    table = "CUPTI_ACTIVITY_KIND_MEMSET"
    sql = (f'SELECT correlationId, start, "end", 1 FROM {table} WHERE graphNodeId IS NOT NULL')
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        key, first, last, count = stepped.SteppedReader(case1_copy, s.conn).read(
            sql, "knxs", split=table)
        expected = np.array(s.conn.execute(
            f"{columnar.grouped_sql(sql, 'knxs')} ORDER BY 1").fetchall())
    assert len(key) > len(expected) > 200  # split groups: 3 parts in the middle of replays
    folded = pd.DataFrame({"k": key, "n": first, "x": last, "s": count}).groupby("k").agg(
        {"n": "min", "x": "max", "s": "sum"}).reset_index()
    np.testing.assert_array_equal(folded.to_numpy(), expected)


@needs_c_reader
def test_ctrl_c_during_a_read_in_parts_stops_every_part(case1_copy):
    """The main thread waits for the parts, which run on other threads with the GIL
    released: Ctrl-C there must end the read with KeyboardInterrupt (the CLI's exit 130),
    and the parts must stop at once, not run their query to its end."""
    import signal
    import time
    # ~10^12 rows: a recursive count no part would finish this year
    sql = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
           "WHERE i < 1000000000000) SELECT i FROM r")
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        reader = stepped.SteppedReader(case1_copy, s.conn)
        # Ctrl-C: SIGINT, which the kernel hands to the main thread
        main = threading.main_thread().ident
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        # a Ctrl-C lost ends the test as a failure (ReadStopped), not as a hang
        guard = threading.Timer(30, reader.stop)
        guard.start()
        t0 = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                reader.read(sql, "i")
        finally:
            guard.cancel()
        assert time.monotonic() - t0 < 5
    # the pool is free again: a read after the interrupt runs
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        n, = stepped.SteppedReader(case1_copy, s.conn).read(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME", "i")
    assert n[0] > 1000


def test_ctrl_c_during_a_duckdb_query_stops_the_run(case1_copy, monkeypatch):
    """DuckDB reports Ctrl-C as an error of the query; the reader took that for damage, read
    everything again through sqlite3 and finished with exit 0. A real interrupt of a real
    query (``interrupt()`` from another thread, what DuckDB's Ctrl-C handler calls) must stop
    the read with KeyboardInterrupt (the CLI's exit 130)."""
    use("duckdb", monkeypatch)
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


@needs_c_reader
def test_ctrl_c_while_tables_are_read_at_once_stops_every_read(case1_copy):
    """The loader reads its tables on threads of their own (``Schema.at_once``): Ctrl-C in
    the main thread stops each of them, not only the one it happened to wait for."""
    import signal
    import time
    endless = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
               "WHERE i < 1000000000000) SELECT i FROM r")
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        main = threading.main_thread().ident
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            s.at_once({"a": lambda: s.read(endless, "i"), "b": lambda: s.read(endless, "i")})
        assert time.monotonic() - t0 < 5


@needs_c_reader
def test_the_error_of_tables_read_at_once_is_the_failed_reads_own(case1_copy):
    """One read fails; the others are stopped, and what is raised is the failure, not the
    others' being stopped."""
    def bad():
        raise ValueError("damaged")

    endless = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
               "WHERE i < 1000000000000) SELECT i FROM r")
    with Schema(connect_readonly(case1_copy), case1_copy) as s, \
            pytest.raises(ValueError, match="damaged"):
        s.at_once({"endless": lambda: s.read(endless, "i"), "bad": bad})


@needs_c_reader
def test_a_failure_inside_nested_reads_is_raised_not_the_stop_it_caused(case1_copy):
    """The GPU tables are read at once inside the loader's reads at once: one of them fails
    and every read of the export is stopped, so another table's read, started later, ends
    first, stopped. What is raised is the failure (a damaged export's message), not that."""
    import time

    def bad():
        time.sleep(0.05)
        raise ValueError("damaged")

    def gpu_tables():  # the inner reads end when the slow one does, after `later`
        return s.at_once({"bad": bad, "slow": lambda: time.sleep(0.6)})

    def later():
        time.sleep(0.2)  # after the failure stopped the reads
        return s.read("SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME", "i")

    with Schema(connect_readonly(case1_copy), case1_copy) as s, \
            pytest.raises(ValueError, match="damaged"):
        s.at_once({"gpu": gpu_tables, "later": later})


@needs_c_reader
@pytest.mark.parametrize("name", ["case1", "twoproc", "tp2_case1", "poll_case1", "graph_case1",
                                  "pieces_case1", "outcopy_case1"])
def test_every_reader_loads_the_same_trace(sample_path, monkeypatch, name):
    """The whole loader through the C reader (tables at once, in parts), through DuckDB and
    through sqlite3: every table of the :class:`Trace` the same, row for row (one process
    and several, graph-traced and piecewise replays, polling, side-stream copies)."""
    def loaded(engine: str):
        with monkeypatch.context() as m:
            use(engine, m)
            m.setattr(stepped, "PART_ROWS", 300)  # several parts even in a small sample
            return load(sample_path(name))

    traces = {e: loaded(e) for e in ENGINES}
    first = traces["stepped"]
    for engine, t in traces.items():
        for table in ("api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx",
                      "threads", "processes", "collectives"):
            pd.testing.assert_frame_equal(getattr(t, table), getattr(first, table),
                                          obj=f"{engine}: {table}")
        assert t.meta == first.meta
    assert len(first.graph_work) > 0 and len(first.api) > 1000


@needs_c_reader
def test_the_c_reader_can_be_turned_off(case1_copy, monkeypatch):
    monkeypatch.setenv("NSYSSCOPE_C_READER", "0")
    assert not stepped.available()
    with Schema(connect_readonly(case1_copy), case1_copy) as s:
        assert not s._reader.concurrent  # DuckDB reads, one query at a time
        assert (tables.api_table(s)["name"] == "cudaGraphLaunch").sum() == 300
