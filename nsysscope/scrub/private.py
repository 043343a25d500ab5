"""What nsys records beside the trace about the machine and the program, dropped by default.

Where each lives in an export (nsys 2023.4, schema 3.7.2, to 2025.3, schema 3.20.3):

``process_list``
    ``PROCESSES`` lists every process of the host when the capture started (~200-330 on the
    H200 samples: kernel threads, daemons, shells); ``ThreadNames`` names their threads
    (``StringIds`` rows through ``nameId``), and ``StringIds`` also keeps, referenced by nothing,
    the names the host's threads took during the capture (``kworker/u64:2-writeback``) beside
    nsys's own messages. Only the processes nsys *traced* stay: those with rows in a
    ``CUPTI_*``, ``CUDA_*``, ``NVTX_*`` or ``OSRT_*`` table (by ``globalPid`` or one of their
    threads' ``globalTid``), with their threads' names; the ``StringIds`` rows that no column
    (nor a Python-sampling JSON payload) references go.
``program_output``
    The profiled program's stdout and stderr: ``ProcessStreams`` (``filenameId``,
    ``contentId``, both ``StringIds``) and, since 2024, ``ANALYSIS_FILE`` (the same
    ``pid_N_stdout.log``/``stderr.log`` files and ``contentId``). For a server that is prompts
    and request logs. The rows and the ``StringIds`` text go.
``kernel``
    The kernel release and build string, ``TARGET_INFO_SYSTEM_ENV`` rows
    ``SoftwareReleaseVersion`` (``uname -r``, e.g. a cloud provider's build name) and
    ``KernelVersion`` (``uname -v``). The rows go; ``OsDescription`` (the distribution) stays.
``session_id``
    ``META_DATA_CAPTURE`` ``PROFILING_SESSION_UUID`` (and ``PROFILING_SESSION_ID`` when set):
    random per capture, but it ties a shared file to the report and logs it came from. The
    rows go.

nsysscope reads none of these for the analysis except the names of the traced processes and
their threads, which stay. ``keep_*`` options of :func:`~nsysscope.scrub.scrub` keep each.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from .cells import as_text
from .context import ExportContext, json_ids, quoted, table_columns
from .policy import DELETE, Finding, env_names, redact_name

#: tables whose rows say that nsys traced a process
TRACED_PREFIXES = ("CUPTI_", "CUDA_", "NVTX_", "OSRT_")
KERNEL_FIELDS = ("SoftwareReleaseVersion", "KernelVersion")  # uname -r, uname -v
SESSION_FIELDS = ("PROFILING_SESSION_UUID", "PROFILING_SESSION_ID")
_STREAM_FILES = ("stdout.log", "stderr.log")


@dataclass(frozen=True)
class Keep:
    """Which of the private items :func:`~nsysscope.scrub.scrub` keeps (all dropped by
    default)."""

    process_list: bool = False
    program_output: bool = False
    kernel_string: bool = False
    session_uuid: bool = False


def traced_processes(conn: sqlite3.Connection, tables: list[str]) -> set[int]:
    """The process keys (``globalPid >> 24``: VM and pid) of every process with rows in a
    traced table."""
    keys: set[int] = set()
    for t in tables:
        if not t.startswith(TRACED_PREFIXES):
            continue
        cols = {c for c, _ in table_columns(conn, t)}
        for c in ("globalPid", "globalTid"):
            if c in cols:
                keys.update(r[0] for r in conn.execute(
                    f"SELECT DISTINCT {quoted(c)} >> 24 FROM {quoted(t)} "
                    f"WHERE {quoted(c)} IS NOT NULL"))
    return keys


def scan_private(conn: sqlite3.Connection, ctx: ExportContext, keep: Keep) -> Iterator[Finding]:
    """One finding per row to drop (see the module docstring)."""
    if not keep.process_list:
        yield from _process_list(conn, ctx)
    if not keep.program_output:
        yield from _program_output(conn, ctx)
    if not keep.kernel_string:
        yield from _named_rows(conn, ctx, "TARGET_INFO_SYSTEM_ENV", KERNEL_FIELDS, "kernel")
    if not keep.session_uuid:
        yield from _named_rows(conn, ctx, "META_DATA_CAPTURE", SESSION_FIELDS, "session_id")


def _process_list(conn: sqlite3.Connection, ctx: ExportContext) -> Iterator[Finding]:
    traced = traced_processes(conn, ctx.tables)
    have = {c for c, _ in table_columns(conn, "PROCESSES")} if "PROCESSES" in ctx.tables else set()
    if "globalPid" in have:
        has_name = "name" in have
        name = "name" if has_name else "''"
        for rowid, gpid, pname in conn.execute(
                f"SELECT rowid, globalPid, {name} FROM PROCESSES"):
            if gpid is None or gpid >> 24 not in traced:
                pid = (gpid >> 24) & 0xFFFFFF if gpid is not None else "?"
                yield Finding("PROCESSES", "name", rowid, rowid,
                               [("process_list",
                                 f"pid {pid} {redact_name(as_text(pname) or '')}")],
                               DELETE)
    if "ThreadNames" in ctx.tables and \
            "globalTid" in {c for c, _ in table_columns(conn, "ThreadNames")}:
        for rowid, gtid in conn.execute("SELECT rowid, globalTid FROM ThreadNames"):
            if gtid is None or gtid >> 24 not in traced:
                pid = (gtid >> 24) & 0xFFFFFF if gtid is not None else "?"
                yield Finding("ThreadNames", "nameId", rowid, rowid,
                               [("process_list", f"a thread of pid {pid}")], DELETE)
    # strings no table uses: the names host threads took during the capture, nsys's messages
    for rowid, sid, value in conn.execute("SELECT rowid, id, value FROM StringIds"):
        if sid not in ctx.referenced_ids and not (isinstance(value, str) and env_names(value)):
            yield Finding("StringIds", "value", rowid, sid,
                           [("process_list", f"unused string {redact_name(str(value or ''))}")],
                           DELETE)


def _program_output(conn: sqlite3.Connection, ctx: ExportContext) -> Iterator[Finding]:
    contents: set[int] = set()
    if "ProcessStreams" in ctx.tables:
        cols = {c for c, _ in table_columns(conn, "ProcessStreams")}
        fname = ("(SELECT value FROM StringIds WHERE id = filenameId)" if "filenameId" in cols
                 else "''")
        content = "contentId" if "contentId" in cols else "NULL"
        size = (f"(SELECT length(value) FROM StringIds WHERE id = {content})"
                if "contentId" in cols else "0")
        for rowid, name, cid, n in conn.execute(
                f"SELECT rowid, {fname}, {content}, {size} FROM ProcessStreams"):
            if cid is not None:
                contents.add(cid)
            yield Finding("ProcessStreams", "contentId", rowid, rowid,
                           [("program_output", f"{_basename(name)}, {n or 0} characters")],
                           DELETE)
    if "ANALYSIS_FILE" in ctx.tables:
        cols = {c for c, _ in table_columns(conn, "ANALYSIS_FILE")}
        fname = "filename" if "filename" in cols else "''"
        content = "contentId" if "contentId" in cols else "NULL"
        for rowid, name, cid in conn.execute(
                f"SELECT rowid, {fname}, {content} FROM ANALYSIS_FILE"):
            if cid in contents or str(name or "").endswith(_STREAM_FILES):
                yield Finding("ANALYSIS_FILE", "contentId", rowid, rowid,
                               [("program_output", _basename(name))], DELETE)


def _basename(name: object) -> str:
    return str(name or "").rstrip("/").rsplit("/", 1)[-1] or "unnamed stream"


def _named_rows(conn: sqlite3.Connection, ctx: ExportContext, table: str, names: tuple[str, ...],
                kind: str) -> Iterator[Finding]:
    if table not in ctx.tables or \
            not {"name", "value"} <= {c for c, _ in table_columns(conn, table)}:
        return
    marks = ", ".join("?" * len(names))
    for rowid, name, value in conn.execute(
            f"SELECT rowid, name, value FROM {quoted(table)} "
            f"WHERE CAST(name AS TEXT) IN ({marks})", names):  # a name stored as a blob too
        if value not in (None, ""):
            yield Finding(table, "value", rowid, as_text(name) or "",
                          [(kind, redact_name(as_text(value) or ""))], DELETE)


def unreferenced_strings(conn: sqlite3.Connection, ctx: ExportContext,
                         candidates: set[int]) -> set[int]:
    """Those of the ``StringIds`` ids ``candidates`` that no column (nor a Python-sampling JSON
    payload) references any more."""
    if not candidates:
        return set()
    used: set[int] = set()
    for t, c in ctx.string_refs:
        if t in ctx.tables:
            used.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT {quoted(c)} FROM {quoted(t)} WHERE {quoted(c)} IS NOT NULL"))
    used |= json_ids(conn, ctx.tables)
    return candidates - used
