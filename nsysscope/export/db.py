"""Per-launch results as an SQLite database (``report --per-launch FILE.db``), with sqlite-utils.

One database holds any number of traces; every row carries the ``trace`` it came from: the
path as given, its absolute path where another file's rows already carry that name (two
folders' ``rank0.sqlite``), and the time range read after it (``--from/--to``). A trace is
its file and range: writing it again replaces its rows, and only its. Tables:

``launches``   the per-launch table (``Analysis.launches``) plus ``pid`` and ``os_tid``
               (``tid`` is nsys's global thread id: pid = (tid >> 24) & 0xFFFFFF, OS tid =
               tid & 0xFFFFFF); indexed on trace, step, klass and pid
``blocks``     every host block (``Analysis.blocks``), with ``pid`` and ``os_tid``
``sites``      the stall sites, most GPU time lost first (``rank`` 1..n); ``source`` as JSON
``summary``    one row per trace: the summary's scalar fields, nested ones (``stalls``,
               ``window_us``...) as JSON; the per-launch ``distributions`` are left out (every
               value is in ``launches``)
``processes``  one row per process that launched graphs (``Analysis.processes``)
``meta``       one row per trace: path, absolute path, the time range read (``time_range``,
               nanoseconds as JSON; null: the whole trace), nsys version, export schema, GPUs,
               graph trace mode, nsysscope version, analysis config, and the rank its name
               gives

Column types follow the DataFrames (integers, floats, text; booleans as 0/1). No timestamp is
written: the same traces give the same database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import sqlite3
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..errors import UnreadableInput
from ..model import StallSite
from ..model.schema import to_plain
from ..trace.files import sqlite_uri
from ..util.text import displayable
from ..util.version import __version__

try:
    import fcntl
except ImportError:  # Windows: no turns taken
    fcntl = None  # type: ignore[assignment]
from .per_launch import kinds_named, os_ids, per_launch_parts

if TYPE_CHECKING:  # imported where used: `nsysscope report` without a .db never loads it
    from sqlite_utils import Database

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
TABLES = ("launches", "blocks", "sites", "summary", "processes", "meta")
#: indexes, per table (each column only where the table has it)
INDEXES = {"launches": ("trace", "step", "klass", "pid"), "blocks": ("trace", "pid"),
           "sites": ("trace",), "summary": ("trace",), "processes": ("trace", "pid"),
           "meta": ("trace",)}
_BATCH = 2000


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
    if kinds.get("meta") != "table" or not {"trace", "abspath"} <= meta or clash:
        shown = ", ".join(sorted(kinds)[:5]) + (", ..." if len(kinds) > 5 else "")
        raise UnreadableInput(f"--per-launch {path}: an SQLite database that --per-launch did "
                              f"not write (it holds {shown}); name a new file, or one "
                              "--per-launch wrote")


def write_db(path: str | os.PathLike[str], analysis: Analysis, trace: str | None = None,
             rank: int | None = None) -> None:
    """Add ``analysis`` to the database at ``path`` (created when missing) as trace ``trace``
    (default: the trace's path), replacing that trace's earlier rows."""
    t = analysis.summary.trace
    given = displayable(str(trace if trace is not None else t.path))
    key = (_abspath(t.path), _range(t.time_range_ns))
    with _open(path) as db:
        label = _labels(db, {given: key})[given]
        tables = dict(_trace_tables(analysis, label, rank))
        with db.conn:
            _forget(db, [key])
            for name, (columns, rows) in tables.items():
                _insert(db, name, columns, rows)
        _index(db)


def append_parts(path: str | os.PathLike[str], parts: Iterable[str | os.PathLike[str]]) -> None:
    """Copy every trace of the databases ``parts`` (written by :func:`write_db`, one per
    worker) into the database at ``path``, replacing those traces' earlier rows. Parts that
    do not exist (a trace that failed) are skipped."""
    with _open(path) as db:
        for part in parts:
            if not Path(part).is_file():
                continue
            from sqlite_utils import Database

            src = Database(sqlite3.connect(part))
            try:
                meta = list(src["meta"].rows) if src["meta"].exists() else []
                keys = {m["trace"]: (m["abspath"], m.get("time_range")) for m in meta}
                labels = _labels(db, keys)
                with db.conn:
                    _forget(db, list(keys.values()))
                    for name in TABLES:
                        if src[name].exists():
                            _insert(db, name, src[name].columns_dict,
                                    _relabelled(src[name].rows, labels))
            finally:
                src.conn.close()
        _index(db)


class _open:
    """The database at ``path`` as a sqlite-utils ``Database``, held by this writer alone
    until closed; write failures are one line.

    Runs that add to one database at once (a sweep's parallel jobs) take turns: each reads
    which traces are there, deletes a trace's old rows and inserts the new ones as one step.
    SQLite's own locking could not make it one (sqlite-utils commits each table it fills), and
    four runs on a new database kept every trace's rows four times over."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __enter__(self) -> Database:
        if not self.path.parent.is_dir():
            raise UnreadableInput(f"--per-launch {self.path}: no such folder "
                                  f"'{self.path.parent}'")
        from sqlite_utils import Database

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
            self.db = Database(sqlite3.connect(self.path, timeout=60))
            self.db.execute("PRAGMA user_version")  # an existing non-SQLite file fails here
            _refuse_foreign(self.db.conn, self.path)  # its turn taken: as it is now
        except UnreadableInput:
            self.db.conn.close()
            self.turn.close()
            raise
        except sqlite3.Error as e:
            self.turn.close()
            raise UnreadableInput(f"--per-launch {self.path}: cannot write an SQLite database "
                                  f"there ({e})") from None
        return self.db

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        try:
            self.db.conn.close()
        finally:
            self.turn.close()  # the next writer's turn
        if isinstance(err, sqlite3.Error):
            raise UnreadableInput(f"--per-launch {self.path}: cannot write: {err}") from None


def _abspath(path: str) -> str:
    return displayable(os.path.abspath(path))


def _range(span: Any) -> str | None:
    """A time range read (``TraceInfo.time_range_ns``) as the database keeps it: JSON, or
    None for the whole trace."""
    return json.dumps(list(span)) if span else None


def _known(db: Database) -> dict[str, tuple[str, str | None]]:
    """The traces already in the database: label -> (absolute path, time range)."""
    if not db["meta"].exists():
        return {}
    ranged = "time_range" in db["meta"].columns_dict
    sql = f"SELECT trace, abspath, {'time_range' if ranged else 'NULL'} FROM meta"
    return {r[0]: (r[1], r[2]) for r in db.execute(sql)}


def _labels(db: Database, keys: dict[str, tuple[str, str | None]]) -> dict[str, str]:
    """Each new trace's label (by the label it was given): its own, unless rows of another
    file or range carry it already: then its absolute path, and its range."""
    known = _known(db)
    return {label: label if known.get(label, key) == key else
            key[0] + (f" {key[1]}" if key[1] else "") for label, key in keys.items()}


def _relabelled(rows: Iterable[dict[str, Any]], labels: dict[str, str]) -> Iterator[dict[str, Any]]:
    for row in rows:
        if "trace" in row and labels.get(row["trace"], row["trace"]) != row["trace"]:
            row = {**row, "trace": labels[row["trace"]]}
        yield row


def _forget(db: Database, keys: list[tuple[str, str | None]]) -> None:
    """Delete the rows of the traces that are one of ``keys`` (absolute path, time range)."""
    wanted = set(keys)
    old = {label for label, key in _known(db).items() if key in wanted}
    if not old:
        return
    marks = ",".join("?" * len(old))
    for name in TABLES:
        table = db.table(name)
        if table.exists() and "trace" in table.columns_dict:
            table.delete_where(f"trace IN ({marks})", sorted(old))


def _insert(db: Database, name: str, columns: dict[str, type],
            rows: Iterable[dict[str, Any]]) -> None:
    table = db.table(name)
    if not table.exists():
        table.create(columns)
    table.insert_all(rows, batch_size=_BATCH, alter=True)


def _index(db: Database) -> None:
    for name, cols in INDEXES.items():
        table = db.table(name)
        if table.exists():
            have = table.columns_dict
            for col in cols:
                if col in have:
                    table.create_index([col], if_not_exists=True)


# --------------------------------------------------------------------------------------------
# an analysis as tables: {name: (columns, rows)}

Table = tuple[dict[str, type], Iterator[dict[str, Any]]]


def _trace_tables(a: Analysis, label: str, rank: int | None) -> Iterator[tuple[str, Table]]:
    s = a.summary
    yield "launches", _frames(per_launch_parts(a), label)
    yield "blocks", _frames((kinds_named(_with_pids(b))
                             for b in a.block_table.chunks(a.block_table.columns)), label)
    yield "sites", _records([{"trace": label, "rank": i + 1,
                              **{k: _plain(v) for k, v in to_plain(site).items()}}
                             for i, site in enumerate(s.sites)], _SITE_TYPES)
    yield "summary", _records([_summary_row(a, label, rank)], {"trace": str, "rank": int})
    yield "processes", _frame(a.processes, label)
    t = s.trace
    yield "meta", _records([{
        "trace": label, "path": displayable(t.path), "abspath": _abspath(t.path),
        "time_range": _range(t.time_range_ns), "rank": rank,
        "nsys_version": t.nsys_version, "schema_version": t.schema_version,
        "gpus": json.dumps(list(t.gpus)), "graph_trace": t.graph_trace,
        "nsysscope_version": __version__, "config": json.dumps(a.config.to_dict()),
        "launches": s.launches}],
        {"trace": str, "path": str, "abspath": str, "time_range": str, "rank": int,
         "nsys_version": str,
         "schema_version": str, "gpus": str, "graph_trace": str, "nsysscope_version": str,
         "config": str, "launches": int})


def _summary_row(a: Analysis, label: str, rank: int | None) -> dict[str, Any]:
    d = a.summary.to_dict(with_distributions=False)
    row: dict[str, Any] = {"trace": label, "rank": rank}
    for k, v in d.items():
        if k in ("trace", "distributions", "sites"):
            continue
        row[k] = json.dumps(v) if isinstance(v, (dict, list, tuple)) else v
    row["sites"] = len(a.summary.sites)
    return row


def _with_pids(df: pd.DataFrame) -> pd.DataFrame:
    if "tid" in df.columns and "pid" not in df.columns:
        pid, os_tid = os_ids(df["tid"])
        df = df.assign(pid=pid, os_tid=os_tid)
    return df


def _frame(df: pd.DataFrame, label: str) -> Table:
    """``df`` (its ``_``-prefixed helper columns left out) as typed columns and rows, with
    ``trace`` first."""
    return _frames(iter([df]), label)


def _frames(parts: Iterator[pd.DataFrame], label: str) -> Table:
    """The ``parts`` of a table (a long trace's time windows, read one at a time) as
    :func:`_frame` gives one, the columns typed by the first part."""
    first = next(parts, None)
    if first is None:
        return {"trace": str}, iter([])
    first = first[[c for c in first.columns if not str(c).startswith("_")]]
    columns: dict[str, type] = {"trace": str}
    columns.update({str(c): _sql_type(first[c]) for c in first.columns})

    def rows() -> Iterator[dict[str, Any]]:
        for df in itertools.chain([first], parts):
            df = df[list(first.columns)]
            for start in range(0, len(df), _BATCH):
                chunk = df.iloc[start:start + _BATCH]
                plain = chunk.astype(object).where(chunk.notna(), None)
                for rec in plain.to_dict("records"):
                    yield {"trace": label, **{str(k): _plain(v) for k, v in rec.items()}}

    return columns, rows()


def _records(rows: list[dict[str, Any]], types: dict[str, type] | None = None) -> Table:
    """Rows of plain values; ``types`` fixes the types (and the columns of an empty table)."""
    columns: dict[str, type] = dict(types or {})
    for r in rows:
        for k, v in r.items():
            if k not in columns and v is not None:
                columns[k] = _value_type(v)
    return columns, iter(rows)


def _site_types() -> dict[str, type]:
    """The sites table's columns, from :class:`StallSite`'s fields (a nested one as JSON
    text), so that a trace without stalls, or whose sites leave a value out, still makes
    each column with its type (a first site without a projected gain made
    ``speedup_if_fixed`` a TEXT column, and later traces' numbers text)."""
    hints = typing.get_type_hints(StallSite)
    types: dict[str, type] = {"trace": str, "rank": int}
    for f in dataclasses.fields(StallSite):
        if f.name == "extra":
            continue
        kind = next((t for t in typing.get_args(hints[f.name]) if t is not type(None)),
                    hints[f.name])
        types[f.name] = kind if kind in (int, float, str) else str
    return types


_SITE_TYPES = _site_types()


def _value_type(v: Any) -> type:
    if isinstance(v, bool | int):
        return int
    if isinstance(v, float):
        return float
    return str


def _sql_type(s: pd.Series) -> type:
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype):
        return int
    if pd.api.types.is_float_dtype(s.dtype):
        return float
    kind = pd.api.types.infer_dtype(s, skipna=True)
    if kind in ("integer", "boolean"):
        return int
    if kind in ("floating", "mixed-integer-float", "decimal"):
        return float
    return str


def _plain(v: Any) -> Any:
    """A cell as SQLite stores it: numpy scalars to Python, containers to JSON."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return v
