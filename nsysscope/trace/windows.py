"""A long trace read one time window at a time, so that its analysis holds one window's
events at once, not all of them (:func:`nsysscope.analysis.pipeline.analyze_windows`).

Windows are cut between graph launches, every :func:`launches_per_window` of them: about
:data:`WINDOW_ROWS` rows of the event tables' worth, whatever a launch brings (~39,000
launches of the sample engine, ~6,800 of a two-rank server's). A window owns
the launches whose call starts in it, and reads a little more on each side
(:data:`MARGIN_LAUNCHES` launches of every process): a launch is judged from the events around
it (its replay, the host block after it, the NVTX ranges around that), and these margins hold
them, so the launches of consecutive windows put together are the whole trace's, to the
nanosecond (``tests/analysis/test_windows.py``).

SQLite has no index on an export's times, so N windows read with the loader's filters would
scan each table N times. Exports keep their rows roughly in time order, though, so a window's
rows lie in a few stretches of rowids. Where the C reader is built, one pass over each table
(on every core) maps them (:mod:`.nsys.zones`: per 4,096 rowids, the bounds of the times and
correlation ids), and each window runs the loader's own SQL (:func:`.load.read_trace`) on
only the stretches that may hold its rows, straight from the export: the windows then need no
copy and no order, and are read and analysed in processes of their own, one per core
(:meth:`TraceWindows.each`). Without the C reader, the columns the loader reads are copied
once into Parquet files in a temporary folder (DuckDB, on every core) and each window runs
the SQL on views of them, in the table's order: Parquet keeps the smallest and largest value
of every column per group of rows, so DuckDB skips the groups a window's time range or
correlation ids cannot match; those windows are analysed one after the other.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ..util.forks import can_fork, imap_forked
from ..util.progress import note, progress
from ..util.text import clipped
from . import stepped
from .apis import LAUNCH_APIS, process_of
from .arrays import processes as cpu_processes
from .columnar import attach, interrupted, sql_text
from .formats import json_kind
from .normalised import Trace
from .nsys.damage import damage_reported
from .nsys.read import read_trace
from .nsys.schema import Schema, connect_readonly
from .nsys.sources import read_resolved, resolve
from .nsys.tables import collectives_table, wanted_api_ids
from .nsys.zones import Zones, zone_map
from .time_range import TimeRange

R = TypeVar("R")

#: launches a window owns at most (one window's analysis holds ~6 KB per launch of the light
#: replica, ~51 rows of the copied tables a launch: bench/README.md)
WINDOW_LAUNCHES = 50_000
#: rows of the copied tables a window owns about: a two-rank tensor-parallel server copies
#: ~295 a launch (NCCL's calls, events and syncs), and 50,000 of its launches a window held
#: 2.6 GB (0.74 GB so, with the next window read meanwhile); the light replicas' ~51 a launch
#: make windows of ~39,000 launches (as fast as 50,000 at 10^6: bench/README.md)
WINDOW_ROWS = 2_000_000
#: launches of every process a window reads before and after its own: a launch's wait comes
#: up to two steps after it, and a step is one launch (the one-graph samples need 1 before
#: and 3 after) or, with piecewise CUDA graphs, one per piece (24 in the samples, ~33 for a
#: 32-layer model in vLLM): tests/analysis/test_windows.py
MARGIN_LAUNCHES = 100
#: a trace with more CUDA calls than this is read in windows (~3 * 10^5 graph launches of a
#: single-process engine; an export of fewer fits in ~2 GB read whole)
WINDOWED_CALLS = 8_000_000

_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
#: the event tables the loader reads with :meth:`.Schema.read`
_COPIED = (_RUNTIME, "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
           "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
           "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
#: the columns of those the loader reads (a column missing here is found by the windows
#: test: DuckDB refuses the query, and sqlite3 answers it, slowly, from the export)
_COLUMNS = frozenset({
    "start", "end", "globalTid", "globalPid", "correlationId", "nameId", "returnValue",
    "eventType", "text", "textId", "streamId", "deviceId", "graphNodeId", "shortName",
    "demangledName", "copyKind", "srcKind", "dstKind", "bytes", "eventSyncId"})


@dataclass(frozen=True)
class Window:
    """Owns the launches whose call starts in ``[start_ns, end_ns)`` (None: open-ended);
    reads ``read``."""

    start_ns: int | None
    end_ns: int | None
    read: TimeRange

    def owns(self, t: np.ndarray) -> np.ndarray:
        """Whether each time ``t`` falls in this window's own span."""
        inside = np.ones(len(t), dtype=bool)
        if self.start_ns is not None:
            inside &= t >= self.start_ns
        if self.end_ns is not None:
            inside &= t < self.end_ns
        return inside


def launches_per_window(launches: int, rows: int) -> int:
    """How many launches a window owns in a trace of ``launches`` graph launches and ``rows``
    rows in the copied tables: :data:`WINDOW_ROWS` rows' worth, at most
    :data:`WINDOW_LAUNCHES`, but not fewer than ten times the margin a window reads on each
    side (fewer would read mostly margin)."""
    fit = int(WINDOW_ROWS * launches / rows) if rows > 0 else WINDOW_LAUNCHES
    return min(WINDOW_LAUNCHES, max(10 * MARGIN_LAUNCHES, fit))


def plan_windows(launches: pd.DataFrame, per_window: int = WINDOW_LAUNCHES,
                 margin: int = MARGIN_LAUNCHES) -> list[Window]:
    """The windows of a trace whose graph launches are ``launches`` (``proc, start_ns``):
    every ``per_window`` launches, the last one at least half that."""
    starts = np.sort(launches["start_ns"].to_numpy())
    cuts = starts[np.arange(per_window, len(starts) - per_window // 2, per_window)]
    edges = [None, *cuts.tolist(), None]
    own = [np.sort(p.to_numpy()) for _, p in launches.groupby("proc")["start_ns"]]
    return [Window(start, end, TimeRange(_margin(own, start, margin, -1),
                                         _margin(own, end, margin, +1)))
            for start, end in zip(edges[:-1], edges[1:], strict=True)]


def _margin(own: list[np.ndarray], t: int | None, n: int, side: int) -> int | None:
    """Where a window reads from (``side`` -1: the earliest start of each process's ``n``-th
    launch before ``t``) or to (+1: just past the latest start of each process's ``n``-th
    launch after the one at or after ``t``); None: one process has fewer, or ``t`` is open.

    Only processes that launch on both sides of ``t`` count: one that ended, or has not
    started, has nothing to do with the launches around ``t``, and would make every window
    read back (or on) to its end."""
    if t is None:
        return None
    found = []
    for starts in own:
        at = int(np.searchsorted(starts, t))
        if at in (0, len(starts)):
            continue
        i = at - n if side < 0 else at + n
        if not 0 <= i < len(starts):
            return None
        found.append(int(starts[i]))
    if not found:
        return None
    return min(found) if side < 0 else max(found) + 1


class TraceWindows:
    """An nsys export ready for reading in :class:`Window`\\ s (a context manager). Where the
    C reader is built (``duck`` None) a window is read straight from the export, by the
    stretches of rowids its zone map says hold its rows (:mod:`.nsys.zones`); else the columns the
    loader reads are copied to Parquet (deleted on exit) and DuckDB reads each window from
    the copy. :meth:`traces` yields each window's :class:`Trace`, :meth:`each` a function of
    each, in processes of their own; ``per_window``: the launches a window owns (None:
    :func:`launches_per_window`)."""

    def __init__(self, path: str | Path, db: Path, duck: Any,
                 per_window: int | None = None, margin: int = MARGIN_LAUNCHES) -> None:
        self.path, self.db, self._duck = Path(path), db, duck
        self._dir: Path | None = None
        self.zones: Zones | None = None
        #: where the next window is read while the caller analyses one (:meth:`traces`)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="nsysscope-window")
        self._ahead: Future[Trace] | None = None
        self._schema = Schema(connect_readonly(db), self.path, duck=duck)
        self._fallbacks = 0
        self._reading: Schema | None = None  # a window's, while it is read (:meth:`read`)
        try:
            with damage_reported(path):
                self._wanted = wanted_api_ids(self._schema)  # the CUDA calls the loader reads
                if duck is None:
                    launch_ids = [i for i, n in self._wanted.items() if n in LAUNCH_APIS]
                    with progress(f"mapping {self.path.name} to read it in windows"):
                        self.zones, launches, self.rows = zone_map(
                            self._schema, _COPIED, launch_ids, list(self._wanted))
                else:
                    self._dir = Path(tempfile.mkdtemp(prefix="nsysscope-windows-"))
                    #: rows copied, of all the tables
                    self.rows = self._copy()
                    launches = self._launches()
                self.windows = plan_windows(
                    launches, per_window or launches_per_window(len(launches), self.rows),
                    margin)
        except BaseException:
            self.close()
            raise

    def traces(self) -> Iterator[tuple[Trace, Window]]:
        """Each window's trace. The next window is read (on threads of its own) while the
        caller analyses this one, so two windows are in memory at most (the light 10^6
        replica, side by side: 101 -> 93 s and 0.52 -> 0.64 GB). Past the last one the
        export is closed (and the copy, with DuckDB's caches, ~140 MB at 10^6 launches, and
        the temporary folder, gone) before the windows' rows are joined."""
        n = len(self.windows)
        with progress(f"analysing {self.path.name} in {n} windows", total=n) as bar:
            ahead = self._ahead = self._reader.submit(self.read, self.windows[0])
            for i, w in enumerate(self.windows):
                trace = ahead.result()
                if i + 1 < n:
                    ahead = self._ahead = self._reader.submit(self.read, self.windows[i + 1])
                yield trace, w
                del trace  # (the caller's is gone by now too)
                bar.advance()
        self.close()

    def each(self, fn: Callable[[Trace, Window, bool], R],
             processes: int | None = None) -> Generator[R, None, None]:
        """``fn(trace, window, first)`` of each window, in order. Read from the export
        (:attr:`zones`), each window is read and ``fn`` run in a process forked from this one,
        ``processes`` (default: one per CPU, :func:`.arrays.processes`) at once, so that the
        reads and the work of a long trace take every core; from the copy, one window after
        the other here (:meth:`traces`). The export is closed past the last window."""
        n = processes or cpu_processes()
        if self.zones is None or n < 2 or len(self.windows) < 2 or not can_fork():
            for i, (trace, w) in enumerate(self.traces()):
                yield fn(trace, w, i == 0)
            return
        first = self.windows[0]
        with progress(f"analysing {self.path.name} in {len(self.windows)} windows, "
                      f"{min(n, len(self.windows))} at once", total=len(self.windows)) as bar:
            for got in imap_forked(lambda w: fn(self.read(w), w, w is first), self.windows,
                                   n):
                yield got
                bar.advance()
        self.close()

    def read(self, w: Window) -> Trace:
        """Window ``w``'s trace (on a connection of its own: the windows a process forked
        from this one reads too)."""
        if self.zones is None:
            with damage_reported(self.path):
                return read_trace(self._schema, self.path, self.db, w.read)
        s = self._reading = Schema(connect_readonly(self.db), self.path, zones=self.zones)
        try:
            with damage_reported(self.path):
                return read_trace(s, self.path, self.db, w.read)
        finally:
            self._reading = None
            self._fallbacks += s.fallbacks
            s.close()

    def collectives(self) -> pd.DataFrame:
        """Every NCCL kernel of the whole trace (:func:`.tables.collectives_table`): which
        ranks wait for each other is decided once, not in each window."""
        with damage_reported(self.path):
            return collectives_table(self._schema)

    @property
    def fallbacks(self) -> int:
        """Window queries the fast reader refused and sqlite3 answered from the export (0:
        the copy, or the C reader, read every column the loader reads), of the windows read
        in this process."""
        return self._schema.fallbacks if self.zones is None else self._fallbacks

    def close(self) -> None:
        """End the read ahead, if any (an analysis stopped or failed), close the export and
        DuckDB, and delete the copy (again: nothing to do)."""
        while self._ahead is not None and not self._ahead.done():
            if self._duck is not None:
                self._duck.interrupt()  # the query under way; the read may be between two
            elif (reading := self._reading) is not None:
                reading.stop()
            wait([self._ahead], timeout=0.05)
        self._ahead = None
        self._reader.shutdown()
        self._schema.close()
        if self._duck is not None:
            self._duck.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> TraceWindows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _copy(self) -> int:
        """The columns the loader reads of each event table (of the CUDA calls, only the
        calls it reads), to Parquet in the table's order; a view of each in its place. The
        rows copied, of all tables."""
        d = self._duck
        d.execute("SET preserve_insertion_order = false")  # each core writes as it reads
        assert self._dir is not None  # made before the copy starts
        compression = copy_compression(self.db, self._dir)
        views: list[str] = []
        rows = 0
        with progress(f"copying {self.path.name} to read it in windows",
                      total=len(_COPIED)) as bar:
            for table in _COPIED:
                sql, copied = self._copy_table(table, compression)
                views += sql
                rows += copied
                bar.advance()
        d.execute("SET preserve_insertion_order = true")
        d.execute("USE memory")
        for view in views:
            d.execute(view)
        d.execute("SET search_path = 'memory.main,trace.main'")  # the rest: from the export
        return rows

    def _copy_table(self, table: str, compression: str) -> tuple[list[str], int]:
        """Copy ``table`` (:meth:`_copy`), ``compression`` its Parquet codec; the SQL of its
        view, if it has anything to copy, and the rows copied."""
        cols = sorted(self._schema.columns(table) & _COLUMNS)
        if not cols:
            return [], 0
        where = ""
        if table == _RUNTIME:
            where = f" WHERE nameId IN ({','.join(map(str, self._wanted))})"
        assert self._dir is not None
        out = sql_text(self._dir / f"{table}.parquet")
        listed = ", ".join(f'"{c}"' for c in cols)
        copied = self._duck.execute(
            f"COPY (SELECT rowid AS rowid, {listed} FROM trace.main.{table}{where}) TO '{out}' "
            f"(FORMAT parquet, COMPRESSION {compression})").fetchone()
        # in the table's order again (ties keep it): each window sorts only what it reads
        return ([f"CREATE VIEW memory.main.{table} AS SELECT * FROM read_parquet('{out}') "
                 "ORDER BY rowid"], int(copied[0]) if copied else 0)

    def _launches(self) -> pd.DataFrame:
        """``proc, start_ns`` of every graph launch."""
        ids = [i for i, n in self._wanted.items() if n in LAUNCH_APIS]
        start, tid = self._schema.read(
            f"SELECT start, IFNULL(globalTid, -1) FROM {_RUNTIME} "
            f"WHERE nameId IN ({','.join(map(str, ids)) or 'NULL'})", "ii", split=_RUNTIME)
        return pd.DataFrame({"proc": process_of(tid), "start_ns": start})


def copy_compression(db: Path, folder: Path) -> str:
    """How the windows' copy of ``db`` in ``folder`` is compressed: not at all where the
    folder's disk has room for it (~40 % of the export; the light 10^6 replica's copy and
    window reads took 20 + 14 s so, 25 + 18 s with zstd), else zstd (~10 %)."""
    room = shutil.disk_usage(folder).free
    return "uncompressed" if room > db.stat().st_size else "zstd"


def in_windows(path: str | Path, nsys: str | None = None, per_window: int | None = None,
               calls: int | None = None) -> TraceWindows | None:
    """``path`` ready to read in windows of ``per_window`` launches (default
    :func:`launches_per_window`) when it holds more than ``calls`` CUDA calls (default
    :data:`WINDOWED_CALLS`), else None: read it whole with :func:`.load.load`, which also
    says what is wrong with a file that cannot be read (nothing is reported here)."""
    if not is_long(path, nsys, calls):
        return None
    return read_resolved(path, nsys, lambda db: _windows_of(path, db, per_window))


def is_long(path: str | Path, nsys: str | None = None, calls: int | None = None) -> bool:
    """Whether ``path`` is an nsys export of more than ``calls`` CUDA calls (default
    :data:`WINDOWED_CALLS`): one :func:`in_windows` reads in windows. False for a file that
    cannot be read (:func:`.load.load` says what is wrong with it)."""
    calls = WINDOWED_CALLS if calls is None else calls
    if json_kind(path) is not None:
        return False
    try:
        db = resolve(path, nsys=nsys)
        conn = connect_readonly(db)
        try:
            rows = conn.execute(f"SELECT MAX(rowid) FROM {_RUNTIME}").fetchone()[0]
        finally:
            conn.close()
    except (sqlite3.Error, OSError, UnicodeDecodeError):  # a damaged schema text is not UTF-8
        return False
    return bool(rows) and rows > calls


def _windows_of(path: str | Path, db: Path, per_window: int | None) -> TraceWindows | None:
    """The export ``db`` of ``path`` ready for reading in windows: mapped (the C reader), or
    copied (DuckDB); or None: read it whole."""
    if stepped.available():
        return TraceWindows(path, db, None, per_window)
    duck = attach(db)
    if duck is None:
        return None
    import duckdb

    try:
        return TraceWindows(path, db, duck, per_window)
    except (duckdb.Error, OSError) as e:  # no room for the copy, say: read it whole
        if interrupted(e):  # Ctrl-C while copying: stop, as everywhere else
            raise KeyboardInterrupt from None
        note(f"reading {Path(path).name} whole: its copy for reading in windows failed "
             f"({clipped(str(e), 160)})")
        return None
