"""What a file is, from its content: the kind of JSON it holds (a torch.profiler (Kineto)
trace, an nsysscope summary or timeline, or other JSON; plain, gzip or xz; never judged by its
name), and whether it is a trace nsysscope must never write over."""

from __future__ import annotations

import gzip
import lzma
import os
import re
import sqlite3
import zlib
from pathlib import Path

from ..errors import UnreadableInput
from .files import GZIP_MAGIC, REPORT_MAGIC, SQLITE_MAGIC, XZ_MAGIC, read_head
from .nsys.schema import META_TABLES, connect_readonly

#: decompressed bytes of a JSON file's head that :func:`json_kind` looks at
JSON_HEAD = 1 << 16
_JSON_START = (b"{", b"[")
#: what marks nsysscope's own timelines (``export``, ``--perfetto``): a Chrome trace too, but
#: one nsysscope wrote (:func:`nsysscope.export.chrome_json.open_trace` puts it first; a
#: timeline saved again by another JSON writer may space or order it otherwise)
TIMELINE_MARK = re.compile(rb'"otherData"\s*:\s*\{[^{}]*"source"\s*:\s*"nsysscope"')


def json_kind(path: str | os.PathLike[str]) -> str | None:
    """What a JSON input is, from its content (plain, gzip or xz; never by name):
    ``"kineto"`` (a torch.profiler / Chrome trace: a ``traceEvents`` key, or an array of
    events, in its head), ``"timeline"`` (nsysscope's own Perfetto timeline: output, to be
    written over again, not a trace), ``"summary"`` (nsysscope's own summary JSON),
    ``"json"`` (any other JSON), or None when it is not JSON at all (SQLite, a report,
    anything else).

    A file that cannot be read raises :class:`UnreadableInput`, as :func:`resolve` does."""
    p = Path(path)
    head = read_head(p)
    if head.startswith((GZIP_MAGIC, XZ_MAGIC)):
        opener = gzip.open if head.startswith(GZIP_MAGIC) else lzma.open
        try:
            with opener(p, "rb") as f:
                head = f.read(JSON_HEAD)
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            return None  # resolve() says what is wrong with it
    else:
        with p.open("rb") as f:
            head = f.read(JSON_HEAD)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(_JSON_START):
        return None
    events_at = text.find(b'"traceEvents"')  # the mark is the document's, not an event's
    if TIMELINE_MARK.search(text, 0, events_at if events_at >= 0 else len(text)):
        return "timeline"
    if b'"traceEvents"' in text or (text.startswith(b"[") and b'"ph"' in text):
        return "kineto"
    if b'"verdict"' in text and b'"trace"' in text:
        return "summary"
    return "json"


#: what :func:`json_kind` calls the JSON that is a trace, or nsysscope's timeline of one: never
#: a summary, whatever its name
TRACE_JSON = ("kineto", "timeline")


def is_kineto(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a torch.profiler (Kineto) JSON trace, by content; never raises."""
    try:
        return json_kind(path) == "kineto"
    except (UnreadableInput, OSError):
        return False


def is_results_db(p: Path) -> bool:
    """Whether ``p`` is a database of nsysscope's own per-launch results (``report
    --per-launch FILE.sqlite``: ``launches`` and ``meta`` tables, no nsys export table), which
    a folder of traces often holds beside them; never raises."""
    try:
        with p.open("rb") as f:
            if not f.read(len(SQLITE_MAGIC)).startswith(SQLITE_MAGIC):
                return False
        conn = connect_readonly(p)
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except (OSError, sqlite3.Error, UnreadableInput):
        return False
    return {"launches", "meta"} <= tables and not tables & set(META_TABLES)


def file_kind(p: Path) -> str | None:
    """What ``p`` is, when it is something nsysscope never writes over: ``"an nsys export"``
    (SQLite with nsys's ``META_DATA_EXPORT``, or schema 2.x's ``EXPORT_META_DATA``), ``"an
    SQLite file"``, ``"an Nsight Systems report"``, ``"a compressed SQLite file"`` (an export
    as .xz or .gz: its tables are not looked at) or ``"a torch.profiler trace"`` (plain or
    compressed); None for anything else, for a file that cannot be read, and for what is not
    a regular file (opening a FIFO to look would wait for a writer)."""
    try:
        if not p.is_file():
            return None
        with p.open("rb") as f:
            head = f.read(len(REPORT_MAGIC))
        if head.startswith((GZIP_MAGIC, XZ_MAGIC)):
            opener = gzip.open if head.startswith(GZIP_MAGIC) else lzma.open
            with opener(p, "rb") as f:
                inner = f.read(len(SQLITE_MAGIC))
            if inner.startswith(SQLITE_MAGIC):
                return "a compressed SQLite file"
    except (OSError, EOFError, lzma.LZMAError, zlib.error):
        return None
    if head.startswith(REPORT_MAGIC):
        return "an Nsight Systems report"
    if is_kineto(p):
        return "a torch.profiler trace"
    if not head.startswith(SQLITE_MAGIC):
        return None
    try:
        conn = connect_readonly(p)
        try:
            export = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN "
                                  "(?, ?)", META_TABLES).fetchone() is not None
        finally:
            conn.close()
    except (sqlite3.Error, UnreadableInput):
        export = False
    return "an nsys export" if export else "an SQLite file"
