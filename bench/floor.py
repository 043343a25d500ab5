#!/usr/bin/env python3
"""The floor: merely read the columns nsysscope needs from an nsys SQLite export into numpy.

Every row of every table the analysis reads, only the needed columns, no filtering, grouping
or sorting in SQL: ``SELECT cols FROM table`` through the ``sqlite3`` module, the cursor
drained in chunks of 65,536 rows, each chunk turned into one numpy array per column (int64,
or object for text). That is the cheapest way the ``sqlite3`` module gets the data into
numpy. The arrays of each chunk are dropped once counted, so the floor's memory stays flat
(keeping them all would take ~11 GB at 10^6 launches); holding them would only add time.

    python bench/floor.py TRACE.sqlite      # prints: rows=... values=... seconds=...
"""

from __future__ import annotations

import sqlite3
import sys
import time

#: table -> the columns nsysscope reads from it (``text`` columns become object arrays)
NEEDED = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId"],
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "graphNodeId"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "graphNodeId", "copyKind", "srcKind", "dstKind", "bytes"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "graphNodeId", "bytes"],
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ["correlationId", "eventSyncId", "streamId"],
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": ["correlationId", "eventSyncId", "streamId"],
    "NVTX_EVENTS": ["start", "end", "globalTid", "eventType", "textId", "text"],
    "StringIds": ["id", "value"],
}
TEXT = {"text", "value"}
CHUNK = 1 << 16


def needed_tables(conn: sqlite3.Connection):
    """``(table, columns)`` for each ``NEEDED`` table the export has, with the columns it has
    (scan.py walks the same ones)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, cols in NEEDED.items():
        if table in tables:
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            yield table, [c for c in cols if c in have]


def read_floor(db: str) -> dict:
    """Read the ``NEEDED`` columns of ``db`` into numpy chunk by chunk; rows, values, seconds.

    numpy is imported here, so that ``scan.py`` can take ``needed_tables`` without paying for
    it."""
    import numpy as np

    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    rows = values = 0
    t0 = time.perf_counter()
    for table, cols in needed_tables(conn):
        sql = "SELECT " + ", ".join(c if c in TEXT else f"IFNULL({c}, -1)" for c in cols) + \
              f" FROM {table}"
        cur = conn.execute(sql)
        while True:
            chunk = cur.fetchmany(CHUNK)
            if not chunk:
                break
            n = len(chunk)
            for c, col in zip(cols, zip(*chunk, strict=True), strict=True):
                arr = np.array(col, dtype=object) if c in TEXT else np.fromiter(col, np.int64, n)
                values += arr.size
            rows += n
    conn.close()
    return dict(rows=rows, values=values, seconds=round(time.perf_counter() - t0, 2))


if __name__ == "__main__":
    info = read_floor(sys.argv[1])
    print(" ".join(f"{k}={v}" for k, v in info.items()))
