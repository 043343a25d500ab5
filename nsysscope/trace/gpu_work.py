"""The GPU side: each graph launch's replay, aggregated in SQL, and the eager GPU work.

The big tables (kernels, copies, memsets: ~200 rows per replay with
``--cuda-graph-trace=node``) are read in one pass, split in rowid ranges over worker threads
with a read-only connection each (SQLite releases the GIL while it works). Each range is one
``GROUP BY``: a replay's rows group by process and correlation id into first start, last end,
stream, device and count; an eager op's row is a group of its own. With
``--cuda-graph-trace=graph`` each replay is one ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` row.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from .apis import LAUNCH_APIS
from .arrays import INT, frame, read, workers
from .schema import Schema, connect_readonly

#: rows of an activity table one worker aggregates at a time
_PART_ROWS = 1 << 20
#: SQLite page cache of a worker's connection, KiB: it also bounds the in-memory sort
_SORT_KB = 65536
GRAPH_WORK_COLUMNS = ["proc", "corr_id", "gpu_start_ns", "gpu_end_ns", "stream", "device", "n_ops"]
_GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET")
_GPU_KINDS = ["kernel", "memcpy", "memset"]
# per table: SQL for the copy columns of an eager op (copy_kind, src_kind, dst_kind, bytes);
# what a table lacks is filled in with -1 (bytes: 0 for kernels)
_COPY_SQL = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["copyKind", "IFNULL(srcKind, -1)", "IFNULL(dstKind, -1)",
                                   "bytes"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["bytes"],
}


class GpuReader:
    """One pass over the GPU activity tables (kernels, copies, memsets), split in rowid ranges
    over worker threads with a read-only connection each (SQLite releases the GIL while it
    works). Each range is one ``GROUP BY``: a graph replay's rows (``graphNodeId`` set) group
    by correlation id into first start, last end, stream, device and count; an eager op's row
    is a group of its own (keyed by its negated rowid), so it comes back as is."""

    def __init__(self, db: Path, s: Schema) -> None:
        self.db, self.s = db, s
        self.workers = workers()
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="nsysscope-sql") \
            if self.workers > 1 else None
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._jobs: list | None = None

    def __enter__(self) -> GpuReader:
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
        return [(int(x), int(y)) for x, y in zip(edges[:-1], edges[1:], strict=False) if y > x]

    def start(self) -> GpuReader:
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
            key, gpid, eager, start, end, stream, device, corr, count, *cp = read(
                self._conn(), sql, "i" * (9 + n_copy), (lo, hi))
            e = eager.astype(bool)
            g = ~e
            proc = np.where(gpid >= 0, gpid >> 24, -1)
            graph = [proc[g], corr[g], start[g], end[g], stream[g], device[g], count[g]]
            rowid = -key[e]
            eager_cols = [start[e], end[e], stream[e], device[e], corr[e], proc[e]] + \
                [c[e] for c in cp]
        else:
            sql = (f"SELECT rowid, start, end, streamId, deviceId, IFNULL(correlationId, -1), {pid}"
                   + "".join(f", {c}" for c in copy) +
                   f" FROM {table} WHERE rowid >= ? AND rowid < ?")
            rowid, *eager_cols = read(self._conn(), sql, "i" * (7 + n_copy), (lo, hi))
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
            return pd.DataFrame({c: pd.Series(dtype=INT if c != "kind" else str) for c in cols})
        arrays = [np.concatenate([g[j] for g in got]) for j in range(12)]
        start, kind, rowid = arrays[0], arrays[6], arrays[11]
        order = np.lexsort((rowid, kind, start))  # by start; ties in table, then row order
        df = frame(cols, [a[order] for a in arrays[:11]])
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
        return frame(GRAPH_WORK_COLUMNS, [p, c, t0, t1, stream, device, n])

    def has_node_tables(self) -> bool:
        return any("graphNodeId" in self.s.columns(t) for t in _GPU_TABLES)


class _Done:
    """A finished result where a Future is expected (no worker threads)."""

    def __init__(self, value) -> None:
        self.value = value

    def result(self):
        return self.value


def graph_work(s: Schema, api: pd.DataFrame, reader: GpuReader) -> tuple[pd.DataFrame, str]:
    """Per graph launch: the span of its GPU work, from node rows or graph-trace rows."""
    mode = "none"
    if reader.has_node_tables():
        df = reader.graph_work()
        mode = "node" if len(df) else mode
    else:
        df = pd.DataFrame({c: pd.Series(dtype=INT) for c in GRAPH_WORK_COLUMNS})
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    if s.has(table):
        pid = "IFNULL(globalPid, -1)" if "globalPid" in s.columns(table) else "-1"
        g = frame(GRAPH_WORK_COLUMNS, read(
            s.conn, f"SELECT {pid}, IFNULL(correlationId, -1), start, end, streamId, deviceId, 1 "
                    f"FROM {table}", "iiiiiii"))
        g["proc"] = np.where(g["proc"] >= 0, g["proc"].to_numpy() >> 24, -1)
        seen = pd.MultiIndex.from_frame(df[["proc", "corr_id"]])
        g = g[~pd.MultiIndex.from_frame(g[["proc", "corr_id"]]).isin(seen)]
        df = pd.concat([df, g], ignore_index=True)
        mode = "graph" if mode == "none" and len(g) else mode
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    df = own_process(df, api)
    keep = pd.MultiIndex.from_frame(df[["proc", "corr_id"]]).isin(
        pd.MultiIndex.from_frame(launches))
    return df[keep].reset_index(drop=True), mode


def own_process(df: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """GPU rows without a ``globalPid`` (older exports) belong to the only process with CUDA
    calls; with several processes they stay unattributed (-1) rather than guessed."""
    procs = api["proc"].unique()
    if len(procs) == 1 and (df["proc"] < 0).any():
        df = df.assign(proc=df["proc"].where(df["proc"] >= 0, procs[0]))
    return df
