"""The export's schema (``sqlite_master``) as a place secrets hide: a trigger holding a
database URL with its password, a view holding an e-mail address, a table, column or index
named after the user (issue 52: the scrub rewrote every cell and left these, and ``--check``
called the copy clean).

nsys writes tables and, in some versions, indexes; never views or triggers. So a view or a
trigger goes, whatever it holds (it is not the trace's, and its SQL is text no cell scan
sees). A table, column or index whose name leaks (a user or host name, a path, a secret) is
renamed as a cell would be rewritten (an index is dropped: it only made lookups faster); a
table whose own SQL holds a secret past its names (a ``DEFAULT``, a ``CHECK``, a declared
type) is rebuilt from its rows, with plain column types.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

from .context import quoted, table_columns
from .policy import DELETE, Finding, redact_name
from .secrets import redact_secrets

#: where a schema finding is (``Finding.table``), and what a table with a leaky SQL becomes
MASTER = "sqlite_master"
REBUILD = object()
#: ``rewrite(text, kinds)``: the text with its leaks replaced, appending what it found
Rewrite = Callable[[str, list[tuple[str, str]]], str]


def scan_schema(conn: sqlite3.Connection, rewrite: Rewrite,
                skip: frozenset[str] = frozenset()) -> Iterator[Finding]:
    """Every view and trigger (they go), and every table, column and index whose name
    ``rewrite`` changes (renamed; an index dropped); a table whose SQL holds a secret past
    its names (rebuilt). ``skip``: tables left alone (nsysscope's own)."""
    rows = conn.execute("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master "
                        "WHERE name NOT LIKE 'sqlite_%'").fetchall()
    for kind, name, table, sql in rows:
        if table in skip:
            continue
        if kind in ("view", "trigger"):
            kinds = [("schema", f"{kind} {redact_name(name)}")]
            rewrite(sql, kinds)  # what it held, said too
            yield Finding(MASTER, kind, 0, name, kinds, DELETE, sql)
            continue
        kinds = []
        new = rewrite(name, kinds)
        if new != name:
            yield Finding(MASTER, kind, 0, name, kinds, DELETE if kind == "index" else new, name)
        if kind == "table":
            yield from _scan_table(conn, name, sql, rewrite)


def _scan_table(conn: sqlite3.Connection, table: str, sql: str,
                rewrite: Rewrite) -> Iterator[Finding]:
    columns = [c for c, _ in table_columns(conn, table)]
    for col in columns:
        kinds: list[tuple[str, str]] = []
        new = rewrite(col, kinds)
        if new != col:
            yield Finding(MASTER, "column", 0, f"{table}.{col}", kinds, new, col)
    rest = sql
    for name in sorted([table, *columns], key=len, reverse=True):
        rest = rest.replace(name, "")
    found = redact_secrets(rest)[1]
    if found:
        yield Finding(MASTER, "table", 0, table,
                      [("schema", f"table {redact_name(table)}: SQL"), *found], REBUILD, sql)


def apply_schema(conn: sqlite3.Connection, findings: list[Finding]) -> int:
    """Make the schema changes of ``findings`` (:func:`scan_schema`) inside the caller's
    transaction: views, triggers and leaky indexes dropped, tables rebuilt, columns and
    tables renamed. Returns how many objects changed."""
    order = {"trigger": 0, "view": 1, "index": 2, "table": 3, "column": 4}
    done = 0
    for f in sorted(findings, key=lambda f: (order[f.column], f.new is not REBUILD)):
        name = str(f.key)
        if f.new is DELETE:
            conn.execute(f"DROP {f.column.upper()} IF EXISTS {quoted(name)}")
        elif f.new is REBUILD:
            tmp = quoted(f"{name}.rebuilt")
            conn.execute(f"CREATE TABLE {tmp} AS SELECT * FROM {quoted(name)}")
            conn.execute(f"DROP TABLE {quoted(name)}")
            conn.execute(f"ALTER TABLE {tmp} RENAME TO {quoted(name)}")
        elif f.column == "column":  # key: TABLE.COLUMN (the table's old name: renamed below)
            col = str(f.old)
            conn.execute(f"ALTER TABLE {quoted(name[:-len(col) - 1])} RENAME COLUMN "
                         f"{quoted(col)} TO {quoted(str(f.new))}")
        else:
            continue  # tables are renamed last, below
        done += 1
    for f in findings:
        if f.column == "table" and isinstance(f.new, str):
            conn.execute(f"ALTER TABLE {quoted(str(f.key))} RENAME TO {quoted(f.new)}")
            done += 1
    return done
