"""Where a time window's rows lie in an export's big tables: a zone map, so that a window is
read by rowid ranges straight from the export (:mod:`.windows`), with no copy of it.

SQLite has no index on an export's times or correlation ids, so a filtered query scans the
whole table. But exports keep their rows roughly in time order (nsys writes each buffer of
events as it fills), so the rows a window reads lie in a few stretches of rowids. One pass
over each table (:func:`zone_map`) records, for every :data:`ZONE_ROWS` rowids, the least and
greatest ``start``, the greatest ``end`` and the least and greatest ``correlationId``; a read
then scans only the zones whose bounds a row of its filter could fall in (:meth:`Zones.runs`):
what Parquet's row-group statistics give, without writing the table again.

A zone is kept whenever one of its rows *may* pass the read's filter, so a read restricted so
returns exactly the rows the whole table's would, in the same (rowid) order
(``tests/trace/test_zones.py``). The pass over the CUDA calls also returns every graph launch
(its start and thread), which is what the windows are cut by.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..apis import process_of
from ..arrays import workers
from ..files import sqlite_uri
from ..stepped import MMAP
from ..time_range import CallRows, TimeRange
from .schema import Schema

#: rows a zone holds (a power of two: a zone is ``rowid >> ZONE_BITS``). 4,096 rows are
#: ~10 K zones in the tp2 10^5 replica's 45.7 M calls, and a window of it (~3 M calls) reads
#: at most two zones more than it needs at each end of each stretch
ZONE_BITS = 12
ZONE_ROWS = 1 << ZONE_BITS
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_MAX = 9223372036854775807  # what a NULL counts as in a least value: never below a bound
_MIN = -_MAX  # and in a greatest one


@dataclass(frozen=True)
class TableZones:
    """Per zone of one table, in rowid order: its first and last rowid, the least and greatest
    ``start``, the greatest ``end``, the least and greatest ``correlationId`` (a column the
    table lacks bounds nothing: its zones may hold any value)."""

    first: np.ndarray
    last: np.ndarray
    start_min: np.ndarray
    start_max: np.ndarray
    end_max: np.ndarray
    corr_min: np.ndarray
    corr_max: np.ndarray

    def may_hold(self, within: TimeRange | CallRows) -> np.ndarray:
        """Which zones may hold a row that ``within``'s SQL condition keeps
        (:meth:`.TimeRange.overlapping`, :meth:`.CallRows.sql`)."""
        keep = np.ones(len(self.first), dtype=bool)
        if isinstance(within, TimeRange):
            if within.end_ns is not None:  # start < end_ns
                keep &= self.start_min < within.end_ns
            if within.start_ns is not None:  # "end" > start_ns OR start > start_ns
                keep &= (self.end_max > within.start_ns) | (self.start_max > within.start_ns)
            return keep
        if within.ranges is None:
            return keep
        if not within.ranges:
            return np.zeros(len(self.first), dtype=bool)
        low, high = min(r[1] for r in within.ranges), max(r[2] for r in within.ranges)
        return keep & (self.corr_min <= high) & (self.corr_max >= low)


@dataclass(frozen=True)
class Zones:
    """The zone maps of an export's big tables (:func:`zone_map`)."""

    tables: dict[str, TableZones]

    def runs(self, table: str, within: TimeRange | CallRows | None) -> \
            list[tuple[int, int]] | None:
        """The stretches of rowids (first, last) of ``table`` that a read filtered by
        ``within`` needs, in order; None: the whole table (no zones for it, or a filter
        that keeps every row)."""
        zones = self.tables.get(table)
        if zones is None or within is None or \
                (isinstance(within, TimeRange) and within.whole) or \
                (isinstance(within, CallRows) and within.ranges is None):
            return None
        keep = zones.may_hold(within)
        if keep.all():
            return None
        at = np.flatnonzero(keep)
        if not len(at):
            return []
        # consecutive zones kept make one stretch
        cut = np.flatnonzero(np.diff(at) > 1) + 1
        firsts, lasts = at[np.r_[0, cut]], at[np.r_[cut - 1, len(at) - 1]]
        return list(zip(zones.first[firsts].tolist(), zones.last[lasts].tolist(), strict=True))


def zone_map(s: Schema, tables: tuple[str, ...], launch_ids: list[int],
             wanted_ids: list[int]) -> tuple[Zones, pd.DataFrame, int]:
    """The zone maps of ``tables`` (those the export has); every graph launch
    (``launch_ids``: the names' string ids) as ``proc, start_ns``; and the rows of the tables
    (of the CUDA calls, only those named by ``wanted_ids``: the calls the loader reads).

    A zone's bounds are one aggregate query over its rowids, which SQLite answers in its
    own loop (a tenth of a microsecond a row): returning every row's values to be folded
    outside cost 3x as much. The zones are aggregated on every core, each thread on a
    connection of its own, while the launches are read (the C reader, in parts)."""
    present = [t for t in tables if s.columns(t)]
    uri = sqlite_uri(s.file, "mode=ro&immutable=1")
    jobs = []
    for t in present:
        last = s.conn.execute(f'SELECT MAX(rowid) FROM "{t}"').fetchone()[0] or 0
        cuts = np.linspace(0, (last >> ZONE_BITS) + 1, 4 * workers() + 1).astype(np.int64)
        jobs += [(t, int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
                 if hi > lo]
    stop = threading.Event()
    with ThreadPoolExecutor(workers(), thread_name_prefix="nsysscope-zones") as pool:
        futures = [pool.submit(_aggregate, uri, _zone_sql(s, t, wanted_ids), lo, hi, stop)
                   for t, lo, hi in jobs]
        try:
            launches = _launches(s, launch_ids) if _RUNTIME in present else \
                pd.DataFrame({"proc": np.empty(0, np.int64), "start_ns": np.empty(0, np.int64)})
            parts = [f.result() for f in futures]
        except BaseException:
            stop.set()  # the threads end at their next zone
            raise
    by_table: dict[str, list[np.ndarray]] = {}
    for (t, _, _), part in zip(jobs, parts, strict=True):
        by_table.setdefault(t, []).append(part)
    zones, rows = {}, 0
    for t, chunks in by_table.items():
        z = np.concatenate(chunks) if chunks else np.empty((0, 8), np.int64)
        zones[t] = TableZones(*(z[:, j] for j in range(7)))
        rows += int(z[:, 7].sum())
    return Zones(zones), launches, rows


def _zone_sql(s: Schema, table: str, wanted_ids: list[int]) -> str:
    """The aggregate of one zone of ``table``: first and last rowid, the bounds of ``start``,
    ``end`` and ``correlationId`` (a NULL never passes a bound; a column the table lacks
    bounds nothing), and its rows (of the CUDA calls, those the loader reads)."""
    cols = s.columns(table)

    def bound(agg: str, col: str, null: int) -> str:
        return f'{agg}(IFNULL("{col}", {null}))' if col in cols else str(-null)

    counted = "COUNT(*)" if table != _RUNTIME else \
        f"IFNULL(SUM(nameId IN ({','.join(map(str, wanted_ids)) or 'NULL'})), 0)"
    return (f"SELECT MIN(rowid), MAX(rowid), {bound('MIN', 'start', _MAX)}, "
            f"{bound('MAX', 'start', _MIN)}, {bound('MAX', 'end', _MIN)}, "
            f"{bound('MIN', 'correlationId', _MAX)}, {bound('MAX', 'correlationId', _MIN)}, "
            f'{counted} FROM "{table}" WHERE rowid BETWEEN ? AND ?')


def _aggregate(uri: str, sql: str, first: int, last: int,
               stop: threading.Event) -> np.ndarray:
    """``sql`` over each zone ``first <= k < last``: one row per zone that holds rows."""
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        conn.execute(MMAP)
        out = []
        for k in range(first, last):
            if stop.is_set():
                break
            row = conn.execute(sql, (k << ZONE_BITS, ((k + 1) << ZONE_BITS) - 1)).fetchone()
            if row[0] is not None:
                out.append(row)
        return np.array(out, dtype=np.int64).reshape(-1, 8)
    finally:
        conn.close()


def _launches(s: Schema, launch_ids: list[int]) -> pd.DataFrame:
    """``proc, start_ns`` of every graph launch, in table order."""
    start, tid = s.read(
        f"SELECT start, IFNULL(globalTid, -1) FROM {_RUNTIME} "
        f"WHERE nameId IN ({','.join(map(str, launch_ids)) or 'NULL'})", "ii", split=_RUNTIME)
    return pd.DataFrame({"proc": process_of(tid), "start_ns": start})
