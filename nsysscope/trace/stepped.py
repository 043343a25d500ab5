"""A query read by nsysscope's C reader (``stepper.c``), a big table in parts, one
per core.

SQLite runs one statement on one thread. A table named as the query's ``split`` is read in
parts instead: each part's connection first defines a ``TEMP VIEW`` of the same name over a
range of the table's rowids (SQLite looks a name up in the temporary schema first, and
flattens the view into the query, so each part scans only its range), and the parts, run
on a pool of threads, come back in rowid order: the rows of one read of the whole query.

A read grouped by runs (kinds ``k n x s``) may split a group where a part ends; its caller
merges groups anyway (rows of one group need not be adjacent in an export either).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .arrays import workers
from .files import sqlite_uri

try:
    from . import stepper
except ImportError:  # built without a C compiler: the loader reads through DuckDB
    stepper = None  # type: ignore[assignment]

#: a table of fewer rows than this per core is read in fewer parts (a part costs a
#: connection, ~1 ms)
PART_ROWS = 100_000
#: SQLite reads the first 256 MiB of an export through a memory map, saving a read() call
#: per 4 KB page, and the rest with read(): every mapped page counts in the process's
#: resident memory, and mapping all of a 2.2 GB export read 2.2 GB RSS (bench/README.md)
MMAP = f"PRAGMA mmap_size = {256 << 20}"

#: what the C reader raises where the sqlite3 module should read the query instead
REFUSED: tuple[type[Exception], ...] = (TypeError,) if stepper is None else \
    (TypeError, stepper.ReadError)


class ReadStopped(RuntimeError):
    """A read ended by :meth:`SteppedReader.stop`."""


def available() -> bool:
    """Whether the C reader was built (``setup.py``) and is not turned off
    (``NSYSSCOPE_C_READER=0``: read through DuckDB, to compare the two or to go round it)."""
    return stepper is not None and os.environ.get("NSYSSCOPE_C_READER", "").strip() != "0"


class SteppedReader:
    """Reads queries of the export ``db`` with the C reader; ``conn``, an open connection to
    it, finds how many rows a table to split has."""

    def __init__(self, db: Path, conn: sqlite3.Connection) -> None:
        self.uri = sqlite_uri(db, "mode=ro&immutable=1")
        self.conn = conn
        self._lock = threading.Lock()
        self._flags: dict[int, bytearray] = {}  # the cancel flag of each read under way
        self._stopped = False

    def read(self, sql: str, kinds: str, params: tuple[Any, ...] = (),
             split: str | None = None, rows: list[tuple[int, int]] | None = None) -> list[Any]:
        """``sql``'s columns: int64 arrays, and for a ``c`` column (codes, values), codes
        into the distinct texts (-1: NULL). ``split``: a table ``sql`` reads, read in parts;
        ``rows``: the only stretches of its rowids (first, last) to read, a part each
        (:meth:`.nsys.zones.Zones.runs`; None: all of them).

        Reads may run at once on several threads (the loader's tables); :meth:`stop` ends
        them all."""
        assert stepper is not None
        cancel = bytearray(1)
        with self._lock:
            if self._stopped:
                raise ReadStopped("the reads of this export were stopped")
            self._flags[id(cancel)] = cancel
        try:
            futures = [_pool().submit(stepper.read, self.uri, sql, kinds, params,
                                      prelude, cancel) for prelude in self._parts(split, rows)]
            try:
                parts = [f.result() for f in futures]
            except BaseException:  # Ctrl-C, or one part failed: stop the others, then say so
                cancel[0] = 1
                _wait(futures)
                raise
        finally:
            with self._lock:
                del self._flags[id(cancel)]
        done = [p for p in parts if p is not None]  # None: a part cancelled by stop()
        if len(done) < len(parts):
            raise ReadStopped("the reads of this export were stopped")
        return [_joined([p[j] for p in done], kind) for j, kind in enumerate(kinds)]

    def stop(self) -> None:
        """End every read under way (each raises :class:`ReadStopped`), and refuse new ones:
        another thread's read failed, or the user pressed Ctrl-C."""
        with self._lock:
            self._stopped = True
            for flag in self._flags.values():
                flag[0] = 1

    def _parts(self, table: str | None, rows: list[tuple[int, int]] | None = None) -> list[str]:
        """The prelude of each part of a read of ``table`` (every part: one, of the whole;
        with ``rows``, one per stretch of rowids)."""
        if table is not None and rows is not None:
            return [f'{MMAP}; CREATE TEMP VIEW "{table}" AS SELECT rowid AS rowid, * '
                    f'FROM main."{table}" WHERE rowid BETWEEN {lo} AND {hi}'
                    for lo, hi in rows or [(1, 0)]]  # none: a part that reads nothing
        n = workers()
        last = 0
        if table is not None and n > 1:
            last = self.conn.execute(f'SELECT MAX(rowid) FROM "{table}"').fetchone()[0] or 0
        n = max(1, min(n, last // PART_ROWS))
        if n == 1:
            return [MMAP]
        cuts = np.linspace(0, last, n + 1).astype(np.int64)[1:-1].tolist()
        # the first part and the last are open-ended: every rowid falls in one part
        bounds = [f"rowid <= {cuts[0]}"] + \
            [f"rowid > {lo} AND rowid <= {hi}" for lo, hi in itertools.pairwise(cuts)] + \
            [f"rowid > {cuts[-1]}"]
        return [f'{MMAP}; CREATE TEMP VIEW "{table}" AS SELECT rowid AS rowid, * '
                f'FROM main."{table}" WHERE {b}' for b in bounds]


def _joined(parts: list[Any], kind: str) -> Any:
    """One column from its parts: arrays one after the other; texts over the distinct texts
    of every part."""
    if kind != "c":
        arrays = [np.frombuffer(p, dtype=np.int64) for p in parts]
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
    codes = [np.frombuffer(c, dtype=np.int64) for c, _ in parts]
    values = [v for _, v in parts]
    if len(parts) == 1:
        return codes[0], np.array(values[0], dtype=object)
    # each part numbered its texts itself: number them again over all parts
    new, distinct = pd.factorize(np.array([t for v in values for t in v], dtype=object))
    lookup = np.append(new, -1)  # a NULL (-1) points past every part's texts
    offsets = np.cumsum([0] + [len(v) for v in values[:-1]])
    joined = np.concatenate([lookup[np.where(c >= 0, c + o, len(new))]
                             for c, o in zip(codes, offsets, strict=True)])
    return joined, np.asarray(distinct, dtype=object)


def _wait(futures: list[Future[Any]]) -> None:
    """Wait for every part to end, whatever it raised."""
    for f in futures:
        with contextlib.suppress(BaseException):  # the first error is the one reported
            f.result()


_lock = threading.Lock()
_executor: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """The threads parts run on, one per core (made again in a forked child, which has none
    of its parent's threads)."""
    global _executor
    with _lock:
        if _executor is None or _executor[0] != os.getpid():
            _executor = (os.getpid(), ThreadPoolExecutor(workers(),
                                                         thread_name_prefix="nsysscope-read"))
        return _executor[1]
