"""Load one normalised :class:`Trace` from an nsys SQLite export.

Only the rows and columns the analysis needs are read: the CUDA API calls that launch graphs,
copy, record events or synchronise; the GPU work of each graph launch, aggregated in SQL; the
eager GPU work; sync and event records; NVTX ranges. Column convention: integer nanoseconds in
``*_ns`` columns, thread ids as nsys ``globalTid`` (pid and tid packed), ``corr_id`` for
CUDA correlation ids.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import NotAnNsysExport
from .schema import Schema, api_base_name, connect_readonly
from .sources import resolve

LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
SYNC_APIS = frozenset({
    "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
    "cudaThreadSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"})
RECORD_APIS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord",
                         "cuEventRecordWithFlags"})


def is_copy_api(name: str) -> bool:
    return name.startswith(("cudaMemcpy", "cuMemcpy"))


def _wanted_api(name: str) -> bool:
    return name in LAUNCH_APIS or name in SYNC_APIS or name in RECORD_APIS or is_copy_api(name)


@dataclass(frozen=True)
class TraceMeta:
    """Identity of a trace: where it came from and what recorded it."""

    path: str
    nsys_version: str
    schema_version: str
    gpus: tuple[str, ...]
    graph_trace: str  # "node", "graph" or "none"
    has_sync_records: bool  # SYNCHRONIZATION with eventSyncId: which event each sync waited on
    has_event_records: bool  # CUDA_EVENT: which stream position each event marks
    has_nvtx: bool
    capture_start_ns: int
    capture_end_ns: int
    diagnostics: tuple[str, ...] = ()


@dataclass
class Trace:
    """The normalised trace every analysis reads. Analyses never issue SQL."""

    meta: TraceMeta
    api: pd.DataFrame  # start_ns, end_ns, tid, corr_id, name
    graph_work: pd.DataFrame  # corr_id, gpu_start_ns, gpu_end_ns, stream, device, n_ops
    gpu_ops: pd.DataFrame  # eager GPU work: start_ns, end_ns, stream, device, corr_id, kind,
    #                        copy_kind, src_kind, dst_kind, bytes
    syncs: pd.DataFrame  # corr_id, event_sync_id, stream
    event_records: pd.DataFrame  # corr_id, event_sync_id, stream
    nvtx: pd.DataFrame  # start_ns, end_ns, tid, text
    threads: pd.DataFrame  # tid, thread_name
    enums: dict[str, int] = field(default_factory=dict)  # htod, dtoh, pageable
    source: Path | None = None  # the SQLite file read


def load(path: str | Path, nsys: str | None = None) -> Trace:
    """Read the trace at ``path`` (.sqlite, .sqlite.xz/.gz or .nsys-rep)."""
    db = resolve(path, nsys=nsys)
    conn = connect_readonly(db)
    try:
        return _load(conn, Path(path), db)
    except sqlite3.DatabaseError as e:
        raise NotAnNsysExport(f"{path}: truncated or corrupt export ({e})") from None
    finally:
        conn.close()


def _load(conn: sqlite3.Connection, path: Path, db: Path) -> Trace:
    s = Schema(conn, path)
    api = _api(s)
    graph_work, graph_mode = _graph_work(s, api)
    meta = TraceMeta(
        path=str(path), nsys_version=s.nsys_version, schema_version=s.schema_version,
        gpus=_gpus(s), graph_trace=graph_mode,
        has_sync_records="eventSyncId" in s.columns("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
        has_event_records=s.has("CUPTI_ACTIVITY_KIND_CUDA_EVENT"),
        has_nvtx=s.has("NVTX_EVENTS"), diagnostics=_diagnostics(s), **_capture_span(s, api))
    enums = dict(
        htod=s.enum_id("ENUM_CUDA_MEMCPY_OPER", "_HTOD", 1),
        dtoh=s.enum_id("ENUM_CUDA_MEMCPY_OPER", "_DTOH", 2),
        pageable=s.enum_id("ENUM_CUDA_MEM_KIND", "_PAGEABLE", 0))
    return Trace(meta=meta, api=api, graph_work=graph_work, gpu_ops=_gpu_ops(s),
                 syncs=_syncs(s), event_records=_event_records(s), nvtx=_nvtx(s),
                 threads=_threads(s), enums=enums, source=db)


def _query(s: Schema, sql: str, columns: list[str], dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    rows = s.conn.execute(sql).fetchall()
    df = pd.DataFrame.from_records(rows, columns=columns)
    if dtypes:
        df = df.astype({c: t for c, t in dtypes.items() if c in df.columns})
    return df


_INT = "int64"


def _api(s: Schema) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "tid", "corr_id", "name"]
    if not s.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols[:-1]} | {"name": pd.Series(dtype=str)})
    names = {i: api_base_name(v) for i, v in s.conn.execute(
        "SELECT id, value FROM StringIds WHERE value LIKE 'cu%' AND id IN "
        "(SELECT DISTINCT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)")}
    wanted = {i: n for i, n in names.items() if _wanted_api(n)}
    ids = ",".join(str(i) for i in wanted) or "NULL"
    df = _query(s, "SELECT start, end, globalTid, correlationId, nameId FROM "
                   f"CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({ids}) ORDER BY start",
                cols, {c: _INT for c in cols[:-1]})
    df["name"] = pd.Categorical(df["name"].map(wanted))
    return df


def _graph_work(s: Schema, api: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Per graph launch: the span of its GPU work, from node rows or graph-trace rows."""
    cols = ["corr_id", "gpu_start_ns", "gpu_end_ns", "stream", "device", "n_ops"]
    parts = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET"):
        if "graphNodeId" in s.columns(table):
            parts.append(f"SELECT correlationId c, start, end, streamId, deviceId FROM {table} "
                         "WHERE graphNodeId IS NOT NULL")
    mode = "none"
    if parts:
        sql = (f"SELECT c, MIN(start), MAX(end), MIN(streamId), MIN(deviceId), COUNT(*) FROM "
               f"({' UNION ALL '.join(parts)}) GROUP BY c")
        df = _query(s, sql, cols, {c: _INT for c in cols})
        mode = "node" if len(df) else mode
    else:
        df = pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols})
    if s.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        g = _query(s, "SELECT correlationId, start, end, streamId, deviceId, 1 FROM "
                      "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", cols, {c: _INT for c in cols})
        df = pd.concat([df, g[~g["corr_id"].isin(df["corr_id"])]], ignore_index=True)
        mode = "graph" if mode == "none" and len(g) else mode
    launch_corrs = api.loc[api["name"].isin(LAUNCH_APIS), "corr_id"]
    return df[df["corr_id"].isin(launch_corrs)].reset_index(drop=True), mode


def _gpu_ops(s: Schema) -> pd.DataFrame:
    """Eager GPU work (not part of a graph replay): kernels, copies and memsets."""
    cols = ["start_ns", "end_ns", "stream", "device", "corr_id", "kind", "copy_kind",
            "src_kind", "dst_kind", "bytes"]
    parts = []
    for table, kind, copy_cols in (
            ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel", "-1, -1, -1, 0"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy", "copyKind, srcKind, dstKind, bytes"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset", "-1, -1, -1, bytes")):
        tcols = s.columns(table)
        if not tcols:
            continue
        where = "WHERE graphNodeId IS NULL" if "graphNodeId" in tcols else ""
        parts.append(f"SELECT start, end, streamId, deviceId, correlationId, '{kind}', "
                     f"{copy_cols} FROM {table} {where}")
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=_INT if c != "kind" else str) for c in cols})
    df = _query(s, " UNION ALL ".join(parts) + " ORDER BY start", cols,
                {c: _INT for c in cols if c != "kind"})
    df["kind"] = pd.Categorical(df["kind"], categories=["kernel", "memcpy", "memset"])
    return df


def _syncs(s: Schema) -> pd.DataFrame:
    cols = ["corr_id", "event_sync_id", "stream"]
    tcols = s.columns("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    if not tcols:
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols})
    esid = "eventSyncId" if "eventSyncId" in tcols else "-1"
    return _query(s, f"SELECT correlationId, {esid}, streamId FROM "
                     "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", cols, {c: _INT for c in cols})


def _event_records(s: Schema) -> pd.DataFrame:
    cols = ["corr_id", "event_sync_id", "stream"]
    if not s.has("CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols})
    return _query(s, "SELECT correlationId, eventSyncId, streamId FROM "
                     "CUPTI_ACTIVITY_KIND_CUDA_EVENT", cols, {c: _INT for c in cols})


def _nvtx(s: Schema) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "tid", "text"]
    if not s.has("NVTX_EVENTS"):
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols[:-1]} | {"text": pd.Series(dtype=str)})
    types = s.enum("ENUM_NSYS_EVENT_TYPE")
    ranges = [types.get("NvtxPushPopRange", 59), types.get("NvtxStartEndRange", 60)]
    tcols = s.columns("NVTX_EVENTS")
    text = []
    if "text" in tcols:
        text.append("NULLIF(n.text, '')")
    if "textId" in tcols:
        text.append("t.value")
    join = "LEFT JOIN StringIds t ON t.id = n.textId" if "textId" in tcols else ""
    sql = (f"SELECT n.start, n.end, n.globalTid, COALESCE({', '.join(text) or 'NULL'}, '') "
           f"FROM NVTX_EVENTS n {join} WHERE n.eventType IN ({ranges[0]}, {ranges[1]}) "
           "AND n.end IS NOT NULL ORDER BY n.start")
    df = _query(s, sql, cols, {"start_ns": _INT, "end_ns": _INT, "tid": _INT})
    df["text"] = df["text"].astype(str)
    return df


def _threads(s: Schema) -> pd.DataFrame:
    if not s.has("ThreadNames"):
        return pd.DataFrame({"tid": pd.Series(dtype=_INT), "thread_name": pd.Series(dtype=str)})
    return _query(s, "SELECT t.globalTid, COALESCE(s.value, '') FROM ThreadNames t "
                     "LEFT JOIN StringIds s ON s.id = t.nameId", ["tid", "thread_name"],
                  {"tid": _INT}).drop_duplicates("tid")


def _gpus(s: Schema) -> tuple[str, ...]:
    if "name" not in s.columns("TARGET_INFO_GPU"):
        return ()
    return tuple(r[0] for r in s.conn.execute("SELECT DISTINCT name FROM TARGET_INFO_GPU"))


def _diagnostics(s: Schema) -> tuple[str, ...]:
    """Warnings and errors nsys recorded about the capture itself (e.g. dropped events)."""
    if "text" not in s.columns("DIAGNOSTIC_EVENT"):
        return ()
    rows = s.conn.execute(
        "SELECT DISTINCT text FROM DIAGNOSTIC_EVENT WHERE severity >= 2 AND text IS NOT NULL")
    return tuple(r[0] for r in rows)


def _capture_span(s: Schema, api: pd.DataFrame) -> dict[str, int]:
    if {"startTime", "stopTime"} <= s.columns("ANALYSIS_DETAILS"):
        start, stop = s.conn.execute("SELECT MIN(startTime), MAX(stopTime) FROM ANALYSIS_DETAILS").fetchone()
        if start is not None and stop is not None:
            return dict(capture_start_ns=int(start), capture_end_ns=int(stop))
    if len(api):
        return dict(capture_start_ns=int(api["start_ns"].min()), capture_end_ns=int(api["end_ns"].max()))
    return dict(capture_start_ns=0, capture_end_ns=0)
