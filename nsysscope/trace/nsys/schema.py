"""What an nsys export looks like from the inside, whatever its version.

Exports differ between nsys versions: columns come and go (``PRAGMA table_info``), tables
exist only when non-empty, enum values live in ``ENUM_*`` tables, API names carry version
suffixes (``cudaGraphLaunch_v10000``) and NVTX text is either inline (``text``) or interned
(``textId``). This module answers those questions for one open connection.

Schema 2.x (nsys 2021.x-2022.x) is read as 3.x is: its metadata table is ``EXPORT_META_DATA``
(:data:`META_TABLES`), and its CUDA_EVENT has no ``eventSyncId`` (no sync-to-event records:
timing); where its tables lack ``globalPid`` or there is no ``PROCESSES``, the readers key by
thread ids (:mod:`.tables`, :mod:`.gpu_work`), as for any export without them. An export with
no metadata table at all (``TARGET_INFO_CUDA_GPU``: nsys 2021.1 or older) is refused with
what it is and how to export it again (:func:`unversioned_export`).
"""

from __future__ import annotations

import re
import sqlite3
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import DamagedExport, NotAnNsysExport, UnreadableInput
from ...util.text import name_text
from ..columnar import ColumnReader
from ..files import SQLITE_MAGIC, sqlite_uri
from ..names import sql_name
from ..stepped import ReadStopped

if TYPE_CHECKING:  # zones.py reads through this module
    from ..time_range import CallRows, TimeRange
    from .zones import Zones

#: export schemas nsysscope was tested on: nsys 2023.4.4 and 2025.3.2 (our captures), and
#: public exports of nsys 2022.1.1 and 2022.2.1 (2.9.1) and 2026.2.1 (3.25.0)
#: (tests/test_external_traces.py)
TESTED_SCHEMAS = ("2.9.1", "3.7.2", "3.20.3", "3.25.0")
SUPPORTED_MAJORS = ("2", "3")
#: the table of an export's versions (EXPORT_SCHEMA_VERSION, EXPORT_PRODUCT_VERSION): its name
#: since schema 3.x, then in schema 2.x (the public 2.9.1 exports of nsys 2022.1 and 2022.2)
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
#: tables only nsys writes, in an export with no metadata table
_NSYS_TABLES = frozenset({"TARGET_INFO_CUDA_GPU", "CUPTI_ACTIVITY_KIND_RUNTIME",
                          "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "ThreadNames"})
#: the GPU table of nsys 2021.1 and older (TARGET_INFO_GPU since; Extra-P's public test exports
#: of 2021 have it and no metadata table)
_OLD_GPU_TABLE = "TARGET_INFO_CUDA_GPU"

_GPU = frozenset({"start", "end", "streamId", "deviceId", "correlationId"})
#: the columns nsysscope reads from each table without a fallback (a table it reads
#: optional columns of, such as ``eventSyncId`` or ``returnValue``, may lack those)
REQUIRED_COLUMNS: dict[str, frozenset[str]] = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": frozenset({"start", "end", "nameId", "globalTid",
                                               "correlationId"}),
    "CUPTI_ACTIVITY_KIND_KERNEL": _GPU,
    "CUPTI_ACTIVITY_KIND_MEMCPY": _GPU | {"copyKind", "bytes"},
    "CUPTI_ACTIVITY_KIND_MEMSET": _GPU | {"bytes"},
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": frozenset({"correlationId", "streamId"}),
    # eventSyncId since schema 3.x (2.9.1 has eventId only: the event, not the record)
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": frozenset({"correlationId", "streamId"}),
    "NVTX_EVENTS": frozenset({"start", "end", "eventType", "globalTid"}),
    "StringIds": frozenset({"id", "value"}),
}

T = TypeVar("T")

_API_SUFFIX = re.compile(r"(_v\d+)+$|_ptsz$|_ptds$")


def api_base_name(name: str) -> str:
    """``cudaGraphLaunch_v10000`` -> ``cudaGraphLaunch``; ``cudaMemcpyAsync_ptsz`` ->
    ``cudaMemcpyAsync``."""
    previous = None
    while previous != name:
        previous, name = name, _API_SUFFIX.sub("", name)
    return name


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export read-only and immutable: nsysscope never writes to a trace.

    The path goes as a percent-encoded URI (:func:`.files.sqlite_uri`). Text that is not valid
    UTF-8 (a thread named with arbitrary bytes) is decoded with replacement characters instead
    of failing the whole trace."""
    uri = sqlite_uri(path, "mode=ro&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as e:
        raise UnreadableInput(f"{path}: cannot open as SQLite ({e})") from None
    # names are whatever bytes the program gave its threads and ranges: never fail on them
    conn.text_factory = _decode_text
    return conn


def _decode_text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def truncation(db: Path) -> str | None:
    """Why the SQLite file ``db`` is cut short, from its 100-byte header, or None.

    The header records the page size and, when valid (its change counter matches
    ``version-valid-for``), the number of pages: a copy cut short (an interrupted download
    or ``scp``, a full disk) is smaller than that."""
    try:
        size = db.stat().st_size
        with db.open("rb") as f:
            header = f.read(100)
    except OSError:
        return None
    if len(header) < 100:
        return f"only {size} bytes, shorter than an SQLite header"
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change, pages = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    if pages and change == valid_for and page_size >= 512 and pages * page_size > size:
        return f"{size} of {pages * page_size} bytes"
    return None


def is_whole(db: Path) -> bool:
    """Whether ``db`` is an SQLite file as long as its header says: what a cache entry or an
    export nsysscope wrote must be to be used again. One cut short (a full disk, a crash) or
    overwritten is made again, not blamed on the trace it came from."""
    try:
        with db.open("rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
    except OSError:
        return False
    return magic == SQLITE_MAGIC and truncation(db) is None


def unversioned_export(tables: frozenset[str]) -> str | None:
    """What an SQLite file with these ``tables`` and no metadata table is, when nsys wrote it,
    and how to make one nsysscope reads; None when nsys did not write it."""
    if "StringIds" not in tables or not _NSYS_TABLES & tables:
        return None
    what = (f"an export of nsys 2021.1 or older ({_OLD_GPU_TABLE}, and no metadata table)"
            if _OLD_GPU_TABLE in tables else
            f"an nsys export without its metadata table ({' or '.join(META_TABLES)})")
    return (f"{what}: nsysscope cannot tell its schema; export its report again with nsys "
            "2022.1 or newer: nsys export --type sqlite REPORT.nsys-rep (or .qdrep)")


class Schema:
    """Tables, columns, enums and version of one export."""

    def __init__(self, conn: sqlite3.Connection, path: Path, duck: Any = None,
                 zones: Zones | None = None) -> None:
        """``duck``: the DuckDB connection :meth:`read` runs on (default: its own);
        ``zones``: where the rows of a time window lie in the big tables (:mod:`.zones`),
        for reads of one."""
        self.conn, self.path, self._duck, self.zones = conn, path, duck, zones
        cut = truncation(self._file())
        if cut:
            raise NotAnNsysExport(f"{path}: truncated export ({cut}); copy or export it again")
        try:
            rows = conn.execute("SELECT name, type FROM sqlite_master "
                                "WHERE type IN ('table', 'view')").fetchall()
        except sqlite3.DatabaseError as e:
            raise DamagedExport(f"{path}: not a readable nsys export ({e})") from None
        self.tables = frozenset(name for name, kind in rows if kind == "table")
        # nsys writes tables, never views: a view under a name the loader reads read as
        # "0 CUDA calls" (issue 52)
        views = sorted(name for name, kind in rows if kind == "view" and
                       (name in REQUIRED_COLUMNS or name in _NSYS_TABLES or name in META_TABLES))
        if views:
            what = "is a view" if len(views) == 1 else "are views"
            raise NotAnNsysExport(f"{path}: {', '.join(views)} {what}, not a table as nsys "
                                  "writes it: an export edited after nsys wrote it; export "
                                  "the report again")
        self.meta_table = next((t for t in META_TABLES if t in self.tables), None)
        if self.meta_table is None:
            if {"launches", "meta"} <= self.tables:  # formats.is_results_db
                raise NotAnNsysExport(
                    f"{path}: nsysscope's per-launch database (report --per-launch), not a "
                    "trace: query it with sqlite3, or report the traces it came from")
            old = unversioned_export(self.tables)
            if old:
                raise NotAnNsysExport(f"{path}: {old}")
            raise NotAnNsysExport(
                f"{path}: SQLite, but not an nsys export (no {' or '.join(META_TABLES)} "
                "table); make one with: nsys export --type sqlite REPORT.nsys-rep")
        self._check_version()
        self._check_columns()

    def _check_columns(self) -> None:
        """A table nsysscope reads that lacks a column it reads without a fallback is a schema
        it does not know: said here, by name (a missing ``"end"`` read as the text 'end', which
        SQLite takes an unknown quoted name for, and was reported as a value of the wrong
        type)."""
        for table, needed in REQUIRED_COLUMNS.items():
            if table in self.tables:
                missing = sorted(needed - self.columns(table))
                if missing:
                    raise NotAnNsysExport(
                        f"{self.path}: {table} has no column {', '.join(missing)}: an export "
                        f"schema nsysscope does not know ({self.schema_version}, nsys "
                        f"{self.nsys_version}; tested: {', '.join(TESTED_SCHEMAS)})")

    @cached_property
    def _reader(self) -> ColumnReader:
        return ColumnReader(self._file(), self.conn, self._duck)

    def read(self, sql: str, kinds: str, params: tuple[Any, ...] = (),
             split: str | None = None, within: TimeRange | CallRows | None = None) -> list[Any]:
        """The columns of ``sql``'s result (``i``: int64 arrays; ``c``: text, a categorical;
        or grouped by runs), read without a Python object per value
        (:meth:`.columnar.ColumnReader.read`; ``split``: the big table it reads). For the big
        tables; metadata goes through :attr:`conn`. ``within``: the time range or calls
        whose condition (:meth:`.TimeRange.overlapping`, :meth:`.CallRows.sql`) ``sql``
        filters ``split`` by, so that with :attr:`zones` only the stretches of the table
        that may hold its rows are read."""
        rows = None if self.zones is None or split is None else self.zones.runs(split, within)
        return self._reader.read(sql, kinds, params, split, rows)

    @property
    def filters_first(self) -> bool:
        """Whether :meth:`read`'s filters run before rows are converted
        (:attr:`.columnar.ColumnReader.filters_first`)."""
        return self._reader.filters_first

    def at_once(self, reads: dict[str, Callable[[], T]]) -> dict[str, T]:
        """Each of ``reads`` (functions that read through :meth:`read`) run, at once on
        threads of their own where the reader lets reads run together (the C reader's
        release the GIL: one table's rows are framed while another's are read), else one
        after the other. The first error is raised once every read has ended (the others
        are stopped: Ctrl-C, or a damaged export), unless it only says that its read was
        stopped: reads run at once inside one of these (the GPU tables' inside the
        loader's) stop every read of the export when one fails, and a read stopped so may
        end before the failed one is reported; the failure is raised then."""
        if len(reads) < 2 or not self._reader.concurrent:
            return {name: read() for name, read in reads.items()}
        with ThreadPoolExecutor(len(reads), thread_name_prefix="nsysscope-table") as pool:
            futures = {name: pool.submit(read) for name, read in reads.items()}
            try:
                for f in as_completed(futures.values()):
                    f.result()  # the first error, as soon as it comes
            except ReadStopped as stopped:
                self._reader.stop()
                wait(futures.values())
                raise next((e for f in futures.values() if (e := f.exception()) is not None
                            and not isinstance(e, ReadStopped)), stopped) from None
            except BaseException:
                self._reader.stop()
                raise
            return {name: f.result() for name, f in futures.items()}

    def stop(self) -> None:
        """End the reads under way (another thread's: an analysis stopped meanwhile)."""
        if "_reader" in self.__dict__:
            self._reader.stop()

    @property
    def fallbacks(self) -> int:
        """Queries of :meth:`read` that the fast readers refused and sqlite3 answered."""
        return self._reader.fallbacks if "_reader" in self.__dict__ else 0

    def close(self) -> None:
        """Close both connections to the export."""
        if "_reader" in self.__dict__:
            self._reader.close()
        self.conn.close()

    def __enter__(self) -> Schema:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def file(self) -> Path:
        """The SQLite file read (for a cache, not the user's path)."""
        return self._file()

    def _file(self) -> Path:
        """The SQLite file behind the connection (for a cache, not the user's path)."""
        try:
            for _, name, file in self.conn.execute("PRAGMA database_list"):
                if name == "main" and file:
                    return Path(file)
        except sqlite3.Error:
            pass
        return Path(self.path)

    @cached_property
    def export_meta(self) -> dict[str, str]:
        rows = self.conn.execute(f"SELECT {sql_name('name')}, {sql_name('value')} FROM "
                                 f"{self.meta_table} WHERE name IS NOT NULL AND value IS NOT "
                                 "NULL")
        return {name_text(k): name_text(v) for k, v in rows}

    @property
    def schema_version(self) -> str:
        return self.export_meta.get("EXPORT_SCHEMA_VERSION", "unknown")

    @property
    def nsys_version(self) -> str:
        return self.export_meta.get("EXPORT_PRODUCT_VERSION", "unknown")

    def _check_version(self) -> None:
        major = self.export_meta.get("EXPORT_SCHEMA_VERSION_MAJOR") or \
            self.schema_version.split(".")[0]
        if str(major) not in SUPPORTED_MAJORS:
            raise NotAnNsysExport(
                f"{self.path}: export schema {self.schema_version} (nsys {self.nsys_version}) is "
                f"not supported; nsysscope reads schema "
                f"{' and '.join(m + '.x' for m in SUPPORTED_MAJORS)} "
                f"(tested: {', '.join(TESTED_SCHEMAS)})")

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> frozenset[str]:
        if table not in self.tables:
            return frozenset()
        return frozenset(r[1] for r in self.conn.execute(f"PRAGMA table_info('{table}')"))

    def enum(self, table: str) -> dict[str, int]:
        """``ENUM_X`` as ``{NAME: id}``, empty when the export has no such table."""
        if table not in self.tables:
            return {}
        return {name: int(i) for i, name in self.conn.execute(
            f"SELECT id, name FROM {table} WHERE name IS NOT NULL AND id IS NOT NULL")}

    def enum_id(self, table: str, suffix: str, default: int) -> int:
        """The id of the enum member whose name ends with ``suffix`` (e.g. ``_PAGEABLE``)."""
        for name, i in self.enum(table).items():
            if name.endswith(suffix):
                return i
        return default

