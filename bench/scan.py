#!/usr/bin/env python3
"""SQLite's own scan: SQLite, in C, reading every needed value of an nsys export once.

The yardstick of issue 14 ("report within 3x SQLite's own C-level scan"): for every table
and column that nsysscope reads (``NEEDED`` in ``floor.py``) one aggregate query on one
connection, single-threaded, that touches every value of every row and returns one row::

    SELECT count(*), total(start), total("end"), ..., total(length(text)) FROM table

``total()`` (a float sum) cannot overflow on int64 times as ``sum()`` does, and
``length()`` makes SQLite read each text value. No Python object is made per row, so this
is what the columns cost to read before any analysis: less than any Python reader can do.

    python bench/scan.py TRACE.sqlite       # prints: rows=... values=... seconds=...
"""

from __future__ import annotations

import sqlite3
import sys
import time

from floor import TEXT, needed_tables


def scan_sql(table: str, cols: list[str]) -> str:
    """The aggregate query that reads every value of ``cols`` in ``table`` once."""
    terms = ["count(*)"] + [f'total(length("{c}"))' if c in TEXT else f'total("{c}")'
                            for c in cols]
    return f'SELECT {", ".join(terms)} FROM "{table}"'


def scan(db: str) -> dict:
    """Run the scan over ``db``: rows and values read, and the seconds it took."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    rows = values = 0
    t0 = time.perf_counter()
    for table, cols in needed_tables(conn):
        n = conn.execute(scan_sql(table, cols)).fetchone()[0]
        rows += n
        values += n * len(cols)
    conn.close()
    return dict(rows=rows, values=values, seconds=round(time.perf_counter() - t0, 2))


if __name__ == "__main__":
    info = scan(sys.argv[1])
    print(" ".join(f"{k}={v}" for k, v in info.items()))
