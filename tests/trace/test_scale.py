"""Scale: the trace replicator and the parallel loader (many traces at once: tests/batch).

Fast and small: nothing here is timed (the timings live in bench/, see bench/README.md)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsysscope import analyze, load
from nsysscope.analysis.collectives import communicators
from nsysscope.trace import columnar, resolve
from nsysscope.trace.nsys import tables
from nsysscope.trace.nsys.gpu_work import GpuWork
from nsysscope.trace.nsys.schema import Schema, connect_readonly

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import replicate as rep  # noqa: E402

pytestmark = pytest.mark.slow  # replicas of a sample, three times its size

K = 3


@pytest.fixture(scope="module")
def replica(sample_path, tmp_path_factory):
    """case1 (300 launches) replicated K times."""
    src = resolve(sample_path("case1"))
    dst = tmp_path_factory.mktemp("replica") / "case1_x3.sqlite"
    info = rep.replicate(src, dst, k=K)
    return src, dst, info


def _tiled(a: pd.Series, k: int) -> pd.Series:
    return pd.Series(np.tile(a.to_numpy(), k))


def _same(x: pd.Series, y: pd.Series) -> bool:
    x, y = x.reset_index(drop=True), y.reset_index(drop=True)
    return bool(((x == y) | (x.isna() & y.isna())).all())


def test_replica_has_k_times_the_launches_with_the_same_classes(replica, analysed):
    src, dst, info = replica
    a = analysed("case1")
    b = analyze(load(dst))
    assert info["launches"] == K * info["source_launches"] == K * len(a.launches)
    assert len(b.launches) == K * len(a.launches)
    assert (b.launches["klass"].astype(str).to_numpy()
            == np.tile(a.launches["klass"].astype(str).to_numpy(), K)).all()
    for col in ("window_ns", "gpu_idle_ns", "n_ops", "api_chain", "stall", "phase"):
        assert _same(_tiled(a.launches[col], K), b.launches[col]), col
    # every replica starts after the previous one ended, in time and in correlation ids
    per = len(a.launches)
    starts = b.launches["api_start_ns"].to_numpy()
    assert (starts[per:] > starts[:-per]).all()
    assert b.launches["corr_id"].is_unique


def test_replica_keeps_every_activity_table_consistent(replica):
    src, dst, _ = replica
    with sqlite3.connect(src) as s, sqlite3.connect(dst) as d:
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                      "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
                      "NVTX_EVENTS", "TARGET_INFO_CUDA_STREAM"):
            n_src = s.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            assert d.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == K * n_src, table
        for table in ("StringIds", "ThreadNames", "META_DATA_EXPORT"):
            assert (d.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                    == s.execute(f"SELECT COUNT(*) FROM {table}").fetchone()), table
        # GPU work, syncs and event records all point at an API call of their own replica
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                      "CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
            orphans = d.execute(
                f"SELECT COUNT(*) FROM {table} WHERE correlationId NOT IN "
                "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
            src_orphans = s.execute(
                f"SELECT COUNT(*) FROM {table} WHERE correlationId NOT IN "
                "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
            assert orphans == K * src_orphans, table
        # each event sync links to exactly the records of its own replica
        q = ("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y JOIN "
             "CUPTI_ACTIVITY_KIND_CUDA_EVENT e ON e.eventSyncId = y.eventSyncId")
        assert d.execute(q).fetchone()[0] == K * s.execute(q).fetchone()[0]
        span = d.execute("SELECT startTime, stopTime FROM ANALYSIS_DETAILS").fetchone()
        last = d.execute("SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        assert span[0] <= last <= span[1]


def test_reduced_variant_keeps_spans_and_classes(sample_path, tmp_path, analysed):
    src = resolve(sample_path("case1"))
    dst = tmp_path / "reduced.sqlite"
    rep.replicate(src, dst, k=2, graph_op_stride=10)
    a, b = analysed("case1"), analyze(load(dst))
    assert (b.launches["klass"].astype(str).to_numpy()
            == np.tile(a.launches["klass"].astype(str).to_numpy(), 2)).all()
    for col in ("gpu_start_ns", "gpu_end_ns"):
        shift = b.launches[col].to_numpy()[: len(a.launches)]
        assert np.array_equal(shift, a.launches[col].to_numpy(), equal_nan=True)
    kept = b.launches["n_ops"].to_numpy()[: len(a.launches)]
    assert (kept < a.launches["n_ops"].to_numpy()).all() and (kept >= 2).all()


def test_rank_copies_are_more_processes_of_one_server(sample_path, tmp_path, analysed):
    """bench/replicate.py --ranks: the two-rank sample copied 4 times in processes is an
    eight-rank server in one export: 8 pids on 8 GPUs, each rank copy's launches its source
    rank's (the same times and correlation ids, as the processes of a real export number
    their own), classed and timed alike, and its collectives one group of 8 ranks (they end
    together) in which each rank waits as its source rank did."""
    src = resolve(sample_path("tp2_case1"))
    dst = tmp_path / "tp8.sqlite"
    info = rep.replicate(src, dst, k=1, ranks=4)
    a, b = analysed("tp2_case1"), analyze(load(dst))
    assert info["launches"] == 4 * info["source_launches"] == 4 * len(a.launches)
    assert b.trace.processes["proc"].nunique() == 8
    assert sorted(b.trace.graph_work["device"].unique()) == list(range(8))
    assert communicators(b.trace.collectives).nunique() == 1
    source_pid = dict(zip(a.trace.processes["proc"], a.trace.processes["pid"], strict=True))
    pid_shift = max(source_pid.values()) + 1
    keys = ["corr_id", "api_start_ns", "klass", "window_ns", "gpu_idle_ns", "n_ops", "stall",
            "collective_wait_ns"]
    for proc, pid in zip(b.trace.processes["proc"], b.trace.processes["pid"], strict=True):
        mine = b.launches[b.launches["proc"] == proc].reset_index(drop=True)
        src_proc = next(p for p, q in source_pid.items() if q == pid % pid_shift)
        theirs = a.launches[a.launches["proc"] == src_proc].reset_index(drop=True)
        assert len(mine) == len(theirs) == 100
        for col in keys:
            assert _same(mine[col].astype(str), theirs[col].astype(str)), (pid, col)
    waits = b.processes.set_index("pid")["collective_wait_ns"]
    src_waits = a.processes.set_index("pid")["collective_wait_ns"]
    assert (src_waits > 0).all() and src_waits.nunique() == 2
    assert (waits.to_numpy() == src_waits.loc[waits.index % pid_shift].to_numpy()).all()


def test_duckdb_and_sqlite3_read_the_same_tables(replica, monkeypatch):
    """DuckDB on two threads (its parallel scan and hash GROUP BY, launches spread over both)
    reads the same tables as the same SQL through Python's sqlite3, to the nanosecond and in
    the same row order; and on a healthy export DuckDB answers every query itself."""
    _, dst, _ = replica
    monkeypatch.setenv("NSYSSCOPE_THREADS", "2")
    fast = load(dst)
    with Schema(connect_readonly(dst), dst) as s:
        tables.api_table(s), tables.nvtx_table(s), GpuWork(s)
        assert s.read("SELECT 1", "i")[0].tolist() == [1]
        assert s.fallbacks == 0
    monkeypatch.setattr(columnar, "attach", lambda db: None)
    slow = load(dst)
    for name in ("api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx", "threads",
                 "processes", "collectives"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(slow, name), check_exact=True)
    assert fast.meta == slow.meta


def test_loader_columns_and_dtypes(analysed):
    t = analysed("case1").trace
    assert list(t.graph_work.columns) == ["proc", "corr_id", "gpu_start_ns", "gpu_end_ns",
                                         "stream", "device", "n_ops", "graph_exec"]
    assert (t.graph_work.dtypes == "int64").all()
    assert list(t.gpu_ops.columns) == ["start_ns", "end_ns", "stream", "device", "corr_id",
                                      "proc", "kind", "copy_kind", "src_kind", "dst_kind",
                                      "bytes"]
    assert isinstance(t.gpu_ops["kind"].dtype, pd.CategoricalDtype)
    assert list(t.gpu_ops["kind"].cat.categories) == ["kernel", "memcpy", "memset"]
    assert t.gpu_ops["start_ns"].is_monotonic_increasing
    assert t.api["start_ns"].is_monotonic_increasing
    assert isinstance(t.api["name"].dtype, pd.CategoricalDtype)
    assert t.nvtx["start_ns"].is_monotonic_increasing
