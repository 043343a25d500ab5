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

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from ..apis import process_of
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
    """The zone maps of ``tables`` (those the export has), each one pass on every core (the C
    reader's read grouped by runs: a zone's rows are adjacent); every graph launch
    (``launch_ids``: the names' string ids) as ``proc, start_ns``; and the rows of the tables
    (of the CUDA calls, only those named by ``wanted_ids``: the calls the loader reads)."""
    got = s.at_once({t: partial(_zones_of, s, t, launch_ids, wanted_ids) for t in tables
                     if s.columns(t)})
    launches = got[_RUNTIME][1] if _RUNTIME in got else None
    if launches is None:
        launches = pd.DataFrame({"proc": np.empty(0, np.int64),
                                 "start_ns": np.empty(0, np.int64)})
    return (Zones({t: z for t, (z, _, _) in got.items()}), launches,
            sum(n for _, _, n in got.values()))


def _zones_of(s: Schema, table: str, launch_ids: list[int],
              wanted_ids: list[int]) -> tuple[TableZones, pd.DataFrame | None, int]:
    """One table's zones, its launches (of the CUDA calls; else None) and rows counted. A
    launch is a group of its own (key ``-1 - rowid``), every other row folds into its
    zone's group (key ``rowid >> ZONE_BITS``)."""
    cols = s.columns(table)
    runtime = table == _RUNTIME

    def bound(col: str, null: int) -> str:
        return f'IFNULL("{col}", {null})' if col in cols else str(-null)

    key = f"rowid >> {ZONE_BITS}"
    tid = "IFNULL(globalTid, -1)" if "globalTid" in cols else "-1"
    counted = "1"
    if runtime:
        launch = ",".join(map(str, launch_ids)) or "NULL"
        key = f"CASE WHEN nameId IN ({launch}) THEN -1 - rowid ELSE {key} END"
        counted = f"nameId IN ({','.join(map(str, wanted_ids)) or 'NULL'})"
    got = s.read(
        f"SELECT {key}, rowid, rowid, {bound('start', _MAX)}, {bound('start', _MIN)}, "
        f"{bound('end', _MIN)}, {bound('correlationId', _MAX)}, "
        f"{bound('correlationId', _MIN)}, {tid}, {counted} FROM {table}",
        "knxnxxnxns", split=table)
    key_, first, last, start_min, start_max, end_max, corr_min, corr_max, tids, n = got
    order = np.argsort(first, kind="stable")  # a read's groups come in rowid order; a
    # GROUP BY's (DuckDB, sqlite3) in any
    key_, first, last, start_min, start_max, end_max, corr_min, corr_max, tids, n = (
        v[order] for v in got)
    launches = None
    if runtime:
        is_launch = key_ < 0
        launches = pd.DataFrame({"proc": process_of(tids[is_launch]),
                                 "start_ns": start_min[is_launch]})
    # the groups of a zone (a part's edge, launches between its rows) fold into one
    zone = first >> ZONE_BITS
    at = np.flatnonzero(np.r_[True, zone[1:] != zone[:-1]]) if len(zone) else \
        np.empty(0, np.int64)

    def fold(v: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        return ufunc.reduceat(v, at) if len(at) else v

    zones = TableZones(
        first=fold(first, np.minimum), last=fold(last, np.maximum),
        start_min=fold(start_min, np.minimum), start_max=fold(start_max, np.maximum),
        end_max=fold(end_max, np.maximum), corr_min=fold(corr_min, np.minimum),
        corr_max=fold(corr_max, np.maximum))
    return zones, launches, int(n.sum())
