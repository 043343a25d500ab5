#!/usr/bin/env python3
"""The candidate readers of issue 14, side by side on one export: which one to load with.

The issue names Arrow-native readers (``connectorx``, ``adbc-driver-sqlite``) and DuckDB with
its SQLite extension, "chosen by measured numbers". This times, per table, the rows and
columns nsysscope's loader reads, through:

* **duckdb**: the loader itself (``nsysscope.trace.load``), each of its queries timed as it
  runs: DuckDB's SQLite scanner on every core, the GPU tables as a parallel ``GROUP BY``;
* **connectorx**: the same rows and columns, SQLite running the query (the filter on
  ``nameId`` and the NVTX join in C), one partition per core by ``rowid`` range, into Arrow
  and then numpy; the GPU tables' rows are grouped per replay in numpy (sort, ``reduceat``),
  since SQLite's ``GROUP BY`` sorts (~25 s for the full 10^5 kernel table);
* **adbc**: as connectorx, on one connection (the driver does not partition).

A table the loader reads twice (an NCCL trace's kernels: the GPU pass, then the
collectives) is one row, its queries summed. Every reader gets the same warm page cache (the
file is read once first), and every column ends as a numpy array (text dictionary-encoded, as
the loader's categoricals). Wall and CPU seconds of this process; the readers' own imports
are timed apart.

The two Arrow readers are not nsysscope dependencies; install them in a venv of their own::

    python -m venv bench/.venv-readers
    bench/.venv-readers/bin/pip install -e . connectorx==0.4.6 adbc-driver-sqlite==1.13.0 \\
        pyarrow==26.0.1
    bench/.venv-readers/bin/python bench/readers.py TRACE.sqlite
"""

from __future__ import annotations

import importlib
import os
import resource
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: per table: the columns the loader reads (as SQL over the export, in the shape an Arrow
#: reader takes), and whether its rows are grouped per graph replay
_RUNTIME = ('SELECT start, "end", IFNULL(globalTid, -1) tid, IFNULL(correlationId, -1) corr, '
            "nameId, IFNULL(returnValue, 0) ret FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "WHERE nameId IN ({ids})")
_RECORDS = ("SELECT IFNULL(globalPid, -1) pid, IFNULL(correlationId, -1) corr, "
            "IFNULL(eventSyncId, -1) esid, streamId FROM {table}")
_NVTX = ('SELECT n.start, n."end", IFNULL(n.globalTid, -1) tid, n.rowid r, '
         "COALESCE(NULLIF(n.text, ''), t.value, '') x FROM NVTX_EVENTS n "
         "LEFT JOIN StringIds t ON t.id = n.textId "
         'WHERE n.eventType IN (59, 60) AND n."end" IS NOT NULL')
_GPU = ("SELECT IFNULL(graphNodeId, -1) node, IFNULL(correlationId, -1) corr, "
        'IFNULL(globalPid, -1) pid, start, "end", streamId, deviceId, rowid r{copy} FROM {table}')
#: the NCCL kernels the loader reads again, for the collectives (``tables.collectives_table``)
_NCCL = ("SELECT IFNULL(globalPid, -1) pid, IFNULL(correlationId, -1) corr, start, \"end\", "
         "streamId, deviceId, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL "
         "WHERE shortName IN ({ids})")
_COPY = {"CUPTI_ACTIVITY_KIND_KERNEL": "",
         "CUPTI_ACTIVITY_KIND_MEMCPY": ", copyKind, IFNULL(srcKind, -1) sk, "
                                       "IFNULL(dstKind, -1) dk, bytes",
         "CUPTI_ACTIVITY_KIND_MEMSET": ", bytes"}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    t, c = time.perf_counter(), cpu()
    out = fn()
    return out, time.perf_counter() - t, cpu() - c


def queries(db: Path) -> list[tuple[str, str, str, bool]]:
    """(label, table, SQL, grouped per replay) for each table the loader reads."""
    from nsysscope.trace.nsys.schema import Schema, connect_readonly
    from nsysscope.trace.nsys.tables import wanted_api_ids
    s = Schema(connect_readonly(db), db)
    ids = ",".join(map(str, wanted_api_ids(s))) or "NULL"
    out = [("CUDA API calls", "CUPTI_ACTIVITY_KIND_RUNTIME", _RUNTIME.format(ids=ids), False)]
    for label, table in (("syncs", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
                         ("event records", "CUPTI_ACTIVITY_KIND_CUDA_EVENT")):
        if s.has(table):
            out.append((label, table, _RECORDS.format(table=table), False))
    if s.has("NVTX_EVENTS"):
        out.append(("NVTX ranges", "NVTX_EVENTS", _NVTX, False))
    for table, copy in _COPY.items():
        if s.has(table):
            out.append((table.rsplit("_", 1)[1].lower() + "s", table,
                        _GPU.format(table=table, copy=copy), True))
    nccl = ",".join(str(r[0]) for r in s.conn.execute(
        "SELECT id FROM StringIds WHERE value LIKE 'nccl%'"))
    if nccl and "shortName" in s.columns("CUPTI_ACTIVITY_KIND_KERNEL"):
        out.append(("kernels", "CUPTI_ACTIVITY_KIND_KERNEL", _NCCL.format(ids=nccl), False))
    s.close()
    return out


def duckdb_loader(db: Path) -> dict[str, tuple[float, float, int]]:
    """The loader's own queries, each timed as it runs: {table: (wall, cpu, rows)}."""
    from nsysscope.trace import columnar
    load = importlib.import_module("nsysscope.trace.load")
    got: dict[str, tuple[float, float, int]] = {}
    read = columnar.ColumnReader.read

    def timed_read(self: Any, sql: str, kinds: str, params: tuple = ()) -> list[Any]:
        cols, wall, used = timed(lambda: read(self, sql, kinds, params))
        table = next(w for w in sql.replace("(", " ").split() if w.isupper() and "_" in w
                     and w not in ("IFNULL", "NULLIF"))
        # a table read twice (an NCCL trace's kernels: the GPU pass, then the collectives) sums
        w0, c0, n0 = got.get(table, (0.0, 0.0, 0))
        got[table] = (w0 + wall, c0 + used, n0 + (len(cols[0]) if cols else 0))
        return cols

    columnar.ColumnReader.read = timed_read  # type: ignore[method-assign]
    try:
        load.load(db)
    finally:
        columnar.ColumnReader.read = read  # type: ignore[method-assign]
    return got


def to_numpy(table: Any) -> list[np.ndarray]:
    """An Arrow table's columns as numpy arrays, text dictionary-encoded (codes)."""
    import pyarrow as pa
    cols = []
    for col in table.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col = col.dictionary_encode().combine_chunks().indices
        cols.append(col.to_numpy())
    return cols


def per_replay(cols: list[np.ndarray]) -> int:
    """Group a GPU table's graph rows per (process, correlation id) as the loader's
    ``GROUP BY`` does: first start, last end; returns the number of groups."""
    node, corr, pid, start, end = cols[:5]
    graph = node >= 0
    key = ((pid[graph] >> 24) << 32) | corr[graph]
    order = np.argsort(key, kind="stable")
    k = key[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.empty(0, np.int64)
    if len(first):
        np.minimum.reduceat(start[graph][order], first)
        np.maximum.reduceat(end[graph][order], first)
    return len(first) + int((~graph).sum())


def partitions(db: Path, table: str, sql: str, n: int) -> list[str]:
    """``sql`` split into ``n`` ranges of ``table``'s rowids (connectorx runs one per thread)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        last = c.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
    step = last // n + 1
    alias = "n." if " n " in sql else ""
    glue = " AND " if " WHERE " in sql else " WHERE "
    return [f"{sql}{glue}{alias}rowid BETWEEN {i * step} AND {(i + 1) * step - 1}"
            for i in range(n)]


def arrow_readers(db: Path, table: str, sql: str, grouped: bool, cx: Any, adbc: Any,
                  n: int) -> list[float]:
    """Wall and CPU seconds of connectorx (``n`` partitions) and of adbc reading ``sql``."""
    def finish(arrow: Any) -> int:
        cols = to_numpy(arrow)
        return per_replay(cols) if grouped else len(cols[0])

    def via_adbc() -> Any:
        with adbc.connect(str(db)) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table()

    _, cx_wall, cx_cpu = timed(lambda: finish(cx.read_sql(
        f"sqlite://{db}", partitions(db, table, sql, n), return_type="arrow")))
    _, ad_wall, ad_cpu = timed(lambda: finish(via_adbc()))
    return [cx_wall, cx_cpu, ad_wall, ad_cpu]


def main(db: Path) -> None:
    with open(db, "rb") as f:  # the same warm page cache for every reader
        while f.read(1 << 24):
            pass
    n = len(os.sched_getaffinity(0))
    (cx, adbc), imp_wall, _ = timed(lambda: (importlib.import_module("connectorx"),
                                             importlib.import_module("adbc_driver_sqlite.dbapi")))
    print(f"{db.name}, {n} cores; connectorx + adbc + pyarrow import: {imp_wall:.2f} s\n")
    loader = duckdb_loader(db)
    rows = ["| table | rows (loader) | duckdb (loader) s | cpu s | connectorx s | cpu s "
            "| adbc s | cpu s |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    arrow: dict[str, tuple[str, np.ndarray]] = {}  # per table (its queries summed)
    for label, table, sql, grouped in queries(db):
        secs = np.array(arrow_readers(db, table, sql, grouped, cx, adbc, n))
        arrow[table] = (label, arrow[table][1] + secs if table in arrow else secs)
    total = np.zeros(6)
    for table, (label, secs) in arrow.items():
        d_wall, d_cpu, d_rows = loader.get(table, (float("nan"),) * 2 + (0,))
        total += [d_wall, d_cpu, *secs]
        rows.append(f"| {label} | {d_rows:,} | {d_wall:.2f} | {d_cpu:.2f} | "
                    + " | ".join(f"{v:.2f}" for v in secs) + " |")
    rows.append("| **all** | | " + " | ".join(f"**{v:.2f}**" for v in total) + " |")
    print("\n".join(rows))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        main(Path(sys.argv[1]))
    except ImportError as e:
        sys.exit(f"{e.name} is not installed here: make the venv in this file's docstring")
