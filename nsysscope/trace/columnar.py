"""Columns of an nsys export straight into numpy, scanned by DuckDB in C++ on every core.

Python's ``sqlite3`` module builds a Python object per value (~0.35 us each): at 10^5 graph
launches that alone is several times SQLite's own scan. DuckDB's SQLite scanner reads the
same file with SQLite's C library, splits each table over worker threads, aggregates
(``GROUP BY``) in parallel hash tables and hands whole columns to numpy
(``bench/README.md`` has the numbers).

One SQL text serves both engines (it is written in the dialect they share), so the
``sqlite3`` path is the same query, not a second implementation. It is taken for the few
exports DuckDB refuses: a damaged file or a value that is not what its column declares
(DuckDB stops; ``sqlite3`` reads what it can and the loader reports the damage in its own
words), or text that is not valid UTF-8 (a range named with arbitrary bytes, which
``sqlite3`` decodes with replacement characters); and where DuckDB or its SQLite extension
is not installed.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import read, workers

#: DuckDB derives an extension's entry point from its file name
_EXTENSION = "sqlite_scanner.duckdb_extension"


class ColumnReader:
    """Runs the loader's SQL over one export; :meth:`read` returns one array per column."""

    def __init__(self, db: Path, fallback: sqlite3.Connection) -> None:
        self.db, self.fallback = Path(db), fallback
        self._duck: Any = None
        self._tried = False
        #: queries DuckDB refused, answered by sqlite3 instead
        self.fallbacks = 0

    def read(self, sql: str, kinds: str, params: tuple = ()) -> list[np.ndarray]:
        """The columns of ``sql``'s result: ``i`` int64 (no NULLs: use IFNULL), ``o`` Python
        objects (text)."""
        duck = self._connection()
        if duck is not None:
            import duckdb

            try:
                # a relation converts to numpy as it runs; execute() would first materialise
                # the whole result (twice the time for a million-row table)
                got = duck.sql(sql, params=list(params) or None).fetchnumpy()
            # damage DuckDB refuses: sqlite3 reads (or reports) it below. Past the first
            # batch, DuckDB's errors reach Python as RuntimeError (a malformed page) or as a
            # SystemError around a UnicodeDecodeError (text that is not UTF-8)
            except (duckdb.Error, RuntimeError, UnicodeError, SystemError):
                self.fallbacks += 1
            else:
                return [_column(v, k) for v, k in zip(got.values(), kinds, strict=True)]
        return read(self.fallback, sql, kinds, params)

    def close(self) -> None:
        if self._duck is not None:
            self._duck.close()
            self._duck = None

    def _connection(self) -> Any:
        """DuckDB with the export attached read-only as the default schema, or None."""
        if not self._tried:
            self._tried = True
            self._duck = _attach(self.db)
        return self._duck


def _attach(db: Path) -> Any:
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
    })
    try:
        # the package ships it as sqlite.duckdb_extension: load it under the name DuckDB expects
        with tempfile.TemporaryDirectory(prefix="nsysscope-duckdb-") as tmp:
            link = Path(tmp) / _EXTENSION
            os.symlink(ext, link)
            con.execute(f"LOAD '{_sql_text(link)}'")
        con.execute(f"ATTACH '{_sql_text(db.resolve())}' AS trace (TYPE sqlite, READ_ONLY)")
        con.execute("USE trace")
    except (duckdb.Error, OSError):  # OSError: no symbolic links on this file system
        con.close()
        return None
    return con


def _sql_text(path: Path) -> str:
    return str(path).replace("'", "''")


def _column(values: Any, kind: str) -> np.ndarray:
    if kind == "i":
        return np.asarray(values, dtype=np.int64)
    return np.asarray(values, dtype=object)
