"""SQL results as numpy arrays and DataFrames, without a Python object per value.

Cursors are drained in chunks straight into numpy arrays (one column at a time), so memory
stays at the final arrays plus one chunk.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # schema.py reads through this module
    from .nsys.schema import Schema

#: rows fetched from a cursor at a time
CHUNK = 1 << 16


def workers() -> int:
    """Threads for the SQL aggregation: ``$NSYSSCOPE_THREADS``, else the CPU count (max 8)."""
    env = os.environ.get("NSYSSCOPE_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(8, cpu_count()))


def processes() -> int:
    """Processes for work split by time (a long trace's windows): ``$NSYSSCOPE_THREADS``,
    else the CPU count (no cap: each process reads and works on its own window)."""
    env = os.environ.get("NSYSSCOPE_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return cpu_count()


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read(conn: sqlite3.Connection, sql: str, kinds: str,
         params: tuple[Any, ...] = ()) -> list[np.ndarray]:
    """The columns of ``sql``'s result as arrays: ``i`` int64 (no NULLs: use IFNULL), ``o``
    Python objects."""
    cur = conn.execute(sql, params)
    parts: list[list[np.ndarray]] = [[] for _ in kinds]
    while True:
        rows = cur.fetchmany(CHUNK)
        if not rows:
            break
        n = len(rows)
        for j, (kind, col) in enumerate(zip(kinds, zip(*rows, strict=True), strict=True)):
            parts[j].append(np.fromiter(col, np.int64, n) if kind == "i"
                            else np.array(col, dtype=object))
    return [np.concatenate(p) if len(p) > 1 else p[0] if p else
            np.empty(0, np.int64 if k == "i" else object)
            for p, k in zip(parts, kinds, strict=True)]


def frame(columns: list[str], arrays: list[np.ndarray]) -> pd.DataFrame:
    """The arrays as columns, as they are: not copied into one 2-D block (a fresh copy of a
    million-row table costs more in page faults than any later column access saves)."""
    return pd.DataFrame(dict(zip(columns, arrays, strict=True)), copy=False)


def in_order(arrays: list[Any], order: np.ndarray) -> list[Any]:
    """``a[order]`` of each array, or the arrays themselves where ``order`` keeps every row
    in place: exports store their rows by start, so a sort by start mostly finds them sorted,
    and taking each column again would copy a table for nothing."""
    if not len(order) or (order[1:] > order[:-1]).all() and order[0] == 0:
        return list(arrays)
    return [a[order] for a in arrays]


def query(s: Schema, sql: str, columns: list[str],
          dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    rows = s.conn.execute(sql).fetchall()
    df = pd.DataFrame.from_records(rows, columns=columns)
    if dtypes:
        df = df.astype({c: t for c, t in dtypes.items() if c in df.columns})
    return df


INT = "int64"
