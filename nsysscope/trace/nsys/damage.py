"""Damage met while reading an export, said in one line: SQLite finds a damaged page only
when a query reaches it, so every read of an export runs inside :func:`damage_reported`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import DamagedExport, NotAnNsysExport
from ...util.text import clipped


@contextmanager
def damage_reported(path: str | Path) -> Iterator[None]:
    """Damage found while reading the export ``path``, said in one line
    (:class:`DamagedExport`)."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        raise DamagedExport(f"{path}: truncated or corrupt export ({e})") from None
    except UnicodeDecodeError as e:  # a damaged page of the schema or of a table's text
        raise DamagedExport(f"{path}: corrupt export: text that is not UTF-8 "
                            f"({clipped(str(e))})") from None
    except (ValueError, TypeError, OverflowError) as e:  # a damaged row: NULL, text or a blob
        # where nsys writes integers (tests/test_fuzz.py): in the export, not in a damaged copy
        raise NotAnNsysExport(f"{path}: corrupt export: a value of the wrong type in a table "
                              f"({type(e).__name__}: {clipped(str(e))})") from None
