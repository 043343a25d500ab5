"""Per-launch results as an SQLite database (``report --per-launch FILE.db``).

One database holds any number of traces. Every row carries the ``trace`` it came from, by
the name it was given (the path as given, then, where another trace holds that name, its
``--from/--to`` range or its id), and the trace's ``trace_id`` (:func:`.db_tables.trace_id`:
a hash of its absolute path and the time range read, which is never stored itself). A trace
is its file and range: writing it again replaces its rows, and only its, found by that id in
every table. Tables:

``launches``   the per-launch table (``Analysis.launches``) plus ``pid`` and ``os_tid``
               (``tid`` is nsys's global thread id: pid = (tid >> 24) & 0xFFFFFF, OS tid =
               tid & 0xFFFFFF); indexed on trace, step, klass and pid
``blocks``     every host block (``Analysis.blocks``), with ``pid`` and ``os_tid``
``sites``      the stall sites, most GPU time lost first (``rank`` 1..n); ``source`` as JSON
``summary``    one row per trace: the summary's scalar fields, nested ones (``stalls``,
               ``window_us``...) as JSON; the per-launch ``distributions`` are left out (every
               value is in ``launches``)
``processes``  one row per process that launched graphs (``Analysis.processes``)
``meta``       one row per trace: its path as given, the time range read (``time_range``,
               nanoseconds as JSON; null: the whole trace), nsys version, export schema, GPUs,
               graph trace mode, nsysscope version, analysis config, and the rank its name
               gives

A trace is written whole or not at all: its tables go to a file of their own first (with
sqlite-utils: :func:`write_part`), then into the database in one transaction
(:func:`append_parts`: the old rows of the trace deleted and the new ones copied, by SQL). An
interrupt, a full disk or a killed process leaves the database as it was (sqlite-utils
commits each table, and a 5,000-launch trace interrupted and written again had 10,000 rows).

Column types follow the DataFrames (integers, floats, text; booleans as 0/1). No timestamp is
written: the same traces give the same database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..analysis import Analysis
from ..errors import UnreadableInput
from ..trace.files import sqlite_uri
from ..util.text import displayable

try:
    import fcntl
except ImportError:  # Windows: no turns taken
    fcntl = None  # type: ignore[assignment]
from .db_tables import BATCH, trace_tables

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
TABLES = ("launches", "blocks", "sites", "summary", "processes", "meta")
#: indexes, per table (each column only where the table has it)
INDEXES = {"launches": ("trace", "trace_id", "step", "klass", "pid"),
           "blocks": ("trace_id", "pid"), "sites": ("trace_id",), "summary": ("trace_id",),
           "processes": ("trace_id", "pid"), "meta": ("trace",)}


def is_db_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``--per-launch`` writes a database to ``path`` (by its name)."""
    return str(path).lower().endswith(DB_SUFFIXES)


def check_ours(path: str | os.PathLike[str]) -> None:
    """Refuse (:class:`UnreadableInput`) an existing SQLite database that ``--per-launch``
    did not write, before any analysis: rows added to another program's tables would mix
    with its own (its ``launches`` gained sixty columns), and a view of one of the names
    cannot take rows. An empty database, or a file SQLite cannot read, is the writer's to
    handle."""
    try:
        conn = sqlite3.connect(sqlite_uri(path, "mode=ro"), uri=True)
    except sqlite3.Error:
        return
    try:
        _refuse_foreign(conn, path)
    except sqlite3.Error:  # not an SQLite file: the writer says so
        pass
    finally:
        conn.close()


def _refuse_foreign(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    """:func:`check_ours` on an open connection to ``path``."""
    kinds = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', "
                              "'view') AND name NOT LIKE 'sqlite_%'").fetchall())
    if not kinds:
        return
    meta = {row[1] for row in conn.execute("PRAGMA table_info(meta)")}
    clash = [n for n in TABLES if kinds.get(n, "table") != "table"]
    # trace_id: this writer's; abspath: one before it (its rows are replaced by that)
    if kinds.get("meta") != "table" or "trace" not in meta or \
            not meta & {"trace_id", "abspath"} or clash:
        shown = ", ".join(sorted(kinds)[:5]) + (", ..." if len(kinds) > 5 else "")
        raise UnreadableInput(f"--per-launch {path}: an SQLite database that --per-launch did "
                              f"not write (it holds {shown}); name a new file, or one "
                              "--per-launch wrote")


def write_db(path: str | os.PathLike[str], analysis: Analysis, trace: str | None = None,
             rank: int | None = None) -> None:
    """Add ``analysis`` to the database at ``path`` (created when missing) as trace ``trace``
    (default: the trace's path), replacing that trace's earlier rows: whole or not at all."""
    folder = Path(path).parent
    if not folder.is_dir():
        raise UnreadableInput(f"--per-launch {path}: no such folder '{folder}'")
    try:
        fd, part = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".part", dir=folder)
    except OSError as e:
        raise UnreadableInput(f"--per-launch {path}: cannot write: {e.strerror or e}") from None
    os.close(fd)
    try:
        write_part(part, analysis, trace, rank, shown_as=path)
        append_parts(path, [part])
    finally:
        with contextlib.suppress(OSError):
            os.remove(part)


def write_part(part: str | os.PathLike[str], analysis: Analysis, trace: str | None = None,
               rank: int | None = None, shown_as: str | os.PathLike[str] | None = None) -> None:
    """The tables of ``analysis`` (as trace ``trace``, default its path) into the file
    ``part`` of its own (empty or new), for :func:`append_parts` (a batch worker writes one
    per trace). ``shown_as``: the database an error names."""
    from sqlite_utils import Database

    label = displayable(str(trace if trace is not None else analysis.summary.trace.path))
    try:
        db = Database(sqlite3.connect(part))
        try:
            for name, (columns, rows) in trace_tables(analysis, label, rank):
                db.table(name).create(columns)
                db.table(name).insert_all(rows, batch_size=BATCH, alter=True)
        finally:
            db.conn.close()
    except sqlite3.Error as e:
        raise UnreadableInput(f"--per-launch {shown_as or part}: cannot write: {e}") from None


def append_parts(path: str | os.PathLike[str], parts: Iterable[str | os.PathLike[str]]) -> None:
    """Copy every trace of the databases ``parts`` (written by :func:`write_part`) into the
    database at ``path``, each part in one transaction that first deletes its traces' earlier
    rows (by their id, in every table: rows a crashed older writer left without their meta
    row too). Parts that do not exist (a trace that failed) are skipped."""
    with _open(path) as conn:
        for part in parts:
            if Path(part).is_file():
                _merge(conn, Path(part))


class _open:
    """The database at ``path`` (an SQLite connection that commits only when told), held by
    this writer alone until closed; write failures are one line.

    Runs that add to one database at once (a sweep's parallel jobs) take turns: each reads
    which traces are there, deletes a trace's old rows and inserts the new ones as one step,
    and four runs on a new database keep every trace's rows once."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __enter__(self) -> sqlite3.Connection:
        if not self.path.parent.is_dir():
            raise UnreadableInput(f"--per-launch {self.path}: no such folder "
                                  f"'{self.path.parent}'")
        try:
            self.turn = open(self.path, "ab")  # noqa: SIM115 - closed in __exit__
        except OSError as e:
            raise UnreadableInput(f"--per-launch {self.path}: cannot write: "
                                  f"{e.strerror or e}") from None
        if fcntl is not None:
            # not SQLite's locks (they are fcntl's); a file system without flock (ENOLCK,
            # EOPNOTSUPP) writes as before, one run at a time being the user's care
            with contextlib.suppress(OSError):
                fcntl.flock(self.turn, fcntl.LOCK_EX)
        try:
            self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.conn.execute("PRAGMA user_version")  # an existing non-SQLite file fails here
            _refuse_foreign(self.conn, self.path)  # its turn taken: as it is now
        except UnreadableInput:
            self.conn.close()
            self.turn.close()
            raise
        except sqlite3.Error as e:
            self.turn.close()
            raise UnreadableInput(f"--per-launch {self.path}: cannot write an SQLite database "
                                  f"there ({e})") from None
        return self.conn

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        try:
            self.conn.close()
        finally:
            self.turn.close()  # the next writer's turn
        if isinstance(err, sqlite3.Error):
            raise UnreadableInput(f"--per-launch {self.path}: cannot write: {err}") from None


def _merge(conn: sqlite3.Connection, part: Path) -> None:
    """The traces of ``part`` into the database of ``conn``, in one transaction."""
    conn.execute("ATTACH DATABASE ? AS part", (str(part),))
    try:
        present = {r[0] for r in conn.execute(
            "SELECT name FROM part.sqlite_master WHERE type = 'table'")}
        if "meta" not in present:
            return
        new = conn.execute("SELECT trace, trace_id, path, time_range FROM part.meta").fetchall()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _forget(conn, new)
            labels = _labels(conn, new)
            for name in TABLES:
                if name in present:
                    _copy(conn, name, labels)
            _index(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("DETACH DATABASE part")


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> dict[str, str]:
    """``schema.table``'s columns and their declared types (none: no such table)."""
    return {r[1]: r[2] for r in conn.execute(f'PRAGMA {schema}.table_info("{table}")')}


def _forget(conn: sqlite3.Connection, new: list[tuple[Any, ...]]) -> None:
    """Delete, from every table, the rows of the traces ``new`` (label, id, path as given,
    time range) holds: by their id; in a database an older nsysscope wrote (rows without an
    id), those of the traces its meta gives the same absolute path and range."""
    ids = [r[1] for r in new] or [""]
    legacy: list[str] = []
    meta = _columns(conn, "main", "meta")
    if "abspath" in meta:
        keys = {(displayable(os.path.abspath(r[2])), r[3]) for r in new}
        ranged = "time_range" if "time_range" in meta else "NULL"
        unkeyed = "trace_id IS NULL" if "trace_id" in meta else "1"
        legacy = [t for t, a, rng in conn.execute(
            f"SELECT trace, abspath, {ranged} FROM main.meta WHERE {unkeyed}") if (a, rng) in keys]
    for name in TABLES:
        cols = _columns(conn, "main", name)
        if "trace_id" in cols:
            conn.execute(f'DELETE FROM main."{name}" WHERE trace_id IN '
                         f"({','.join('?' * len(ids))})", ids)
        if legacy and "trace" in cols:
            unkeyed = " AND trace_id IS NULL" if "trace_id" in cols else ""
            conn.execute(f'DELETE FROM main."{name}" WHERE trace IN '
                         f"({','.join('?' * len(legacy))}){unkeyed}", legacy)


def _labels(conn: sqlite3.Connection, new: list[tuple[Any, ...]]) -> dict[str, str]:
    """Each new trace's label, by its id: the name it was given; where another trace holds
    that name, the name and the range it read, else the name and its id."""
    meta = _columns(conn, "main", "meta")
    ident = "trace_id" if "trace_id" in meta else "NULL"
    taken = dict(conn.execute(f"SELECT trace, {ident} FROM main.meta")) if meta else {}
    out: dict[str, str] = {}
    for given, tid, _, span in new:
        tried = [given, *([f"{given} {span}"] if span else [])]
        label = next((t for t in tried if taken.get(t, tid) == tid), f"{given} #{tid[:8]}")
        out[tid], taken[label] = label, tid
    return out


def _copy(conn: sqlite3.Connection, name: str, labels: dict[str, str]) -> None:
    """``part.name``'s rows into ``main.name`` (made, or given the columns it lacks), each
    trace under its label."""
    cols = _columns(conn, "part", name)
    have = _columns(conn, "main", name)
    if not have:
        conn.execute(f'CREATE TABLE main."{name}" ('
                     + ", ".join(f'"{c}" {t}' for c, t in cols.items()) + ")")
    for c, t in cols.items():
        if have and c not in have:
            conn.execute(f'ALTER TABLE main."{name}" ADD COLUMN "{c}" {t}')
    relabel = "CASE trace_id " + "WHEN ? THEN ? " * len(labels) + "ELSE trace END"
    names = ", ".join(f'"{c}"' for c in cols)
    picked = ", ".join(relabel if c == "trace" else f'"{c}"' for c in cols)
    conn.execute(f'INSERT INTO main."{name}" ({names}) SELECT {picked} FROM part."{name}"',
                 [v for pair in labels.items() for v in pair])


def _index(conn: sqlite3.Connection) -> None:
    for name, cols in INDEXES.items():
        have = _columns(conn, "main", name)
        for col in cols:
            if col in have:
                conn.execute(f'CREATE INDEX IF NOT EXISTS "idx_{name}_{col}" '
                             f'ON "{name}" ("{col}")')
