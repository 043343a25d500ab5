"""Columns of an nsys export straight into numpy, without a Python object per value.

Python's ``sqlite3`` module builds a Python object per value (~0.35 us each): at 10^5 graph
launches that alone is several times SQLite's own scan. Two readers avoid it, tried in turn:

* nsysscope's C reader (:mod:`.stepped`), where it was built: SQLite steps the query, on a
  connection without SQLite's per-call locking, straight into int64 buffers, a big table in
  parts on every core. Its filters run in SQLite (only the CUDA calls asked for come out).
* DuckDB's SQLite scanner, which splits each table over worker threads and hands whole
  columns to numpy; it converts every row of a table before a filter runs. It also reads the
  Parquet copy a long trace is read in windows from (:mod:`.windows`).

(``bench/README.md`` has the numbers.) One SQL text serves every engine (it is written in
the dialect they share), so the ``sqlite3`` path is the same query, not a second
implementation. It is taken for the few exports the fast readers refuse: a damaged file or a
value that is not what its column declares (they stop; ``sqlite3`` reads what it can and the
loader reports the damage in its own words), or, for DuckDB, text that is not valid UTF-8 (a
range named with arbitrary bytes, which ``sqlite3`` decodes with replacement characters);
and where neither is installed.

A text column (NVTX range names: a few thousand names over millions of ranges) comes back
as a categorical: the C reader numbers the distinct texts as it reads; DuckDB wraps the same
query in a ``GROUP BY`` of the text with a list per other column; ``sqlite3`` factorises
what it read. A read *grouped by runs* (kinds ``k n x s``, :meth:`ColumnReader.read`) folds
rows with equal keys into one: the C reader folds adjacent rows as it steps, the others run
the query under a ``GROUP BY``.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .arrays import read, workers
from .stepped import REFUSED, SteppedReader, available

#: DuckDB derives an extension's entry point from its file name
_EXTENSION = "sqlite_scanner.duckdb_extension"
#: how a read grouped by runs folds each kind of column (``k``: a key of the group)
_FOLD = {"k": "{}", "n": "MIN({})", "x": "MAX({})", "s": "SUM({})"}


class ColumnReader:
    """Runs the loader's SQL over one export; :meth:`read` returns one array per column.

    ``duck``: a DuckDB connection to run it on instead (the time windows' copy of the export,
    :mod:`.windows`, whose owner closes it)."""

    def __init__(self, db: Path, fallback: sqlite3.Connection, duck: Any = None) -> None:
        self.db, self.fallback = Path(db), fallback
        self._duck: Any = duck
        self._tried = self._shared = duck is not None
        self._stepped = SteppedReader(self.db, fallback) if available() and duck is None \
            else None
        #: queries the fast readers refused, answered by sqlite3 instead
        self.fallbacks = 0

    def read(self, sql: str, kinds: str, params: tuple[Any, ...] = (),
             split: str | None = None, rows: list[tuple[int, int]] | None = None) -> list[Any]:
        """The columns of ``sql``'s result: ``i`` int64 (no NULLs: use IFNULL), ``c`` text as a
        :class:`pandas.Categorical` (at most one such column).

        Or a read grouped by runs, every column one of ``k`` (a key), ``n`` (the smallest
        value), ``x`` (the largest) or ``s`` (the sum): rows with equal keys fold into one,
        but a group may come back as several rows (the C reader folds only adjacent rows);
        the caller folds those again.

        ``split``: the table ``sql`` reads its rows from (a big one), which the C reader may
        read in parts on every core; it must be named once, as itself or with an alias.
        ``rows``: the stretches of its rowids that hold every row ``sql`` keeps (a time
        window's, :mod:`.nsys.zones`), all the C reader reads; the other readers read the table
        (a read of the whole table gives the same rows, only slower)."""
        if self._stepped is not None:
            try:
                got = self._stepped.read(sql, kinds, params, split, rows)
            except REFUSED:
                self.fallbacks += 1
            else:
                return [_categorical(*v) if k == "c" else v
                        for v, k in zip(got, kinds, strict=True)]
        if set(kinds) & set(_FOLD):
            sql, kinds = grouped_sql(sql, kinds), "i" * len(kinds)
        duck = self._connection()
        if duck is not None:
            import duckdb

            try:
                got = _grouped(duck, sql, kinds, params) if "c" in kinds else \
                    [_int(v) for v in _fetch(duck, sql, params)]
            # damage DuckDB refuses: sqlite3 reads (or reports) it below. Past the first
            # batch, DuckDB's errors reach Python as RuntimeError (a malformed page), or as a
            # SystemError around a UnicodeDecodeError (text that is not UTF-8; a TypeError
            # where that text is a list's group key)
            except (duckdb.Error, RuntimeError, UnicodeError, SystemError, TypeError) as e:
                if interrupted(e):  # Ctrl-C during the query: not damage to read around
                    raise KeyboardInterrupt from None
                self.fallbacks += 1
            else:
                return got
        cols: list[Any] = read(self.fallback, sql, kinds.replace("c", "o"), params)
        return [_categorical(*pd.factorize(v)) if k == "c" else v
                for v, k in zip(cols, kinds, strict=True)]

    @property
    def filters_first(self) -> bool:
        """Whether a query's filter runs before its rows are converted (the C reader's and
        sqlite3's run in SQLite, DuckDB's over the windows' Parquet copy in its scan), so
        that two filtered passes over a big table cost about one. DuckDB's SQLite scanner
        converts every selected column of every row first: there one pass that returns every
        row is cheaper than two that each return some (the full 10^5 replica's GPU tables:
        14.5 -> 8.1 s)."""
        return self._stepped is not None or self._shared or self._connection() is None

    @property
    def concurrent(self) -> bool:
        """Whether reads may run at once on several threads (the C reader's do; a DuckDB
        connection runs one query at a time)."""
        return self._stepped is not None

    def stop(self) -> None:
        """End the C reader's reads under way (:meth:`.stepped.SteppedReader.stop`)."""
        if self._stepped is not None:
            self._stepped.stop()

    def close(self) -> None:
        if self._duck is not None and not self._shared:
            self._duck.close()
        self._duck = None

    def _connection(self) -> Any:
        """DuckDB with the export attached read-only as the default schema, or None."""
        if not self._tried:
            self._tried = True
            self._duck = attach(self.db)
        return self._duck


def grouped_sql(sql: str, kinds: str) -> str:
    """``sql``, a read grouped by runs (``kinds``: :meth:`ColumnReader.read`), as one SQL
    ``GROUP BY`` of its keys."""
    names = [f"c{j}" for j in range(len(kinds))]
    folded = ", ".join(_FOLD[k].format(c) for c, k in zip(names, kinds, strict=True))
    keys = ", ".join(c for c, k in zip(names, kinds, strict=True) if k == "k")
    return f"WITH q({', '.join(names)}) AS ({sql}) SELECT {folded} FROM q GROUP BY {keys}"


def interrupted(e: BaseException) -> bool:
    """Whether DuckDB stopped because the user pressed Ctrl-C (it reports that as an
    error, past the first batch as a RuntimeError saying so)."""
    import duckdb
    return isinstance(e, duckdb.InterruptException) or "interrupted" in str(e).lower()


def attach(db: Path) -> Any:
    """A DuckDB connection with the export ``db`` attached read-only as ``trace`` (and in
    use), or None where DuckDB or its SQLite extension is not installed."""
    try:
        import duckdb
        import duckdb_extension_sqlite
    except ImportError:
        return None
    ext = Path(duckdb_extension_sqlite.__file__).parent / "extensions" / \
        f"v{duckdb.__version__}" / "sqlite.duckdb_extension"
    if not ext.is_file():
        return None
    con = duckdb.connect(config={
        "threads": workers(),
        # never fetch or install anything: the extension comes from the Python package
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        # it is trusted as the installed duckdb package itself is; checking its signature
        # (hashing 34 MB) would cost 0.1 s of every run's start
        "allow_unsigned_extensions": True,
        "enable_external_file_cache": False,
    })
    try:
        # the package ships it as sqlite.duckdb_extension: load it under the name DuckDB expects
        with tempfile.TemporaryDirectory(prefix="nsysscope-duckdb-") as tmp:
            link = Path(tmp) / _EXTENSION
            os.symlink(ext, link)
            con.execute(f"LOAD '{sql_text(link)}'")
        con.execute(f"ATTACH '{sql_text(db.resolve())}' AS trace (TYPE sqlite, READ_ONLY)")
        con.execute("USE trace")
    except (duckdb.Error, OSError):  # OSError: no symbolic links on this file system
        con.close()
        return None
    return con


def sql_text(path: Path) -> str:
    """``path`` as the text of an SQL string literal (quotes doubled)."""
    return str(path).replace("'", "''")


def _fetch(duck: Any, sql: str, params: tuple[Any, ...]) -> list[Any]:
    # a relation converts to numpy as it runs; execute() would first materialise the whole
    # result (twice the time for a million-row table)
    return list(duck.sql(sql, params=list(params) or None).fetchnumpy().values())


def _grouped(duck: Any, sql: str, kinds: str, params: tuple[Any, ...]) -> list[Any]:
    """``sql``'s columns, its text column grouped: one list per column and distinct text,
    concatenated (rows come back grouped by text, not in ``sql``'s order)."""
    names = [f"c{j}" for j in range(len(kinds))]
    key = names[kinds.index("c")]
    lists = ", ".join(f"list({c})" for c, k in zip(names, kinds, strict=True) if k != "c")
    values, *groups = _fetch(duck, f"SELECT {key}, {lists} FROM ({sql}) q({', '.join(names)}) "
                                   f"GROUP BY {key}", params)
    sizes = np.fromiter((len(g) for g in groups[0]), np.int64, len(values)) if groups else \
        np.zeros(len(values), np.int64)
    if any(np.ma.is_masked(part) for g in groups for part in g):  # a NULL in a list, as _int
        raise TypeError("NULL where an integer is expected")
    ints = iter([_int(np.concatenate(g)) if len(g) else np.empty(0, np.int64)
                 for g in groups])
    text = _categorical(np.repeat(np.arange(len(values)), sizes), values)
    return [text if k == "c" else next(ints) for k in kinds]


def _int(values: Any) -> np.ndarray:
    """Integers as int64. A NULL (DuckDB masks it) where the query expects an integer is a
    damaged row: TypeError, so that sqlite3 reads the query again and reports the damage as it
    does (``np.asarray`` would make the NULL a 0, and the analysis would run on it)."""
    if np.ma.is_masked(values):
        raise TypeError("NULL where an integer is expected")
    return np.asarray(values, dtype=np.int64)


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """Text as a categorical of the ``values`` the ``codes`` point into (a NULL: missing),
    with its categories sorted, so either engine gives the same one."""
    masked = np.ma.getmaskarray(values)  # DuckDB masks a NULL
    values = np.array(np.ma.getdata(values), dtype=object)
    values[masked] = None
    known = np.array([v is not None for v in values], dtype=bool)
    order = np.argsort(values[known].astype(str), kind="stable")
    rank = np.full(len(values) + 1, -1, dtype=np.int64)  # code -1 (missing) stays -1
    rank[np.flatnonzero(known)[order]] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], categories=pd.Index(
        values[known][order].tolist()))
