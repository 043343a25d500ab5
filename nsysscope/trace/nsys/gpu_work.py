"""The GPU side: each graph launch's replay, aggregated in SQL, and the eager GPU work; and
every graph op a time window at a time, for a timeline of every graph node
(:func:`gpu_op_blocks`).

The big tables (kernels, copies, memsets: ~200 rows per replay with
``--cuda-graph-trace=node``, 98 % of a trace's rows) are folded as they are read: a replay's
rows group by process and correlation id into first start, last end, stream, device and
count, and an eager op's row comes as it is (:func:`_table_pass`). So only one row per
launch, and one per eager op, ever reaches Python. With
``--cuda-graph-trace=graph`` each replay is one ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` row.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...util.text import name_text
from ..apis import LAUNCH_APIS, process_of_pid
from ..arrays import INT, frame
from ..names import sql_name
from ..time_range import EVERY_CALL, CallRows
from .schema import Schema, connect_readonly

GRAPH_WORK_COLUMNS = ["proc", "corr_id", "gpu_start_ns", "gpu_end_ns", "stream", "device", "n_ops",
                      "graph_exec"]
#: a replay's graph exec where the trace does not name it
NO_EXEC = -1
#: the graph exec of a node row: nsys numbers a node ``graphId << 32 | node``, and a replayed
#: node's graph is the instantiated exec (the ``graphExecId`` of its graph-trace row)
_EXEC_OF_NODE = "(graphNodeId >> 32)"
EAGER_COLUMNS = ["start_ns", "end_ns", "stream", "device", "corr_id", "proc", "kind", "copy_kind",
                 "src_kind", "dst_kind", "bytes"]
_GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET")
#: what an eager op is: ``gpu_ops.kind``
GPU_KINDS = ["kernel", "memcpy", "memset"]
# per table: SQL for the copy columns of an eager op (copy_kind, src_kind, dst_kind, bytes);
# what a table lacks is -1 (bytes: 0 for kernels)
_COPY_SQL = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["-1", "-1", "-1", "0"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["copyKind", "IFNULL(srcKind, -1)", "IFNULL(dstKind, -1)",
                                   "bytes"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["-1", "-1", "-1", "bytes"],
}


class GpuWork:
    """The GPU activity tables read, as graph-replay work and eager ops.

    Each table is two passes (:func:`_table_pass`): a graph replay's rows (``graphNodeId``
    set) folded per process and correlation id, and every eager op's row as it is (its rowid
    orders ties). ``of_calls``: the work of the calls read (:meth:`.TimeRange.of_calls`). Both
    tables are made here, on the thread that read them (:meth:`.Schema.at_once`)."""

    def __init__(self, s: Schema, of_calls: CallRows = EVERY_CALL) -> None:
        present = {t: s.columns(t) for t in _GPU_TABLES if s.columns(t)}
        self.has_node_tables = any("graphNodeId" in c for c in present.values())
        passes = s.at_once({t: functools.partial(_table_pass, s, t, c, "graphNodeId" in c,
                                                 of_calls) for t, c in present.items()})
        self._graph = [g for g, _ in passes.values()]
        self._eager = [e + [np.full(len(e[0]), _GPU_TABLES.index(t), dtype=np.int64)]
                       for t, (_, e) in passes.items()]
        self._eager_ops, self._graph_work = self._eager_frame(), self._graph_frame()
        del self._graph, self._eager  # the rows read, now in the two tables

    def eager_ops(self) -> pd.DataFrame:
        """Eager GPU work (not part of a graph replay): kernels, copies and memsets, by start
        (ties: in table order, then row order)."""
        return self._eager_ops

    def graph_work(self) -> pd.DataFrame:
        """``proc, corr_id, gpu_start_ns, gpu_end_ns, stream, device, n_ops, graph_exec`` per
        process and correlation id of graph-replay work, sorted by both (a replay spread over
        several tables, kernels and memsets say, is merged)."""
        return self._graph_work

    def _eager_frame(self) -> pd.DataFrame:
        if not self._eager:
            return pd.DataFrame({c: pd.Series(dtype=INT if c != "kind" else str)
                                 for c in EAGER_COLUMNS})
        start, end, stream, device, corr, proc, *copy, rowid, kind = (
            np.concatenate(cols) for cols in zip(*self._eager, strict=True))
        # by start, ties in table order: the C reader gives each table in rowid order, which
        # a stable sort by start alone keeps
        in_order = len(kind) < 2 or bool(np.all((np.diff(kind) > 0) | (
            (np.diff(kind) == 0) & (np.diff(rowid) > 0))))
        order = np.argsort(start, kind="stable") if in_order else \
            np.lexsort((rowid, kind, start))
        df = frame(EAGER_COLUMNS, [a[order] for a in
                                   (start, end, stream, device, corr, proc, kind, *copy)])
        df["kind"] = pd.Categorical.from_codes(df["kind"].to_numpy(), categories=GPU_KINDS)
        return df

    def _graph_frame(self) -> pd.DataFrame:
        p, c, t0, t1, stream, device, n, ex = (
            [np.concatenate(cols) for cols in zip(*self._graph, strict=True)] if self._graph
            else [np.empty(0, np.int64)] * 8)
        order = np.lexsort((c, p))
        p, c, t0, t1, stream, device, n, ex = (v[order] for v in
                                               (p, c, t0, t1, stream, device, n, ex))
        same = (c[1:] == c[:-1]) & (p[1:] == p[:-1])
        if len(c) > 1 and same.any():
            first = np.flatnonzero(np.r_[True, ~same])
            p, c = p[first], c[first]
            t0, stream, device, ex = (np.minimum.reduceat(v, first)
                                      for v in (t0, stream, device, ex))
            t1 = np.maximum.reduceat(t1, first)
            n = np.add.reduceat(n, first)
        return frame(GRAPH_WORK_COLUMNS, [p, c, t0, t1, stream, device, n, ex])


def _table_pass(s: Schema, table: str, tcols: frozenset[str], has_node: bool,
                of_calls: CallRows) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One table's graph groups (proc, corr, start, end, stream, device, count, exec) and eager rows
    (start, end, stream, device, corr, proc, copy_kind, src_kind, dst_kind, bytes, rowid).

    Where the reader filters in SQLite (:attr:`.Schema.filters_first`) these are two passes,
    one returning the eager rows, one folding the replays' (SQLite's cost grows with the
    columns it returns, and a row filtered out costs little); elsewhere (DuckDB converts every
    selected value of every row before it filters) one ``GROUP BY`` in which an eager op is a
    group of its own (:func:`_one_pass`)."""
    copy = _COPY_SQL[table]
    # the process of each row: correlation ids restart in every process
    pid = "IFNULL(globalPid, -1)" if "globalPid" in tcols else "-1"
    calls = of_calls.sql("globalPid" in tcols)
    if has_node and not s.filters_first:
        return _one_pass(s, table, copy, pid, calls, of_calls)
    # an eager op's row as it is (its rowid orders ties); without graphNodeId (an old
    # export) every row is one
    eager_sql = (f'SELECT start, "end", streamId, deviceId, IFNULL(correlationId, -1), {pid}, '
                 + ", ".join(copy) + f", rowid FROM {table} "
                 f"WHERE {'graphNodeId IS NULL' if has_node else 'TRUE'}{calls}")
    eager = s.read(eager_sql, "i" * 11, split=table, within=of_calls)
    eager[5] = process_of_pid(eager[5])
    if not has_node:
        return [np.empty(0, np.int64)] * 8, eager
    # a replay's rows fold into one group per process and correlation id (a read grouped by
    # runs: kinds k, n, x, s)
    corr, gpid, start, end, stream, device, count, ex = s.read(
        f'SELECT correlationId, {pid}, start, "end", streamId, deviceId, 1, {_EXEC_OF_NODE} '
        f"FROM {table} WHERE graphNodeId IS NOT NULL AND correlationId IS NOT NULL{calls}",
        "kknxnnsn", split=table, within=of_calls)
    return [process_of_pid(gpid), corr, start, end, stream, device, count, ex], eager


def _one_pass(s: Schema, table: str, copy: list[str], pid: str, calls: str,
              of_calls: CallRows) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`_table_pass`'s two results from one grouped read: a replay's rows group by
    correlation id and process, an eager op's row is a group alone under the key
    ``-1 - rowid``."""
    # a copy column the table lacks is a constant, made here (each folded column of 20 M
    # kernel rows costs DuckDB ~0.2 s)
    read = [c for c in copy if not c.lstrip("-").isdigit()]
    key, gpid, start, end, stream, device, count, ex, corr, *copied = s.read(
        f"SELECT CASE WHEN graphNodeId IS NULL THEN -1 - rowid ELSE correlationId END, {pid}, "
        f'start, "end", streamId, deviceId, 1, IFNULL({_EXEC_OF_NODE}, {NO_EXEC}), '
        "IFNULL(correlationId, -1)" + "".join(f", {c}" for c in read)
        + f" FROM {table} WHERE (graphNodeId IS NULL OR correlationId IS NOT NULL){calls}",
        "kknxnnsn" + "n" * (1 + len(read)), split=table,
        within=of_calls)
    proc = process_of_pid(gpid)
    eager, graph = key < 0, key >= 0
    got = iter(copied)
    copy_cols = [next(got)[eager] if c in read else np.full(int(eager.sum()), int(c), np.int64)
                 for c in copy]
    return ([v[graph] for v in (proc, key, start, end, stream, device, count, ex)],
            [v[eager] for v in (start, end, stream, device, corr, proc)] + copy_cols
            + [-1 - key[eager]])


def graph_work(s: Schema, api: pd.DataFrame, gpu: GpuWork,
               of_calls: CallRows = EVERY_CALL) -> tuple[pd.DataFrame, str]:
    """Per graph launch: the span of its GPU work, from node rows or graph-trace rows
    (``of_calls``: as :class:`GpuWork`'s)."""
    mode = "none"
    if gpu.has_node_tables:
        df = gpu.graph_work()
        mode = "node" if len(df) else mode
    else:
        df = pd.DataFrame({c: pd.Series(dtype=INT) for c in GRAPH_WORK_COLUMNS})
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    if s.has(table):
        has_pid = "globalPid" in s.columns(table)
        pid = "IFNULL(globalPid, -1)" if has_pid else "-1"
        exec_id = "IFNULL(graphExecId, -1)" if "graphExecId" in s.columns(table) else NO_EXEC
        g = frame(GRAPH_WORK_COLUMNS, s.read(
            f'SELECT {pid}, IFNULL(correlationId, -1), start, "end", streamId, deviceId, 1, '
            f"{exec_id} FROM {table} WHERE TRUE{of_calls.sql(has_pid)}", "iiiiiiii",
            split=table, within=of_calls))
        g["proc"] = process_of_pid(g["proc"])
        seen = pd.MultiIndex.from_frame(df[["proc", "corr_id"]])
        g = g[~pd.MultiIndex.from_frame(g[["proc", "corr_id"]]).isin(seen)]
        df = pd.concat([df, g], ignore_index=True)
        mode = "graph" if mode == "none" and len(g) else mode
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    if (df["proc"] < 0).any():
        df = _fold_replays(own_process(df, api))
    keep = pd.MultiIndex.from_frame(df[["proc", "corr_id"]]).isin(
        pd.MultiIndex.from_frame(launches))
    return df[keep].reset_index(drop=True), mode


def _fold_replays(df: pd.DataFrame) -> pd.DataFrame:
    """One row per replay again, where its rows came from tables with and without
    ``globalPid`` (a kernel table without it, copies with it: one replay was two groups, and
    each launch was counted twice) and now have one process."""
    if not df.duplicated(["proc", "corr_id"]).any():
        return df
    return df.groupby(["proc", "corr_id"], as_index=False, sort=True).agg(
        gpu_start_ns=("gpu_start_ns", "min"), gpu_end_ns=("gpu_end_ns", "max"),
        stream=("stream", "min"), device=("device", "min"), n_ops=("n_ops", "sum"),
        graph_exec=("graph_exec", "min"))[GRAPH_WORK_COLUMNS]


def own_process(df: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """GPU rows without a ``globalPid`` (older exports) belong to the only process with CUDA
    calls; with several processes they stay unattributed (-1) rather than guessed."""
    if not (df["proc"] < 0).any():  # every row has its process (the calls need not be read)
        return df
    procs = api["proc"].unique()
    if len(procs) == 1:
        df = df.assign(proc=df["proc"].where(df["proc"] >= 0, procs[0]))
    return df


#: the columns of :func:`gpu_op_blocks`
GPU_OP_COLUMNS = ["proc", "device", "stream", "start_ns", "end_ns", "corr_id", "name"]
#: per table: the column that names an op (a kernel's short name, a StringIds id; a copy's or
#: a memset's size) and how its name reads
_OP_NAMES = {"CUPTI_ACTIVITY_KIND_KERNEL": ("IFNULL(shortName, -1)", None),
             "CUPTI_ACTIVITY_KIND_MEMCPY": ("IFNULL(bytes, -1)", "memcpy {} B"),
             "CUPTI_ACTIVITY_KIND_MEMSET": ("IFNULL(bytes, -1)", "memset {} B")}


def gpu_op_blocks(db: os.PathLike[str] | str, bounds: Sequence[int] = (),
                  rows: int = 100_000) -> Iterator[pd.DataFrame]:
    """Every kernel, copy and memset of the graph replays of the export ``db`` (where the
    export marks them: ``graphNodeId``; every op of an older one), ``rows`` at a time
    (:data:`GPU_OP_COLUMNS`: process key, device, stream, start, end, correlation id and a
    name, a kernel's short name or ``memcpy N B``), for a timeline of every graph node
    (``export --all-kernels``).

    Read a time window at a time (``bounds``: the ascending start times between windows,
    :func:`op_window_bounds`), each window with one read of each table (nsysscope's column
    reader: no Python object per value) and sorted by process, device, stream and start
    (ties: the longest first, then by correlation id, then in table and row order): so a
    stream's ops come in order of start from window to window, and millions of them are
    never all held."""
    path = Path(db)
    with Schema(connect_readonly(path), path) as s:
        present = [t for t in _OP_NAMES if s.has(t)]
        names = _OpNames(s)
        edges = [np.iinfo(np.int64).min, *bounds, np.iinfo(np.int64).max]
        for lo, hi in itertools.pairwise(edges):
            window = [_ops_of(s, t, lo, hi, names) for t in present]
            if not window:
                return
            proc, device, stream, start, end, corr, name = (
                np.concatenate(cols) for cols in zip(*window, strict=True))
            order = np.lexsort((corr, -end, start, stream, device, proc))
            block = frame(GPU_OP_COLUMNS[:-1], [v[order] for v in
                                                (proc, device, stream, start, end, corr)])
            block["name"] = names.categorical(name[order])
            for at in range(0, len(block), rows):
                yield block.iloc[at:at + rows]


def op_window_bounds(gpu_start_ns: np.ndarray, n_ops: np.ndarray,
                     rows: int = 500_000) -> list[int]:
    """The start times between the time windows :func:`gpu_op_blocks` reads, so that each
    holds about ``rows`` graph ops, from each replay's first start and count of ops (a
    replay without GPU work: NaN, left out). Any times would give the same ops: these only
    bound how many are held at once."""
    start = np.asarray(gpu_start_ns, dtype=np.float64)
    known = np.isfinite(start)
    order = np.argsort(start[known], kind="stable")
    done = np.cumsum(np.asarray(n_ops, dtype=np.int64)[known][order])
    cut = np.searchsorted(done, np.arange(rows, int(done[-1]) if len(done) else 0, rows))
    bounds: list[int] = np.unique(start[known][order][cut].astype(np.int64)).tolist()
    return bounds


def _ops_of(s: Schema, table: str, lo: int, hi: int,
            names: _OpNames) -> list[np.ndarray]:
    """``table``'s graph ops that start in ``[lo, hi)``: process key, device, stream, start,
    end, correlation id, and a code of the op's name (:class:`_OpNames`)."""
    column, _ = _OP_NAMES[table]
    nodes = "graphNodeId IS NOT NULL AND " if "graphNodeId" in s.columns(table) else ""
    gpid, device, stream, start, end, corr, named = s.read(
        f'SELECT IFNULL(globalPid, -1), deviceId, streamId, start, "end", '
        f"IFNULL(correlationId, -1), {column} FROM {table} "
        f"WHERE {nodes}start >= ? AND start < ?", "iiiiiii", (lo, hi), split=table)
    return [process_of_pid(gpid), device, stream, start, end, corr,
            names.code(table, named)]


class _OpNames:
    """The names of GPU ops as codes into one list of distinct names: a table's naming value
    (a StringIds id, a size) to its name's code, and codes to a categorical of the names."""

    def __init__(self, s: Schema) -> None:
        self.s = s
        self.codes: dict[tuple[str, int], int] = {}  # (table, naming value): code
        self.names: dict[str, int] = {}  # name: code

    def code(self, table: str, values: np.ndarray) -> np.ndarray:
        """The code of each op's name (-1: none, a copy of unknown size)."""
        distinct, inverse = np.unique(values, return_inverse=True)
        form = _OP_NAMES[table][1]
        new = [int(v) for v in distinct if (table, int(v)) not in self.codes]
        text = self._strings(new) if form is None else \
            {v: form.format(v) for v in new if v >= 0}
        for v in new:
            name = text.get(v, "kernel" if form is None else None)
            self.codes[(table, v)] = -1 if name is None else \
                self.names.setdefault(name, len(self.names))
        codes = np.array([self.codes[(table, int(v))] for v in distinct], dtype=np.int64)
        return codes[inverse]

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=pd.Index(list(self.names),
                                                                    dtype=object))

    def _strings(self, ids: list[int]) -> dict[int, str]:
        """StringIds' text of each of ``ids`` it holds."""
        if not ids or not self.s.has("StringIds"):
            return {}
        found = self.s.conn.execute(f"SELECT id, {sql_name('value')} FROM StringIds "
                                    f"WHERE id IN ({','.join(map(str, ids))})")
        return {int(i): name_text(v) for i, v in found if v is not None}
