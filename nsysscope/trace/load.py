"""Load one normalised :class:`Trace` from an nsys SQLite export.

Only the rows and columns the analysis needs are read: the CUDA API calls that launch graphs,
copy, record events or synchronise; the GPU work of each graph launch, aggregated in SQL; the
eager GPU work; sync and event records; NVTX ranges. Column convention: integer nanoseconds in
``*_ns`` columns, thread ids as nsys ``globalTid`` (pid and tid packed), ``corr_id`` for
CUDA correlation ids.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import NotAnNsysExport
from ..util.progress import progress
from .python_samples import PythonSamples
from .schema import Schema, api_base_name, connect_readonly
from .sources import json_kind, resolve

LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
SYNC_APIS = frozenset({
    "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
    "cudaThreadSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"})
RECORD_APIS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord",
                         "cuEventRecordWithFlags"})
#: a stream waits for an event recorded on another stream (``torch.cuda.Stream.wait_stream``)
STREAM_WAIT_APIS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})
#: non-blocking completion checks: a host that polls them in a loop is waiting
QUERY_APIS = frozenset({"cudaEventQuery", "cudaStreamQuery", "cuEventQuery", "cuStreamQuery"})


def is_copy_api(name: str) -> bool:
    return name.startswith(("cudaMemcpy", "cuMemcpy"))


def _wanted_api(name: str) -> bool:
    return (name in LAUNCH_APIS or name in SYNC_APIS or name in RECORD_APIS
            or name in STREAM_WAIT_APIS or name in QUERY_APIS or is_copy_api(name))


def process_of(global_tid) -> np.ndarray:
    """The process key of an nsys ``globalTid`` or ``globalPid``: its VM id and pid (the bits
    above the thread id). CUDA correlation ids, streams, events and device ids are only
    unique within one process, so every join between tables is keyed by it too."""
    return np.asarray(global_tid, dtype=np.int64) >> 24


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
    format: str = "nsys"  # what was read: "nsys" (an SQLite export) or "kineto" (torch.profiler)


@dataclass
class Trace:
    """The normalised trace every analysis reads. Analyses never issue SQL.

    ``proc`` is the process key (:func:`process_of`); correlation ids, streams, event sync ids
    and device ids mean something only together with it."""

    meta: TraceMeta
    api: pd.DataFrame  # start_ns, end_ns, tid, corr_id, proc, status (return code), name
    graph_work: pd.DataFrame  # proc, corr_id, gpu_start_ns, gpu_end_ns, stream, device, n_ops
    gpu_ops: pd.DataFrame  # eager GPU work: start_ns, end_ns, stream, device, corr_id, proc,
    #                        kind, copy_kind, src_kind, dst_kind, bytes
    syncs: pd.DataFrame  # proc, corr_id, event_sync_id, stream
    event_records: pd.DataFrame  # proc, corr_id, event_sync_id, stream
    nvtx: pd.DataFrame  # start_ns, end_ns, tid, text
    threads: pd.DataFrame  # tid, thread_name
    processes: pd.DataFrame = field(default_factory=pd.DataFrame)  # proc, pid, name
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)  # NCCL kernels: proc,
    #                        corr_id, start_ns, end_ns, stream, device, name
    enums: dict[str, int] = field(default_factory=dict)  # htod, dtoh, pageable
    source: Path | None = None  # the SQLite file read
    #: Python stacks the trace itself holds (Kineto ``python_function`` ranges), one
    #: pseudo-sample per CUDA call; None: read nsys Python samples from ``source``
    python: PythonSamples | None = None


def load(path: str | Path, nsys: str | None = None) -> Trace:
    """Read the trace at ``path`` (.sqlite, .sqlite.xz/.gz, .nsys-rep, or a torch.profiler
    JSON trace, plain or compressed: told apart by content)."""
    if json_kind(path) is not None:
        from .kineto import read_kineto  # imports this module
        return read_kineto(path)
    db = resolve(path, nsys=nsys)
    conn = connect_readonly(db)
    try:
        return _load(conn, Path(path), db)
    except sqlite3.DatabaseError as e:
        raise NotAnNsysExport(f"{path}: truncated or corrupt export ({e})") from None
    except (ValueError, TypeError, OverflowError) as e:  # a damaged row: NULL, text or a blob
        # where nsys writes integers (tests/test_fuzz.py)
        raise NotAnNsysExport(f"{path}: corrupt export: a value of the wrong type in a table "
                              f"({type(e).__name__}: {str(e)[:120]})") from None
    finally:
        conn.close()


def _load(conn: sqlite3.Connection, path: Path, db: Path) -> Trace:
    s = Schema(conn, path)
    with progress(f"reading {path.name}", total=6) as bar, _Reader(db, s) as reader:
        # first the small tables on this thread, then the GPU tables on worker threads: a
        # cursor drained here would hand the GIL back and forth with the workers on every row
        api = _api(s)
        bar.advance(label=f"reading {path.name}: syncs and NVTX")
        syncs, event_records = _syncs(s), _event_records(s)
        bar.advance()
        nvtx = _nvtx(s)
        bar.advance(label=f"reading {path.name}: GPU work")
        gpu_ops = _own_process(reader.eager_ops(), api)
        bar.advance(label=f"reading {path.name}: graph replays")
        graph_work, graph_mode = _graph_work(s, api, reader)
        bar.advance()
        syncs, event_records = _own_process(syncs, api), _own_process(event_records, api)
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
    return Trace(meta=meta, api=api, graph_work=graph_work, gpu_ops=gpu_ops,
                 syncs=syncs, event_records=event_records, nvtx=nvtx,
                 threads=_threads(s), processes=_processes(s), collectives=_collectives(s),
                 enums=enums, source=db)


# -- reading -----------------------------------------------------------------------------------
#
# Rows never become Python objects in bulk: cursors are drained in chunks straight into numpy
# arrays (one column at a time), so memory stays at the final arrays plus one chunk. The big
# table (the GPU work of graph replays, ~200 rows per launch) is aggregated inside SQLite, in
# rowid ranges on parallel connections.

_CHUNK = 1 << 16
#: rows of an activity table one worker aggregates at a time
_PART_ROWS = 1 << 20
#: SQLite page cache of a worker's connection, KiB: it also bounds the in-memory sort
_SORT_KB = 65536


def _workers() -> int:
    """Threads for the SQL aggregation: ``$NSYSSCOPE_THREADS``, else the CPU count (max 8)."""
    env = os.environ.get("NSYSSCOPE_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(8, cpu_count()))


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read(conn: sqlite3.Connection, sql: str, kinds: str, params: tuple = ()) -> list[np.ndarray]:
    """The columns of ``sql``'s result as arrays: ``i`` int64 (no NULLs: use IFNULL), ``o``
    Python objects."""
    cur = conn.execute(sql, params)
    parts: list[list[np.ndarray]] = [[] for _ in kinds]
    while True:
        rows = cur.fetchmany(_CHUNK)
        if not rows:
            break
        n = len(rows)
        for j, (kind, col) in enumerate(zip(kinds, zip(*rows))):
            parts[j].append(np.fromiter(col, np.int64, n) if kind == "i"
                            else np.array(col, dtype=object))
    return [np.concatenate(p) if len(p) > 1 else p[0] if p else
            np.empty(0, np.int64 if k == "i" else object) for p, k in zip(parts, kinds)]


def _frame(columns: list[str], arrays: list[np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame(dict(zip(columns, arrays)))


def _query(s: Schema, sql: str, columns: list[str], dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    rows = s.conn.execute(sql).fetchall()
    df = pd.DataFrame.from_records(rows, columns=columns)
    if dtypes:
        df = df.astype({c: t for c, t in dtypes.items() if c in df.columns})
    return df


_INT = "int64"
GRAPH_WORK_COLUMNS = ["proc", "corr_id", "gpu_start_ns", "gpu_end_ns", "stream", "device", "n_ops"]
_GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET")
_GPU_KINDS = ["kernel", "memcpy", "memset"]
# per table: SQL for the copy columns of an eager op (copy_kind, src_kind, dst_kind, bytes);
# what a table lacks is filled in with -1 (bytes: 0 for kernels)
_COPY_SQL = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["copyKind", "IFNULL(srcKind, -1)", "IFNULL(dstKind, -1)", "bytes"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["bytes"],
}


class _Reader:
    """One pass over the GPU activity tables (kernels, copies, memsets), split in rowid ranges
    over worker threads with a read-only connection each (SQLite releases the GIL while it
    works). Each range is one ``GROUP BY``: a graph replay's rows (``graphNodeId`` set) group
    by correlation id into first start, last end, stream, device and count; an eager op's row
    is a group of its own (keyed by its negated rowid), so it comes back as is."""

    def __init__(self, db: Path, s: Schema) -> None:
        self.db, self.s = db, s
        self.workers = _workers()
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="nsysscope-sql") \
            if self.workers > 1 else None
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._jobs: list | None = None

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        for c in self._conns:
            c.close()

    def _conn(self) -> sqlite3.Connection:
        if self.pool is None:
            c = self.s.conn
        else:
            c = getattr(self._local, "conn", None)
            if c is None:
                c = self._local.conn = connect_readonly(self.db)
                with self._lock:
                    self._conns.append(c)
        if not getattr(self._local, "tuned", False):
            # room for one range's GROUP BY sort in memory (the default 2 MB spills to files)
            c.execute(f"PRAGMA cache_size = -{_SORT_KB}")
            self._local.tuned = True
        return c

    def _parts(self, table: str) -> list[tuple[int, int]]:
        """Rowid ranges that split ``table`` into pieces for the workers."""
        lo, hi = self.s.conn.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {table}").fetchone()
        if lo is None:
            return []
        # ~_PART_ROWS rows a piece (SQLite sorts each piece's GROUP BY in memory), and
        # enough pieces to keep every worker busy
        n = hi - lo + 1
        pieces = -(-n // _PART_ROWS)
        if self.pool is not None:
            pieces = max(pieces, min(self.workers * 2, -(-n // (_PART_ROWS // 4))))
        edges = np.linspace(lo, hi + 1, pieces + 1).astype(np.int64)
        return [(int(x), int(y)) for x, y in zip(edges[:-1], edges[1:]) if y > x]

    def start(self) -> _Reader:
        """Queue the whole pass; results are collected by :meth:`eager_ops` and
        :meth:`graph_work`."""
        if self._jobs is None:
            jobs = []
            for i, table in enumerate(_GPU_TABLES):
                tcols = self.s.columns(table)
                if tcols:
                    jobs += [(i, table, "graphNodeId" in tcols, lo, hi)
                             for lo, hi in self._parts(table)]
            self._jobs = [self.pool.submit(self._part, *j) if self.pool else _Done(self._part(*j))
                          for j in jobs]
        return self

    def _part(self, i: int, table: str, has_node: bool, lo: int, hi: int):
        copy = _COPY_SQL[table]
        n_copy = len(copy)
        # the process of each row: correlation ids restart in every process
        pid = "IFNULL(globalPid, -1)" if "globalPid" in self.s.columns(table) else "-1"
        if has_node:
            sql = ("SELECT CASE WHEN graphNodeId IS NULL THEN -rowid ELSE correlationId END g, "
                   f"{pid} p, graphNodeId IS NULL, MIN(start), MAX(end), MIN(streamId), "
                   "MIN(deviceId), IFNULL(MIN(correlationId), -1), COUNT(*)"
                   + "".join(f", MIN({c})" for c in copy) +
                   f" FROM {table} WHERE rowid >= ? AND rowid < ? AND "
                   "(graphNodeId IS NULL OR correlationId IS NOT NULL) GROUP BY g, p")
            key, gpid, eager, start, end, stream, device, corr, count, *cp = _read(
                self._conn(), sql, "i" * (9 + n_copy), (lo, hi))
            e = eager.astype(bool)
            g = ~e
            proc = np.where(gpid >= 0, gpid >> 24, -1)
            graph = [proc[g], corr[g], start[g], end[g], stream[g], device[g], count[g]]
            rowid = -key[e]
            eager_cols = [start[e], end[e], stream[e], device[e], corr[e], proc[e]] + [c[e] for c in cp]
        else:
            sql = (f"SELECT rowid, start, end, streamId, deviceId, IFNULL(correlationId, -1), {pid}"
                   + "".join(f", {c}" for c in copy) +
                   f" FROM {table} WHERE rowid >= ? AND rowid < ?")
            rowid, *eager_cols = _read(self._conn(), sql, "i" * (7 + n_copy), (lo, hi))
            eager_cols[5] = np.where(eager_cols[5] >= 0, eager_cols[5] >> 24, -1)
            graph = [np.empty(0, np.int64)] * 7
        n = len(rowid)
        fill = lambda v: np.full(n, v, dtype=np.int64)  # noqa: E731
        if n_copy == 4:
            copy_cols = eager_cols[6:10]
        elif n_copy == 1:
            copy_cols = [fill(-1), fill(-1), fill(-1), eager_cols[6]]
        else:
            copy_cols = [fill(-1), fill(-1), fill(-1), fill(0)]
        return graph, eager_cols[:6] + [fill(i)] + copy_cols + [rowid]

    def _results(self) -> list:
        return [j.result() for j in self.start()._jobs]

    def eager_ops(self) -> pd.DataFrame:
        """Eager GPU work (not part of a graph replay): kernels, copies and memsets."""
        cols = ["start_ns", "end_ns", "stream", "device", "corr_id", "proc", "kind", "copy_kind",
                "src_kind", "dst_kind", "bytes"]
        got = [eager for _, eager in self._results()]
        if not got:
            return pd.DataFrame({c: pd.Series(dtype=_INT if c != "kind" else str) for c in cols})
        arrays = [np.concatenate([g[j] for g in got]) for j in range(12)]
        start, kind, rowid = arrays[0], arrays[6], arrays[11]
        order = np.lexsort((rowid, kind, start))  # by start; ties in table, then row order
        df = _frame(cols, [a[order] for a in arrays[:11]])
        df["kind"] = pd.Categorical.from_codes(df["kind"].to_numpy(), categories=_GPU_KINDS)
        return df

    def graph_work(self) -> pd.DataFrame:
        """``proc, corr_id, gpu_start_ns, gpu_end_ns, stream, device, n_ops`` per process and
        correlation id of graph-replay work, sorted by both."""
        got = [graph for graph, _ in self._results()]
        p, c, t0, t1, stream, device, n = (np.concatenate([g[j] for g in got]) if got
                                           else np.empty(0, np.int64) for j in range(7))
        order = np.lexsort((c, p))
        p, c, t0, t1, stream, device, n = (v[order] for v in (p, c, t0, t1, stream, device, n))
        same = (c[1:] == c[:-1]) & (p[1:] == p[:-1])
        if len(c) > 1 and same.any():  # a launch split over ranges or tables
            first = np.flatnonzero(np.r_[True, ~same])
            p, c = p[first], c[first]
            t0, stream, device = (np.minimum.reduceat(v, first) for v in (t0, stream, device))
            t1 = np.maximum.reduceat(t1, first)
            n = np.add.reduceat(n, first)
        return _frame(GRAPH_WORK_COLUMNS, [p, c, t0, t1, stream, device, n])

    def has_node_tables(self) -> bool:
        return any("graphNodeId" in self.s.columns(t) for t in _GPU_TABLES)


class _Done:
    """A finished result where a Future is expected (no worker threads)."""

    def __init__(self, value) -> None:
        self.value = value

    def result(self):
        return self.value


def _api(s: Schema) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "tid", "corr_id"]
    if not s.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols + ["proc"]}
                            | {"status": pd.Series(dtype="int32"), "name": pd.Series(dtype=str)})
    names = {i: api_base_name(v) for i, v in s.conn.execute(
        "SELECT id, value FROM StringIds WHERE value LIKE 'cu%' AND id IN "
        "(SELECT DISTINCT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)")}
    wanted = {i: n for i, n in names.items() if _wanted_api(n)}
    ids = ",".join(str(i) for i in wanted) or "NULL"
    ret = "IFNULL(returnValue, 0)" if "returnValue" in s.columns("CUPTI_ACTIVITY_KIND_RUNTIME") else "0"
    start, end, tid, corr, name_id, status = _read(
        s.conn, "SELECT start, end, IFNULL(globalTid, -1), IFNULL(correlationId, -1), nameId, "
                f"{ret} FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({ids})", "iiiiii")
    order = np.argsort(start, kind="stable")
    categories = sorted(set(wanted.values()))
    code_of = {i: categories.index(n) for i, n in wanted.items()}
    ids_sorted = np.array(sorted(code_of), dtype=np.int64)
    codes = np.array([code_of[i] for i in ids_sorted], dtype=np.int64)
    name_codes = codes[np.searchsorted(ids_sorted, name_id[order])] if len(ids_sorted) else \
        np.zeros(0, dtype=np.int64)
    df = _frame(cols, [start[order], end[order], tid[order], corr[order]])
    df["proc"] = process_of(df["tid"])
    # the call's return code: a query that found its work unfinished returns
    # cudaErrorNotReady (600), which is how a polling loop's last try is told apart
    df["status"] = status[order].astype(np.int32)
    present = np.unique(name_codes)  # categories: the names present, sorted (as pd.Categorical)
    remap = np.full(len(categories), -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    df["name"] = pd.Categorical.from_codes(remap[name_codes],
                                           categories=[categories[i] for i in present])
    return df


def _graph_work(s: Schema, api: pd.DataFrame, reader: _Reader) -> tuple[pd.DataFrame, str]:
    """Per graph launch: the span of its GPU work, from node rows or graph-trace rows."""
    mode = "none"
    if reader.has_node_tables():
        df = reader.graph_work()
        mode = "node" if len(df) else mode
    else:
        df = pd.DataFrame({c: pd.Series(dtype=_INT) for c in GRAPH_WORK_COLUMNS})
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    if s.has(table):
        pid = "IFNULL(globalPid, -1)" if "globalPid" in s.columns(table) else "-1"
        g = _frame(GRAPH_WORK_COLUMNS, _read(
            s.conn, f"SELECT {pid}, IFNULL(correlationId, -1), start, end, streamId, deviceId, 1 "
                    f"FROM {table}", "iiiiiii"))
        g["proc"] = np.where(g["proc"] >= 0, g["proc"].to_numpy() >> 24, -1)
        seen = pd.MultiIndex.from_frame(df[["proc", "corr_id"]])
        g = g[~pd.MultiIndex.from_frame(g[["proc", "corr_id"]]).isin(seen)]
        df = pd.concat([df, g], ignore_index=True)
        mode = "graph" if mode == "none" and len(g) else mode
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    df = _own_process(df, api)
    keep = pd.MultiIndex.from_frame(df[["proc", "corr_id"]]).isin(
        pd.MultiIndex.from_frame(launches))
    return df[keep].reset_index(drop=True), mode


def _own_process(df: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """GPU rows without a ``globalPid`` (older exports) belong to the only process with CUDA
    calls; with several processes they stay unattributed (-1) rather than guessed."""
    procs = api["proc"].unique()
    if len(procs) == 1 and (df["proc"] < 0).any():
        df = df.assign(proc=df["proc"].where(df["proc"] >= 0, procs[0]))
    return df


def _syncs(s: Schema) -> pd.DataFrame:
    cols = ["proc", "corr_id", "event_sync_id", "stream"]
    tcols = s.columns("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    if not tcols:
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols})
    esid = "IFNULL(eventSyncId, -1)" if "eventSyncId" in tcols else "-1"
    pid = "IFNULL(globalPid, -1)" if "globalPid" in tcols else "-1"
    df = _frame(cols, _read(s.conn, f"SELECT {pid}, IFNULL(correlationId, -1), {esid}, streamId "
                                    "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "iiii"))
    return df.assign(proc=np.where(df["proc"] >= 0, df["proc"].to_numpy() >> 24, -1))


def _event_records(s: Schema) -> pd.DataFrame:
    cols = ["proc", "corr_id", "event_sync_id", "stream"]
    table = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
    if not s.has(table):
        return pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols})
    pid = "IFNULL(globalPid, -1)" if "globalPid" in s.columns(table) else "-1"
    df = _frame(cols, _read(s.conn, f"SELECT {pid}, IFNULL(correlationId, -1), "
                                    f"IFNULL(eventSyncId, -1), streamId FROM {table}", "iiii"))
    return df.assign(proc=np.where(df["proc"] >= 0, df["proc"].to_numpy() >> 24, -1))


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
    sql = (f"SELECT n.start, n.end, IFNULL(n.globalTid, -1), "
           f"COALESCE({', '.join(text) or 'NULL'}, '') "
           f"FROM NVTX_EVENTS n {join} WHERE n.eventType IN ({ranges[0]}, {ranges[1]}) "
           "AND n.end IS NOT NULL")
    start, end, tid, txt = _read(s.conn, sql, "iiio")
    order = np.argsort(start, kind="stable")
    df = _frame(cols, [start[order], end[order], tid[order], txt[order]])
    df["text"] = df["text"].astype(str)
    return df


def _processes(s: Schema) -> pd.DataFrame:
    """``proc`` (the process key), ``pid`` and ``name`` of every process in the report."""
    if not {"globalPid", "pid"} <= s.columns("PROCESSES"):
        return pd.DataFrame({"proc": pd.Series(dtype=_INT), "pid": pd.Series(dtype=_INT),
                             "name": pd.Series(dtype=str)})
    name = "COALESCE(name, '')" if "name" in s.columns("PROCESSES") else "''"
    df = _query(s, f"SELECT globalPid, pid, {name} FROM PROCESSES WHERE globalPid IS NOT NULL",
                ["proc", "pid", "name"], {"proc": _INT, "pid": _INT})
    df["proc"] = df["proc"].to_numpy() >> 24
    return df.drop_duplicates("proc").reset_index(drop=True)


#: kernels of NCCL collectives, by name (ncclKernel_AllReduce_..., ncclDevKernel_...)
_COLLECTIVE_NAME = "nccl%"


def _collectives(s: Schema) -> pd.DataFrame:
    """Every NCCL kernel, in graphs or eager: ``proc, corr_id, start_ns, end_ns, stream,
    device, name``. Ranks of a tensor-parallel group meet in these kernels, so a rank whose
    host stalled makes its peers' kernels run long."""
    cols = ["proc", "corr_id", "start_ns", "end_ns", "stream", "device"]
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    tcols = s.columns(table)
    name_col = "shortName" if "shortName" in tcols else "demangledName" if "demangledName" in tcols else None
    empty = pd.DataFrame({c: pd.Series(dtype=_INT) for c in cols} | {"name": pd.Series(dtype=str)})
    if name_col is None:
        return empty
    names = dict(s.conn.execute(
        f"SELECT id, value FROM StringIds WHERE value LIKE '{_COLLECTIVE_NAME}'"))
    if not names:
        return empty
    pid = "IFNULL(globalPid, -1)" if "globalPid" in tcols else "-1"
    ids = ",".join(str(i) for i in names)
    proc, corr, start, end, stream, device, name_id = _read(
        s.conn, f"SELECT {pid}, IFNULL(correlationId, -1), start, end, streamId, deviceId, "
                f"{name_col} FROM {table} WHERE {name_col} IN ({ids})", "iiiiiii")
    df = _frame(cols, [np.where(proc >= 0, proc >> 24, -1), corr, start, end, stream, device])
    df["name"] = pd.Categorical(pd.Series(name_id).map(names).to_numpy())
    return df.sort_values(["proc", "start_ns"], kind="stable").reset_index(drop=True)


def _threads(s: Schema) -> pd.DataFrame:
    if not s.has("ThreadNames"):
        return pd.DataFrame({"tid": pd.Series(dtype=_INT), "thread_name": pd.Series(dtype=str)})
    return _query(s, "SELECT t.globalTid, COALESCE(CAST(s.value AS TEXT), '') FROM ThreadNames t "
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
