#!/usr/bin/env python3
"""Make a large nsys SQLite export by replicating a real one K times.

Replica ``k`` (0-based) is the source trace shifted by ``k * dt`` in time and by ``k * d`` in
every id that links rows of different tables, so each replica is a self-contained copy of
the source run that starts after the previous one ended:

* times: ``start``/``end`` of every activity table (CUDA API calls, kernels, copies,
  memsets, syncs, NVTX ranges, graph-node events, profiler overhead), shifted by ``dt`` =
  the source's whole time span (capture and events) plus 1 ms;
* ``correlationId`` (API call <-> GPU work <-> sync/event record), ``eventSyncId`` and
  ``eventId`` (sync <-> event record), ``gridId``, ``rangeId``, ``callchainId``: shifted
  by the source's maximum + 1;
* ``graphNodeId`` / ``originalGraphNodeId`` (graph id in the high 32 bits): shifted by
  whole graph ids, so node numbers are kept;
* ``streamId``/``nullStreamId`` and ``contextId``: shifted by the maximum + 1 (except the
  ``0xFFFFFFFF`` "no stream" sentinel); ``TARGET_INFO_CUDA_STREAM`` and
  ``TARGET_INFO_CUDA_CONTEXT_INFO`` get a row for every new stream and context. Each replica
  is thus a fresh CUDA context of the same process (same threads) whose graphs replay on
  streams of its own, so its last launch stays the last one on its stream and every launch
  keeps its class.

``--ranks R`` also copies the processes: rank copy ``r`` (0-based) of every replica is each
source process again, at the same times, as another process on other GPUs, the way a server
of R times the source's tensor-parallel ranks records them in one export:

* pids shifted by ``r * P`` (P: the largest pid + 1), in nsys' global thread and process ids
  (``globalTid``, ``globalPid``, ``endGlobalTid``: the pid above bit 24) and in plain pid
  columns (``pid``, ``processId``);
* devices shifted by ``r * D`` (D: the largest device id + 1): ``deviceId``,
  ``srcDeviceId``, ``dstDeviceId``, and the GPU tables' own ids (``TARGET_INFO_GPU``,
  ``TARGET_INFO_CUDA_DEVICE``);
* ids as the source's: a process numbers its own correlations, streams, contexts and
  events, and the source's ranks already share them (each counts from 1);
* the process and thread tables (``PROCESSES``, ``ThreadNames``) and the GPU tables get a
  row per rank copy.

Rank copies of one replica end their collectives together, as the source's ranks do, so
the server's ranks form one group of ``R`` times the source's.

Sentinels (NULL, ``0xFFFFFFFF`` for 32-bit ids, correlation id 0) are never shifted.
Tables with times or correlation ids (e.g. ``CUPTI_ACTIVITY_KIND_CUDA_EVENT``) are
replicated; threads, processes, strings, enums and metadata are copied once (threads,
processes and GPUs once per rank copy with ``--ranks``); ``ANALYSIS_DETAILS`` is
stretched to cover all replicas. The schema is the source's own ``CREATE TABLE`` text.

Everything runs inside SQLite (``INSERT ... SELECT`` over a cross join with a table of
replica numbers), so 10^6 launches (~20 GB from the 5000-step H200 sample) take minutes.

``--graph-op-stride M`` is the reduced variant for when disk or time does not allow full
size: of the graph-replay kernels of each launch it keeps the first and last (by start and
by end, so the launch's GPU span is unchanged) and every M-th; eager kernels and every other
table are untouched, so the analysis classes stay the same and only ``n_ops`` shrinks.

Usage::

    python bench/replicate.py SRC.sqlite[.xz] DST.sqlite (--k K | --launches N)
                              [--graph-op-stride M] [--ranks R]
"""

from __future__ import annotations

import argparse
import lzma
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

SENTINEL32 = 0xFFFFFFFF
TIME_COLUMNS = ("start", "end")
# id column -> id space; a space is shifted by its maximum + 1 over all its columns ("graph":
# by whole graph ids, the high 32 bits of a graph node id)
ID_COLUMNS = {
    "correlationId": "correlation", "eventSyncId": "eventSync", "eventId": "event",
    "gridId": "grid", "rangeId": "range", "callchainId": "callchain",
    "streamId": "stream", "nullStreamId": "stream",
    "contextId": "context", "parentContextId": "context", "greenContextId": "context",
    "srcContextId": "context", "dstContextId": "context",
    "graphNodeId": "graph", "originalGraphNodeId": "graph",
}
# tables without times that are replicated (one row per stream / context)
REPLICATED_UNTIMED = {"TARGET_INFO_CUDA_STREAM", "TARGET_INFO_CUDA_CONTEXT_INFO"}
# --ranks: nsys global ids, with the pid above bit 24; plain pids; device ids
GLOBAL_PID_COLUMNS = {"globalTid", "globalPid", "endGlobalTid"}
PID_COLUMNS = {"pid", "processId"}
DEVICE_COLUMNS = {"deviceId", "srcDeviceId", "dstDeviceId"}
# tables copied once per rank copy (processes, threads, GPUs), and their device id columns
PER_RANK = {"PROCESSES": set(), "ThreadNames": set(), "TARGET_INFO_GPU": {"id", "cuDevice",
            "pwGpuId"}, "TARGET_INFO_CUDA_DEVICE": {"gpuId", "cudaId"}}
PID_BITS = 24  # the pid field of a global id
# tables copied once even though they carry times
COPY_ONCE = {"DIAGNOSTIC_EVENT", "ANALYSIS_DETAILS"}
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({_q(table)})")]


def _source_sqlite(src: Path, workdir: Path) -> tuple[Path, bool]:
    """The source as a plain SQLite file (decompressing .xz next to the output)."""
    if src.name.endswith(".xz"):
        fd, tmp = tempfile.mkstemp(suffix=".sqlite", dir=workdir)
        with os.fdopen(fd, "wb") as out, lzma.open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, length=1 << 22)
        return Path(tmp), True
    return src, False


def graph_launches(conn: sqlite3.Connection, schema: str = "main") -> int:
    """Graph launch API calls in an export (``cudaGraphLaunch*``/``cuGraphLaunch*``)."""
    return conn.execute(
        f"SELECT COUNT(*) FROM {schema}.CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN "
        f"(SELECT id FROM {schema}.StringIds WHERE value LIKE 'cudaGraphLaunch%' "
        "OR value LIKE 'cuGraphLaunch%')").fetchone()[0]


def _plan(conn: sqlite3.Connection, ranks: int = 1) -> dict:
    """Which tables to replicate, the time shift, the per-id-space shifts and, for
    ``ranks`` > 1, the pid and device shifts of a rank copy."""
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM s.sqlite_master WHERE type='table' ORDER BY rowid")]
    cols = {t: _columns(conn, "s", t) for t in tables}
    replicated = [t for t in tables if t not in COPY_ONCE and (
        set(TIME_COLUMNS) & set(cols[t]) or "correlationId" in cols[t] or t in REPLICATED_UNTIMED)]
    t_min, t_max = math.inf, -math.inf
    maxima: dict[str, int] = {}
    for t in replicated:
        c = cols[t]
        if "start" in c:
            lo, hi = conn.execute(f"SELECT MIN(start), MAX(start) FROM s.{_q(t)}").fetchone()
            if lo is not None:
                t_min, t_max = min(t_min, lo), max(t_max, hi)
        if "end" in c:
            hi = conn.execute(f"SELECT MAX(end) FROM s.{_q(t)}").fetchone()[0]
            if hi is not None:
                t_max = max(t_max, hi)
        for col, space in ID_COLUMNS.items():
            if col in c:
                cap = "" if space == "graph" else f" WHERE {_q(col)} < {SENTINEL32}"
                hi = conn.execute(f"SELECT MAX({_q(col)}) FROM s.{_q(t)}{cap}").fetchone()[0]
                if hi is not None:
                    maxima[space] = max(maxima.get(space, 0), int(hi))
    if "ANALYSIS_DETAILS" in tables:
        lo, hi = conn.execute(
            "SELECT MIN(startTime), MAX(stopTime) FROM s.ANALYSIS_DETAILS").fetchone()
        if lo is not None:
            t_min, t_max = min(t_min, lo), max(t_max, hi)
    if t_min is math.inf:
        raise SystemExit("source has no timed activity to replicate")
    dt = int(t_max - t_min) + 1_000_000
    shifts = {space: (((hi >> 32) + 1) << 32) if space == "graph" else hi + 1
              for space, hi in maxima.items()}
    pid, device = _rank_shifts(conn, tables, cols) if ranks > 1 else (0, 0)
    if (pid * ranks) >> PID_BITS:
        raise SystemExit(f"{ranks} rank copies of pids up to {pid - 1} overflow nsys' pid field")
    return dict(tables=tables, cols=cols, replicated=replicated, dt=dt, shifts=shifts,
                ranks=ranks, pid=pid, device=device)


def _rank_shifts(conn: sqlite3.Connection, tables: list[str],
                 cols: dict[str, list[str]]) -> tuple[int, int]:
    """The pid and device shifts of one rank copy: the largest pid and device id + 1."""
    pid = device = -1
    for t in tables:
        for c in cols[t]:
            q = _q(c)
            if c in GLOBAL_PID_COLUMNS:
                pid = max(pid, _largest(conn, t, f"({q} >> {PID_BITS}) & {(1 << PID_BITS) - 1}"))
            elif c in PID_COLUMNS:
                pid = max(pid, _largest(conn, t, q))
            elif _is_device(t, c):
                device = max(device, _largest(conn, t, q, f"{q} < {SENTINEL32}"))
    return pid + 1, device + 1


def _is_device(table: str, col: str) -> bool:
    """Whether ``col`` of ``table`` holds a device id (shifted in a rank copy)."""
    return col in DEVICE_COLUMNS or col in PER_RANK.get(table, ())


def _largest(conn: sqlite3.Connection, table: str, expr: str, where: str = "1") -> int:
    """The largest ``expr`` over the source's ``table`` (-1: no value)."""
    hi = conn.execute(f"SELECT MAX({expr}) FROM s.{_q(table)} WHERE {where}").fetchone()[0]
    return -1 if hi is None else int(hi)


def _expr(table: str, col: str, plan: dict) -> str:
    """``col`` of ``table`` in copy ``c`` (``c.k``: its time replica, ``c.r``: its rank
    copy)."""
    q = _q(col)
    if col in TIME_COLUMNS:
        return f"{q} + c.k * {plan['dt']}"
    if plan["ranks"] > 1:
        if col in GLOBAL_PID_COLUMNS:
            return f"{q} + c.r * {plan['pid'] << PID_BITS}"
        if col in PID_COLUMNS:
            return f"{q} + c.r * {plan['pid']}"
        if _is_device(table, col):
            return f"CASE WHEN {q} >= {SENTINEL32} THEN {q} ELSE {q} + c.r * {plan['device']} END"
    space = ID_COLUMNS.get(col)
    if space not in plan["shifts"]:
        return q
    d = plan["shifts"][space]
    if space == "graph":
        return f"{q} + c.k * {d}"
    keep = f"{q} >= {SENTINEL32}" + (f" OR {q} = 0" if space == "correlation" else "")
    return f"CASE WHEN {keep} THEN {q} ELSE {q} + c.k * {d} END"


def _kept_kernels(conn: sqlite3.Connection, stride: int) -> str:
    """Fill temp table keep_kernel with the source kernel rowids of the reduced variant."""
    conn.execute("CREATE TEMP TABLE keep_kernel (id INTEGER PRIMARY KEY)")
    conn.execute(
        "INSERT INTO keep_kernel SELECT id FROM ("
        "  SELECT rowid id, graphNodeId g,"
        "   ROW_NUMBER() OVER (PARTITION BY correlationId ORDER BY start, rowid) rs,"
        "   ROW_NUMBER() OVER (PARTITION BY correlationId ORDER BY end DESC, rowid) re"
        f"  FROM s.{KERNEL}) "
        f"WHERE g IS NULL OR rs = 1 OR re = 1 OR rs % {stride} = 0")
    return " WHERE t.rowid IN (SELECT id FROM temp.keep_kernel)"


def replicate(src: str | Path, dst: str | Path, k: int | None = None,
              launches: int | None = None, graph_op_stride: int = 1, ranks: int = 1,
              log=None) -> dict:
    """Write ``dst``: the export ``src`` replicated ``k`` times (or enough for ``launches``
    graph launches), each replica ``ranks`` times in processes. Returns a dict of what was
    written."""
    src, dst = Path(src), Path(dst)
    log = log or (lambda msg: None)
    dst.parent.mkdir(parents=True, exist_ok=True)
    plain, is_tmp = _source_sqlite(src, dst.parent)
    tmp = dst.with_name(dst.name + ".partial")
    tmp.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-262144")
        uri = f"file:{plain.resolve().as_posix()}?mode=ro&immutable=1"
        conn.execute(f"ATTACH DATABASE '{uri}' AS s")
        per_copy = graph_launches(conn, "s")
        if k is None:
            if not launches or not per_copy:
                raise SystemExit("give --k, or --launches with a source that has graph launches")
            k = math.ceil(launches / (per_copy * ranks))
        plan = _plan(conn, ranks)
        # each copy: its number (the order copies are written in), time replica, rank copy
        conn.execute("CREATE TEMP TABLE copies (i INTEGER PRIMARY KEY, k INTEGER, r INTEGER)")
        conn.executemany("INSERT INTO copies VALUES (?, ?, ?)",
                         [(j * ranks + r, j, r) for j in range(k) for r in range(ranks)])
        conn.execute("BEGIN")
        for _name, sql in conn.execute(
                "SELECT name, sql FROM s.sqlite_master WHERE type='table' AND sql IS NOT NULL "
                "ORDER BY rowid").fetchall():
            conn.execute(sql)
        for t in plan["tables"]:
            cols = plan["cols"][t]
            names = ", ".join(_q(c) for c in cols)
            if t in plan["replicated"] or (ranks > 1 and t in PER_RANK):
                where = _kept_kernels(conn, graph_op_stride) if (
                    t == KERNEL and graph_op_stride > 1 and "graphNodeId" in cols) else ""
                exprs = ", ".join(_expr(t, c, plan) for c in cols)
                copies = "temp.copies" if t in plan["replicated"] else \
                    "(SELECT * FROM temp.copies WHERE k = 0)"
                sql = (f"INSERT INTO main.{_q(t)} ({names}) SELECT {exprs} "
                       f"FROM {copies} c CROSS JOIN s.{_q(t)} t{where}")
            else:
                sql = f"INSERT INTO main.{_q(t)} ({names}) SELECT {names} FROM s.{_q(t)}"
            t1 = time.perf_counter()
            n = conn.execute(sql).rowcount
            log(f"  {t}: {n} rows ({time.perf_counter() - t1:.1f} s)")
        if "ANALYSIS_DETAILS" in plan["tables"]:
            stretch = (k - 1) * plan["dt"]
            conn.execute(f"UPDATE main.ANALYSIS_DETAILS SET stopTime = stopTime + {stretch}, "
                         f"duration = duration + {stretch}")
        for _name, sql in conn.execute(
                "SELECT name, sql FROM s.sqlite_master WHERE type='index' AND sql IS NOT NULL"
        ).fetchall():
            conn.execute(sql)
        conn.execute("COMMIT")
        n_launches = graph_launches(conn)
        conn.execute("DETACH DATABASE s")
        conn.close()
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
        if is_tmp:
            plain.unlink(missing_ok=True)
    return dict(path=str(dst), k=k, ranks=ranks, launches=n_launches, source_launches=per_copy,
                bytes=dst.stat().st_size, seconds=round(time.perf_counter() - t0, 1),
                dt_ns=plan["dt"], graph_op_stride=graph_op_stride)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--k", type=int, help="number of replicas")
    g.add_argument("--launches", type=int, help="at least this many graph launches")
    ap.add_argument("--graph-op-stride", type=int, default=1, metavar="M",
                    help="reduced variant: keep every M-th graph kernel per launch (plus "
                         "first and last)")
    ap.add_argument("--ranks", type=int, default=1, metavar="R",
                    help="copy each replica's processes R times (other pids and GPUs)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    log = (lambda m: None) if a.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    info = replicate(a.src, a.dst, k=a.k, launches=a.launches,
                     graph_op_stride=a.graph_op_stride, ranks=a.ranks, log=log)
    print(" ".join(f"{key}={val}" for key, val in info.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
